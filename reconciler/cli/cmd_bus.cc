// The bus commands on-call needs when the runbook says "delete it so that the reconciler
// creates it again" or "look at that consumer", without a tool the image lacks (the `nats`
// CLI): show-stream, show-consumer, delete-stream, delete-consumer. They take the pass
// settings (inside the sidecar: its environment), connect as the reconciler's user, the one
// allowed $JS.API.>, and send one JetStream API request each.
//
// Deleting is for the mesh's objects only: the stream must carry the ownership mark of the
// records' mesh (conventions 7.2), as the planner requires before it touches anything; a
// foreign stream, KV bucket or someone else's consumer is refused, and the deletion must be
// confirmed with --yes typed on the command line (never read from the environment).
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/desired.h"
#include "model/json_read.h"
#include "observers/bus.h"
#include "observers/jetstream.h"
#include "observers/jetstream_api.h"
#include "reconciler/apply/apply.h"
#include "reconciler/cli/commands.h"
#include "reconciler/pass/records_source.h"

namespace mesh::reconciler {
namespace {

using observers::jsapi::kConsumerNotFound;
using observers::jsapi::kStreamNotFound;

constexpr char kShowStreamHelpText[] =
    R"(Usage: mesh-reconciler show-stream NAME [flags]

Prints what the server answers for one stream (STREAM.INFO): its configuration, its state
(messages, bytes, first and last sequence, consumers) and its cluster, one "field value" line
each, and whether it carries the mesh's ownership mark. Changes nothing.
--json (or -o json): {"schema":"mesh-reconciler/stream/v1","name","owned","info"} with the
server's answer in "info", less the response's own members (type, paging)
(docs/schemas/stream.v1.schema.json).

Exit codes: 0 shown, 1 error (no such stream, bus unreachable), 64 usage error.
)";

constexpr char kShowConsumerHelpText[] =
    R"(Usage: mesh-reconciler show-consumer STREAM NAME [flags]

Prints what the server answers for one consumer (CONSUMER.INFO): its configuration and its
state (num_pending: not yet delivered; num_ack_pending: delivered, not yet acknowledged;
num_redelivered; num_waiting: pull requests waiting; delivered and ack_floor sequences), one
"field value" line each, and whether its stream carries the mesh's ownership mark. Changes
nothing.
--json (or -o json): {"schema":"mesh-reconciler/consumer/v1","stream","name","owned","info"}
(docs/schemas/consumer.v1.schema.json).

Exit codes: 0 shown, 1 error (no such stream or consumer, bus unreachable), 64 usage error.
)";

constexpr char kDeleteStreamHelpText[] =
    R"(Usage: mesh-reconciler delete-stream NAME --yes [flags]

Deletes one of the mesh's streams, with every message and consumer it holds. For a stream
whose retention or storage must change (drift "differs", report only): drain it, delete it,
and a running reconciler creates it again from the records on its next pass. A stream without
the mesh's ownership mark (a foreign stream, a KV bucket) is refused.

Exit codes: 0 deleted, 1 error (no such stream, not the mesh's, refused by the server, bus
unreachable), 64 usage error (no --yes, a name that is not one subject token).
)";

constexpr char kDeleteConsumerHelpText[] =
    R"(Usage: mesh-reconciler delete-consumer STREAM NAME --yes [flags]

Deletes one durable consumer on one of the mesh's streams; the messages stay in the stream, the
consumer's position (what it delivered and what was acknowledged) is lost. For a consumer whose
ack, deliver or replay policy must change (drift "differs", report only): a running
reconciler creates it again from the records on its next pass, delivering by its deliver
policy. A consumer on a stream without the mesh's ownership mark is refused.

Exit codes: 0 deleted, 1 error (no such consumer, not the mesh's, refused by the server, bus
unreachable), 64 usage error (no --yes, a name that is not one subject token).
)";

// A stream or durable name is one token of an API subject: "A.B" would address another
// object, and wildcards or whitespace no object at all.
bool IsSubjectToken(const std::string& name) {
  if (name.empty() || name.size() > 255) return false;
  for (unsigned char c : name) {
    if (c <= ' ' || c == '.' || c == '*' || c == '>' || c == 0x7f) return false;
  }
  return true;
}

enum class Needs { kRecords, kNoRecords };

// Checks the arguments (exactly `names` positional names, each a subject token) and the flags,
// and loads the password. Returns an exit code when the command cannot go on.
std::optional<int> CheckBusCommand(Settings& settings, const char* command, size_t names,
                                   Needs needs) {
  if (settings.positional.size() != names) {
    return CommandUsage(command, names == 1 ? "expected one stream name"
                                            : "expected the stream's name and the consumer's");
  }
  for (const std::string& name : settings.positional) {
    if (!IsSubjectToken(name)) {
      return CommandUsage(command,
                          "\"" + name +
                              "\" is not a stream or consumer name (no '.', '*', '>', spaces "
                              "or control characters)");
    }
  }
  if (settings.bus.urls.empty()) return CommandUsage(command, "--bus is required");
  if (needs == Needs::kRecords && settings.records_path.empty()) {
    return CommandUsage(command,
                        "--records is required (it names the mesh whose objects may be deleted)");
  }
  if (Status secrets = LoadSecrets(settings, ProcessEnv); !secrets.ok()) {
    return CommandFail(command, secrets.message());
  }
  return std::nullopt;
}

// The mesh's ownership mark, from the records.
Result<std::string> MarkOf(const Settings& settings) {
  Result<model::ParseOutcome> loaded = LoadRecords(settings.records_path, settings.bus.user);
  if (!loaded.ok()) return loaded.status();
  if (!loaded->ok()) {
    return Status(Errc::kInvalidArgument, "the records are invalid (" +
                                              loaded->errors.front().ToString() +
                                              "); see mesh-reconciler validate");
  }
  return model::OwnershipMark(loaded->records.mesh);
}

// What one request answered: the server's JSON, or why there is none.
struct Answer {
  Status status;
  int err_code = 0;
  rapidjson::Document doc;
};

// The answer's members that describe the response, not the object: its API type and the
// paging of the subjects and deleted lists (STREAM.INFO "total", "offset", "limit").
void DropEnvelope(rapidjson::Document& doc) {
  for (const char* member : {"type", "total", "offset", "limit"}) {
    if (doc.HasMember(member)) doc.RemoveMember(member);
  }
}

// The server's refusal as the bus commands print it: its words and its err_code.
Status Refusal(const std::string& description, int err_code) {
  return Status(Errc::kRefused, description + " (err_code " + std::to_string(err_code) + ")");
}

Answer Ask(observers::BusConnection& bus, const std::string& subject) {
  Answer answer;
  observers::ApiReply reply = bus.Request({subject, ""});
  if (!reply.status.ok()) {
    answer.status = reply.status;
    return answer;
  }
  if (auto error = observers::ParseApiError(reply.payload)) {
    answer.err_code = error->err_code;
    answer.status = Refusal(error->description, error->err_code);
    return answer;
  }
  std::optional<rapidjson::Document> doc = model::json::ParseObject(reply.payload);
  if (!doc) {
    answer.status = Status(Errc::kInternal, "the server's answer to " + subject + " is not JSON");
    return answer;
  }
  answer.doc = std::move(*doc);
  DropEnvelope(answer.doc);
  return answer;
}

Result<std::unique_ptr<observers::BusConnection>> Connect(const Settings& settings) {
  return observers::BusConnection::Connect(settings.bus);
}

bool HasMark(const rapidjson::Value& info, const std::optional<std::string>& mark) {
  if (!mark) return false;
  const rapidjson::Value* config = model::json::Member(info, "config");
  if (config == nullptr || !config->IsObject()) return false;
  const rapidjson::Value* description = model::json::Member(*config, "description");
  return description != nullptr && description->IsString() && description->GetString() == *mark;
}

// "config.ack_policy explicit": one line per scalar, arrays of scalars joined with ",".
void Flatten(const rapidjson::Value& value, const std::string& path,
             std::vector<std::pair<std::string, std::string>>& out) {
  if (value.IsObject()) {
    for (const auto& member : value.GetObject()) {
      const std::string key = member.name.GetString();
      Flatten(member.value, path.empty() ? key : path + "." + key, out);
    }
    return;
  }
  if (value.IsArray()) {
    bool scalars = true;
    for (const auto& item : value.GetArray())
      scalars = scalars && !item.IsObject() && !item.IsArray();
    if (scalars) {
      std::string joined;
      for (const auto& item : value.GetArray()) {
        std::vector<std::pair<std::string, std::string>> one;
        Flatten(item, path, one);
        joined += (joined.empty() ? "" : ",") + one.front().second;
      }
      out.emplace_back(path, joined.empty() ? "[]" : joined);
      return;
    }
    int i = 0;
    for (const auto& item : value.GetArray())
      Flatten(item, path + "[" + std::to_string(i++) + "]", out);
    return;
  }
  std::string text;
  if (value.IsString()) {
    text = value.GetString();
  } else if (value.IsBool()) {
    text = value.GetBool() ? "true" : "false";
  } else if (value.IsNull()) {
    text = "null";
  } else {
    rapidjson::StringBuffer buffer;
    rapidjson::Writer<rapidjson::StringBuffer> writer(buffer);
    value.Accept(writer);
    text = buffer.GetString();
  }
  out.emplace_back(path, text);
}

// What the server holds is anybody's text (a foreign stream's description, a subject): control
// characters are shown as \xNN, so that an escape sequence cannot drive on-call's terminal
// and a newline cannot fake a line of this output.
std::string ForTerminal(std::string_view text) {
  std::string out;
  for (unsigned char c : text) {
    if (c < 0x20 || c == 0x7f) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", c);
      out += escaped;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

void PrintFlat(const rapidjson::Value& info) {
  std::vector<std::pair<std::string, std::string>> lines;
  Flatten(info, "", lines);
  size_t width = 0;
  for (const auto& [key, _] : lines) width = std::max(width, ForTerminal(key).size());
  for (const auto& [key, text] : lines) {
    std::printf("  %-*s  %s\n", static_cast<int>(width), ForTerminal(key).c_str(),
                ForTerminal(text).c_str());
  }
}

// The document --json prints: our schema, the names, the mark, and the server's answer.
std::string ShowJson(const char* schema,
                     const std::vector<std::pair<const char*, std::string>>& names, bool owned,
                     const rapidjson::Document& info) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> writer(buffer);
  writer.StartObject();
  writer.Key("schema");
  writer.String(schema);
  for (const auto& [key, value] : names) {
    writer.Key(key);
    writer.String(value.c_str(), static_cast<rapidjson::SizeType>(value.size()));
  }
  writer.Key("owned");
  writer.Bool(owned);
  writer.Key("info");
  info.Accept(writer);
  writer.EndObject();
  return std::string(buffer.GetString()) + "\n";
}

// The mark when the records can be read; show-* works without records (then "owned" is false
// and says so) because looking must not depend on a file that may be what is broken.
std::optional<std::string> OptionalMark(const Settings& settings, const char* command) {
  if (settings.records_path.empty()) return std::nullopt;
  Result<std::string> mark = MarkOf(settings);
  if (!mark.ok()) {
    std::fprintf(stderr, "mesh-reconciler %s: ownership not checked: %s\n", command,
                 mark.status().message().c_str());
    return std::nullopt;
  }
  return *mark;
}

const char* OwnedText(bool owned, const std::optional<std::string>& mark) {
  if (owned) return "the mesh's (carries its ownership mark)";
  if (!mark) return "ownership not checked (no readable --records)";
  return "not the mesh's (no ownership mark): the reconciler never touches it";
}

}  // namespace

const char* const kShowStreamHelp = kShowStreamHelpText;
const char* const kShowConsumerHelp = kShowConsumerHelpText;
const char* const kDeleteStreamHelp = kDeleteStreamHelpText;
const char* const kDeleteConsumerHelp = kDeleteConsumerHelpText;

int RunShowStream(Settings& settings) {
  constexpr const char* kCommand = "show-stream";
  if (auto exit = CheckBusCommand(settings, kCommand, 1, Needs::kNoRecords)) return *exit;
  const std::string& name = settings.positional[0];
  const std::optional<std::string> mark = OptionalMark(settings, kCommand);
  auto bus = Connect(settings);
  if (!bus.ok()) return CommandFail(kCommand, bus.status().ToString());
  Answer info = Ask(**bus, observers::jsapi::StreamInfo(name));
  if (info.err_code == kStreamNotFound)
    return CommandFail(kCommand, "no stream " + name + " on the bus");
  if (!info.status.ok()) return CommandFail(kCommand, info.status.ToString());
  const bool owned = HasMark(info.doc, mark);
  if (settings.format == OutputFormat::kJson) {
    std::fputs(ShowJson("mesh-reconciler/stream/v1", {{"name", name}}, owned, info.doc).c_str(),
               stdout);
    return kExitOk;
  }
  std::printf("stream %s: %s\n", name.c_str(), OwnedText(owned, mark));
  PrintFlat(info.doc);
  return kExitOk;
}

int RunShowConsumer(Settings& settings) {
  constexpr const char* kCommand = "show-consumer";
  if (auto exit = CheckBusCommand(settings, kCommand, 2, Needs::kNoRecords)) return *exit;
  const std::string& stream = settings.positional[0];
  const std::string& name = settings.positional[1];
  const std::optional<std::string> mark = OptionalMark(settings, kCommand);
  auto bus = Connect(settings);
  if (!bus.ok()) return CommandFail(kCommand, bus.status().ToString());
  Answer stream_info = Ask(**bus, observers::jsapi::StreamInfo(stream));
  if (stream_info.err_code == kStreamNotFound) {
    return CommandFail(kCommand, "no stream " + stream + " on the bus");
  }
  if (!stream_info.status.ok()) return CommandFail(kCommand, stream_info.status.ToString());
  Answer info = Ask(**bus, observers::jsapi::ConsumerInfo(stream, name));
  if (info.err_code == kConsumerNotFound) {
    return CommandFail(kCommand, "no consumer " + name + " on stream " + stream);
  }
  if (!info.status.ok()) return CommandFail(kCommand, info.status.ToString());
  const bool owned = HasMark(stream_info.doc, mark);
  if (settings.format == OutputFormat::kJson) {
    std::fputs(ShowJson("mesh-reconciler/consumer/v1", {{"stream", stream}, {"name", name}}, owned,
                        info.doc)
                   .c_str(),
               stdout);
    return kExitOk;
  }
  std::printf("consumer %s on stream %s: %s\n", name.c_str(), stream.c_str(),
              OwnedText(owned, mark));
  PrintFlat(info.doc);
  return kExitOk;
}

namespace {

// The checks before a deletion: confirmed, the records' mark, the stream there and marked.
// Returns the exit code to stop with, or nullopt with the connection ready.
std::optional<int> BeforeDelete(Settings& settings, const char* command, size_t names,
                                std::unique_ptr<observers::BusConnection>& bus) {
  if (auto exit = CheckBusCommand(settings, command, names, Needs::kRecords)) return exit;
  if (settings.confirm != Confirm::kYes) {
    return CommandUsage(command, names == 1
                                     ? "this deletes the stream and every message in it; add --yes"
                                     : "this deletes the consumer and its position; add --yes");
  }
  Result<std::string> mark = MarkOf(settings);
  if (!mark.ok()) return CommandFail(command, mark.status().message());
  auto connected = Connect(settings);
  if (!connected.ok()) return CommandFail(command, connected.status().ToString());
  bus = std::move(*connected);
  const std::string& stream = settings.positional[0];
  Answer info = Ask(*bus, observers::jsapi::StreamInfo(stream));
  if (info.err_code == kStreamNotFound)
    return CommandFail(command, "no stream " + stream + " on the bus");
  if (!info.status.ok()) return CommandFail(command, info.status.ToString());
  if (!HasMark(info.doc, *mark)) {
    return CommandFail(command,
                       "stream " + stream +
                           " is not the mesh's (no ownership mark); refused: the reconciler "
                           "never touches it, and neither does this command");
  }
  return std::nullopt;
}

// Sends the deletion through apply/, the one part of the reconciler that writes to the bus.
int Delete(observers::BusConnection& bus, const char* command, Action action,
           const std::string& what, int not_found, const std::string& done) {
  ApplyTargets targets;
  targets.bus = &bus;
  std::vector<ActionOutcome> outcomes = Apply({std::move(action)}, targets);
  const ActionOutcome& outcome = outcomes.front();
  if (outcome.outcome == Outcome::kRefused && outcome.err_code == not_found) {
    return CommandFail(command, "no " + what);
  }
  if (outcome.outcome == Outcome::kRefused) {
    return CommandFail(command, what + ": " + Refusal(outcome.detail, outcome.err_code).ToString());
  }
  if (outcome.outcome != Outcome::kDone) return CommandFail(command, what + ": " + outcome.detail);
  std::printf("%s\n", done.c_str());
  return kExitOk;
}

}  // namespace

int RunDeleteStream(Settings& settings) {
  constexpr const char* kCommand = "delete-stream";
  std::unique_ptr<observers::BusConnection> bus;
  if (auto exit = BeforeDelete(settings, kCommand, 1, bus)) return *exit;
  const std::string& name = settings.positional[0];
  return Delete(*bus, kCommand, DeleteStreamAction(StreamName(name)), "stream " + name,
                kStreamNotFound,
                "deleted stream " + name +
                    " (a running reconciler creates it again from the records on its next pass)");
}

int RunDeleteConsumer(Settings& settings) {
  constexpr const char* kCommand = "delete-consumer";
  std::unique_ptr<observers::BusConnection> bus;
  if (auto exit = BeforeDelete(settings, kCommand, 2, bus)) return *exit;
  const std::string& stream = settings.positional[0];
  const std::string& name = settings.positional[1];
  return Delete(*bus, kCommand, DeleteConsumerAction(StreamName(stream), ConsumerName(name)),
                "consumer " + name + " on stream " + stream, kConsumerNotFound,
                "deleted consumer " + name + " on stream " + stream +
                    " (a running reconciler creates it again from the records on its next pass)");
}

}  // namespace mesh::reconciler
