#include "model/desired_json.h"

#include <rapidjson/prettywriter.h>
#include <rapidjson/stringbuffer.h>

#include "model/digest.h"

namespace mesh::model {
namespace {

using Writer = rapidjson::PrettyWriter<rapidjson::StringBuffer>;

void Key(Writer& w, const char* key) {
  w.Key(key);
}
void String(Writer& w, const std::string& value) {
  w.String(value.data(), static_cast<rapidjson::SizeType>(value.size()));
}
void Field(Writer& w, const char* key, const std::string& value) {
  Key(w, key);
  String(w, value);
}
void Field(Writer& w, const char* key, const char* value) {
  Key(w, key);
  w.String(value);
}
void Field(Writer& w, const char* key, int64_t value) {
  Key(w, key);
  w.Int64(value);
}
void Field(Writer& w, const char* key, const std::vector<std::string>& values) {
  Key(w, key);
  w.StartArray();
  for (const std::string& v : values) String(w, v);
  w.EndArray();
}
template <typename Tag>
void Field(Writer& w, const char* key, const std::vector<NamedString<Tag>>& values) {
  Key(w, key);
  w.StartArray();
  for (const auto& v : values) String(w, v.str());
  w.EndArray();
}

// Which kind of credential, never the secret itself.
const char* CredentialKind(const Credential& credential) {
  switch (credential.kind) {
    case Credential::Kind::kNone:
      return "none";
    case Credential::Kind::kPlain:
      return "password";
    case Credential::Kind::kBcrypt:
      return "password_bcrypt";
  }
  return "?";
}

void WriteStream(Writer& w, const StreamSpec& s) {
  w.StartObject();
  Field(w, "name", s.name.str());
  Field(w, "subjects", s.subjects);
  Field(w, "retention", ToApi(s.retention));
  Field(w, "storage", ToApi(s.storage));
  Field(w, "replicas", s.replicas);
  Field(w, "max_age_ns", s.max_age_ns);
  Field(w, "max_msgs", s.max_msgs);
  Field(w, "max_bytes", s.max_bytes);
  Field(w, "discard", ToApi(s.discard));
  Field(w, "description", s.description);
  w.EndObject();
}

void WriteConsumer(Writer& w, const ConsumerSpec& c) {
  w.StartObject();
  Field(w, "stream", c.stream.str());
  Field(w, "durable", c.durable.str());
  Field(w, "filter_subject", c.filter_subject);
  Field(w, "deliver_subject", c.deliver_subject);
  Field(w, "deliver_group", c.deliver_group);
  Field(w, "ack_policy", ToApi(c.ack));
  Field(w, "deliver_policy", ToApi(c.deliver));
  Field(w, "replay_policy", ToApi(c.replay));
  Field(w, "ack_wait_ns", c.ack_wait_ns);
  Field(w, "max_deliver", c.max_deliver);
  Field(w, "ack_permission", ConsumerId{c.stream, c.durable}.AckPermission());
  w.EndObject();
}

void WritePrincipal(Writer& w, const Principal& p) {
  w.StartObject();
  Field(w, "user", p.user.str());
  Field(w, "kind", ToString(p.kind));
  Field(w, "credential", CredentialKind(p.credential));
  Field(w, "publish_allow", p.publish_allow);
  Field(w, "subscribe_allow", p.subscribe_allow);
  w.EndObject();
}

void WriteUsersFile(Writer& w, const RenderedUsersFile& users) {
  w.StartObject();
  Key(w, "users");
  w.StartArray();
  for (const auto& [user, block] : users.blocks) String(w, user.str());
  w.EndArray();
  Field(w, "without_credential", users.without_credential);
  Field(w, "bytes", static_cast<int64_t>(users.bytes.size()));
  Field(w, "sha256", Sha256Hex(users.bytes));
  w.EndObject();
}

}  // namespace

std::string DesiredToJson(const DesiredState& desired, const RenderedUsersFile* users) {
  rapidjson::StringBuffer buffer;
  Writer w(buffer);
  w.SetIndent(' ', 2);
  w.StartObject();
  Field(w, "mesh", desired.mesh);
  Field(w, "account", desired.account);
  Field(w, "replicas", static_cast<int64_t>(desired.replicas));
  Key(w, "streams");
  w.StartArray();
  for (const StreamSpec& s : desired.streams) WriteStream(w, s);
  w.EndArray();
  Key(w, "consumers");
  w.StartArray();
  for (const ConsumerSpec& c : desired.consumers) WriteConsumer(w, c);
  w.EndArray();
  Key(w, "principals");
  w.StartArray();
  for (const Principal& p : desired.principals) WritePrincipal(w, p);
  w.EndArray();
  Field(w, "without_credential", desired.without_credential);
  if (users != nullptr) {
    Key(w, "users_file");
    WriteUsersFile(w, *users);
  }
  w.EndObject();
  return std::string(buffer.GetString(), buffer.GetSize()) + "\n";
}

}  // namespace mesh::model
