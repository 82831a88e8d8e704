#include "model/desired_json.h"

#include "model/digest.h"
#include "model/spec_json.h"

namespace mesh::model {
namespace {

using json::Field;
using json::String;
using json::Writer;

void Key(Writer& w, const char* key) {
  w.Key(key);
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

void WriteConsumer(Writer& w, const ConsumerSpec& c) {
  w.StartObject();
  json::WriteConsumerSpecFields(w, c);
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
  for (const auto& [user, span] : users.entries) String(w, user.str());
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
  Field(w, "schema", kDesiredSchema);
  Field(w, "mesh", desired.mesh);
  Field(w, "account", desired.account);
  Field(w, "replicas", static_cast<int64_t>(desired.replicas));
  Key(w, "streams");
  w.StartArray();
  for (const StreamSpec& s : desired.streams) json::WriteStreamSpec(w, s);
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
