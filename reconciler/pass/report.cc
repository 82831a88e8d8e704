// The pass report for people (a table) and for programs (JSON), and its reading back.
//
// No secrets in either form: drift fields name principals and say "present" / "absent" /
// "differs", never a hash; a write_users_file action is shown by its size and SHA-256, never its
// bytes (which hold bcrypt hashes), so ReportFromJson reads such an action back with empty
// `users_file_bytes`.
#include "reconciler/pass/report.h"

#include <rapidjson/document.h>
#include <rapidjson/prettywriter.h>
#include <rapidjson/stringbuffer.h>

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "model/digest.h"
#include "model/json_read.h"
#include "model/spec_json.h"

namespace mesh::reconciler {
namespace {

// ---------- enum spellings ----------

// ---------- JSON writing ----------

using model::json::BoolField;
using model::json::Field;
using model::json::String;
using model::json::Writer;

void WriteConsumerSpec(Writer& w, const model::ConsumerSpec& c) {
  w.StartObject();
  model::json::WriteConsumerSpecFields(w, c);
  w.EndObject();
}

void WriteDrift(Writer& w, const char* key, const std::vector<DriftEntry>& drift) {
  w.Key(key);
  w.StartArray();
  for (const DriftEntry& e : drift) {
    w.StartObject();
    Field(w, "kind", ToString(e.kind));
    Field(w, "name", e.name);
    Field(w, "state", ToString(e.state));
    Field(w, "remedy", ToString(e.remedy));
    w.Key("fields");
    w.StartArray();
    for (const FieldDiff& f : e.fields) {
      w.StartObject();
      Field(w, "field", f.field);
      Field(w, "wanted", f.wanted);
      Field(w, "found", f.found);
      w.EndObject();
    }
    w.EndArray();
    Field(w, "note", e.note);
    w.EndObject();
  }
  w.EndArray();
}

void WriteAction(Writer& w, const Action& a) {
  w.StartObject();
  Field(w, "kind", ToString(a.kind));
  Field(w, "name", a.name);
  if (a.stream) {
    w.Key("stream");
    model::json::WriteStreamSpec(w, *a.stream);
  }
  if (a.consumer) {
    w.Key("consumer");
    WriteConsumerSpec(w, *a.consumer);
  }
  if (!a.target_stream.empty()) Field(w, "target_stream", a.target_stream.str());
  if (!a.target_consumer.empty()) Field(w, "target_consumer", a.target_consumer.str());
  if (a.kind == ActionKind::kWriteUsersFile) {
    Field(w, "users_file_size", static_cast<int64_t>(a.users_file_bytes.size()));
    Field(w, "users_file_sha256", model::Sha256Hex(a.users_file_bytes));
  }
  w.EndObject();
}

// ---------- JSON reading ----------

// What the reconciler itself wrote is read strictly: the first wrong or missing field is the
// error, with its path.
using Reader = model::json::StrictReader;

model::StreamSpec ReadStreamSpec(Reader& r, const rapidjson::Value& v, const std::string& at) {
  model::StreamSpec s;
  s.name = StreamName(r.Str(v, "name", at));
  s.subjects = r.Strings(v, "subjects", at);
  s.retention = r.Enum(v, "retention", at, model::kRetentionNames);
  s.storage = r.Enum(v, "storage", at, model::kStorageNames);
  s.replicas = static_cast<int>(r.Int(v, "replicas", at));
  s.max_age_ns = r.Int(v, "max_age_ns", at);
  s.max_msgs = r.Int(v, "max_msgs", at);
  s.max_bytes = r.Int(v, "max_bytes", at);
  s.discard = r.Enum(v, "discard", at, model::kDiscardNames);
  s.description = r.Str(v, "description", at);
  return s;
}

model::ConsumerSpec ReadConsumerSpec(Reader& r, const rapidjson::Value& v, const std::string& at) {
  model::ConsumerSpec c;
  c.stream = StreamName(r.Str(v, "stream", at));
  c.durable = ConsumerName(r.Str(v, "durable", at));
  c.filter_subject = r.Str(v, "filter_subject", at);
  c.deliver_subject = r.Str(v, "deliver_subject", at);
  c.deliver_group = r.Str(v, "deliver_group", at);
  c.ack = r.Enum(v, "ack_policy", at, model::kAckPolicyNames);
  c.deliver = r.Enum(v, "deliver_policy", at, model::kDeliverPolicyNames);
  c.replay = r.Enum(v, "replay_policy", at, model::kReplayPolicyNames);
  c.ack_wait_ns = r.Int(v, "ack_wait_ns", at);
  c.max_deliver = r.Int(v, "max_deliver", at);
  return c;
}

std::vector<DriftEntry> ReadDrift(Reader& r, const rapidjson::Value& doc, const char* key) {
  std::vector<DriftEntry> out;
  r.Each(doc, key, "$", [&](const rapidjson::Value& v, const std::string& at) {
    DriftEntry e;
    e.kind = r.Enum(v, "kind", at, kObjectKindNames);
    e.name = r.Str(v, "name", at);
    e.state = r.Enum(v, "state", at, kDriftStateNames);
    e.remedy = r.Enum(v, "remedy", at, kRemedyNames);
    r.Each(v, "fields", at, [&](const rapidjson::Value& f, const std::string& fat) {
      e.fields.push_back({r.Str(f, "field", fat), r.Str(f, "wanted", fat), r.Str(f, "found", fat)});
    });
    e.note = r.Str(v, "note", at);
    out.push_back(std::move(e));
  });
  return out;
}

Action ReadAction(Reader& r, const rapidjson::Value& v, const std::string& at) {
  Action a;
  a.kind = r.Enum(v, "kind", at, kActionKindNames);
  a.name = r.Str(v, "name", at);
  if (v.IsObject() && v.HasMember("stream"))
    a.stream = ReadStreamSpec(r, v["stream"], at + ".stream");
  if (v.IsObject() && v.HasMember("consumer")) {
    a.consumer = ReadConsumerSpec(r, v["consumer"], at + ".consumer");
  }
  a.target_stream = StreamName(r.OptionalStr(v, "target_stream", at));
  a.target_consumer = ConsumerName(r.OptionalStr(v, "target_consumer", at));
  return a;
}

// ---------- the table ----------

std::string Details(const DriftEntry& e) {
  std::string out;
  for (const FieldDiff& f : e.fields) {
    out += (out.empty() ? "" : "; ") + f.field + ": wanted " + f.wanted + ", found " + f.found;
  }
  if (!e.note.empty()) out += (out.empty() ? "" : "; ") + e.note;
  return out;
}

// Left-aligned columns; the last column is not padded.
std::string Columns(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& row : rows) {
    if (width.size() < row.size()) width.resize(row.size(), 0);
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(width[i] - row[i].size() + 2, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

std::string DriftTable(const std::vector<DriftEntry>& drift) {
  std::vector<std::vector<std::string>> rows = {{"KIND", "NAME", "STATE", "REMEDY", "DETAILS"}};
  for (const DriftEntry& e : drift) {
    rows.push_back({ToString(e.kind), e.name, ToString(e.state), ToString(e.remedy), Details(e)});
  }
  return Columns(rows);
}

std::string Summary(const PassReport& report) {
  if (!report.status.ok()) return "error: " + report.status.ToString();
  if (report.plan.drift.empty() && report.plan.problems.empty() && report.outcomes.empty()) {
    return "converged";
  }
  std::string out = std::to_string(report.plan.drift.size()) + " drifted, " +
                    std::to_string(report.plan.actions.size()) + " actions";
  if (!report.outcomes.empty()) {
    int done = 0, failed = 0, skipped = 0;
    for (const ActionOutcome& o : report.outcomes) {
      if (o.outcome == Outcome::kDone) ++done;
      if (o.outcome == Outcome::kRefused || o.outcome == Outcome::kFailed) ++failed;
      if (o.outcome == Outcome::kSkipped) ++skipped;
    }
    out += " (" + std::to_string(done) + " done, " + std::to_string(failed) + " failed, " +
           std::to_string(skipped) + " skipped)";
  }
  if (report.converged()) return out + "; converged";
  if (report.mode == ApplyMode::kApply) {
    out += "; " + std::to_string(report.remaining.size()) + " still drifted";
  }
  if (!report.remaining_problems.empty()) {
    out += "; " + std::to_string(report.remaining_problems.size()) + " problem(s)";
  }
  return out;
}

}  // namespace

const char* ToString(Trigger v) {
  return kTriggerNames.Name(v);
}

bool PassReport::any_action_failed() const {
  return std::any_of(outcomes.begin(), outcomes.end(), [](const ActionOutcome& o) {
    return o.outcome == Outcome::kRefused || o.outcome == Outcome::kFailed;
  });
}

bool PassReport::converged() const {
  // An unhealthy object is information: nothing remains to be done about it.
  const bool nothing_remains =
      std::all_of(remaining.begin(), remaining.end(),
                  [](const DriftEntry& e) { return e.state == DriftState::kUnhealthy; });
  return status.ok() && nothing_remains && remaining_problems.empty() && !any_action_failed();
}

std::string FormatReportTable(const PassReport& report) {
  std::ostringstream out;
  out << "pass " << report.pass_id << " (" << ToString(report.trigger) << ", "
      << kApplyModeNames.Name(report.mode) << (report.held ? ", held" : "") << ")\n";
  if (!report.records_valid && !report.records_errors.empty()) {
    out << "\nRECORDS INVALID"
        << (report.status.ok() ? " (planned from the last valid records)" : "") << "\n";
    for (const std::string& e : report.records_errors) out << "  " << e << "\n";
  }
  if (!report.plan.drift.empty()) out << "\n" << DriftTable(report.plan.drift);
  if (!report.plan.problems.empty()) {
    out << "\nPROBLEMS\n";
    for (const std::string& p : report.plan.problems) out << "  " << p << "\n";
  }
  if (!report.outcomes.empty()) {
    std::vector<std::vector<std::string>> rows = {{"ACTION", "NAME", "OUTCOME", "DETAIL"}};
    for (const ActionOutcome& o : report.outcomes) {
      std::string detail = o.detail;
      if (o.err_code != 0) detail = "error " + std::to_string(o.err_code) + ": " + detail;
      rows.push_back({ToString(o.action.kind), o.action.name, ToString(o.outcome), detail});
    }
    out << "\nACTIONS\n" << Columns(rows);
  } else if (!report.plan.actions.empty()) {
    std::vector<std::vector<std::string>> rows = {{"ACTION", "NAME", "OUTCOME"}};
    for (const Action& a : report.plan.actions) {
      rows.push_back({ToString(a.kind), a.name, "planned (not applied)"});
    }
    out << "\nACTIONS\n" << Columns(rows);
  }
  if (!report.outcomes.empty() && !report.remaining.empty()) {
    out << "\nREMAINING\n" << DriftTable(report.remaining);
  }
  if (!report.unhealthy.empty()) {
    out << "\nTHE SERVER REPORTS UNHEALTHY\n";
    for (const observers::ObjectHealth& h : report.unhealthy) out << "  " << h.error << "\n";
  }
  if (!report.without_credential.empty()) {
    out << "\nPrincipals without a credential (left out of the users file):";
    for (const UserName& user : report.without_credential) out << " " << user.str();
    out << "\n";
  }
  char tail[96];
  std::snprintf(tail, sizeof tail, " (%.3fs, %lld api requests)", report.duration_seconds,
                static_cast<long long>(report.api_requests));
  out << "\n" << Summary(report) << tail << "\n";
  return out.str();
}

namespace {

// The report's members, inside an object the caller has started.
void WriteReportMembers(Writer& w, const PassReport& report) {
  Field(w, "pass_id", static_cast<int64_t>(report.pass_id));
  Field(w, "trigger", ToString(report.trigger));
  Field(w, "mode", kApplyModeNames.Name(report.mode));
  BoolField(w, "held", report.held);
  w.Key("status");
  w.StartObject();
  BoolField(w, "ok", report.status.ok());
  Field(w, "code", ErrcId(report.status.code()));
  Field(w, "message", report.status.message());
  w.EndObject();
  BoolField(w, "converged", report.converged());
  Field(w, "readiness", kServerReadinessNames.Name(report.readiness));
  w.Key("unhealthy");
  w.StartArray();
  for (const observers::ObjectHealth& h : report.unhealthy) {
    w.StartObject();
    Field(w, "kind", observers::kObjectHealthKindNames.Name(h.kind));
    Field(w, "account", h.account);
    Field(w, "stream", h.stream);
    Field(w, "consumer", h.consumer);
    Field(w, "error", h.error);
    w.EndObject();
  }
  w.EndArray();
  BoolField(w, "records_valid", report.records_valid);
  Field(w, "records_errors", report.records_errors);
  w.Key("without_credential");
  w.StartArray();
  for (const UserName& user : report.without_credential) String(w, user.str());
  w.EndArray();
  WriteDrift(w, "drift", report.plan.drift);
  w.Key("actions");
  w.StartArray();
  for (const Action& a : report.plan.actions) WriteAction(w, a);
  w.EndArray();
  Field(w, "problems", report.plan.problems);
  w.Key("outcomes");
  w.StartArray();
  for (const ActionOutcome& o : report.outcomes) {
    w.StartObject();
    w.Key("action");
    WriteAction(w, o.action);
    Field(w, "outcome", ToString(o.outcome));
    Field(w, "err_code", static_cast<int64_t>(o.err_code));
    Field(w, "detail", o.detail);
    w.EndObject();
  }
  w.EndArray();
  WriteDrift(w, "remaining", report.remaining);
  Field(w, "remaining_problems", report.remaining_problems);
  w.Key("duration_seconds");
  w.Double(report.duration_seconds);
  Field(w, "api_requests", report.api_requests);
  Field(w, "passwords_hashed", report.passwords_hashed);
  Field(w, "finished_unix_ms", report.finished_unix_ms);
  Field(w, "server_version", report.server_version);
  Field(w, "users_file_check", kUsersFileCheckNames.Name(report.users_file_check));
  w.Key("lease");
  w.StartObject();
  Field(w, "role", ToString(report.lease.role));
  Field(w, "holder", report.lease.holder);
  w.EndObject();
}

}  // namespace

namespace {

std::string ReportJson(const char* schema, const PassReport& last, const PassReport* last_failed,
                       const PassReport* last_failed_without_actions) {
  rapidjson::StringBuffer buffer;
  Writer w(buffer);
  w.SetIndent(' ', 2);
  w.StartObject();
  Field(w, "schema", schema);
  WriteReportMembers(w, last);
  if (last_failed != nullptr) {
    w.Key("last_failed");
    w.StartObject();
    WriteReportMembers(w, *last_failed);
    w.EndObject();
  }
  if (last_failed_without_actions != nullptr) {
    w.Key("last_failed_without_actions");
    w.StartObject();
    WriteReportMembers(w, *last_failed_without_actions);
    w.EndObject();
  }
  w.EndObject();
  buffer.Put('\n');  // one exact-size copy below: a first convergence's report is megabytes
  return std::string(buffer.GetString(), buffer.GetSize());
}

}  // namespace

std::string ReportToJson(const PassReport& report) {
  return ReportJson(kReportSchema, report, nullptr, nullptr);
}

std::string DriftToJson(const PassReport& last, const PassReport* last_failed,
                        const PassReport* last_failed_without_actions) {
  return ReportJson(kDriftSchema, last, last_failed, last_failed_without_actions);
}

Result<PassReport> ReportFromJson(const std::string& json) {
  rapidjson::Document doc;
  doc.Parse(json.data(), json.size());
  if (doc.HasParseError() || !doc.IsObject()) {
    return Status(Errc::kInvalidArgument, "a pass report must be a JSON object");
  }
  if (auto schema = doc.FindMember("schema"); schema != doc.MemberEnd()) {
    const std::string_view name =
        schema->value.IsString() ? std::string_view(schema->value.GetString()) : "";
    if (name != kReportSchema && name != kDriftSchema) {
      return Status(Errc::kInvalidArgument,
                    std::string("a pass report of another schema (") +
                        (schema->value.IsString() ? schema->value.GetString() : "not a string") +
                        "); this reads " + kReportSchema + " and " + kDriftSchema);
    }
  }
  Reader r;
  PassReport report;
  report.pass_id = static_cast<uint64_t>(r.Int(doc, "pass_id", "$"));
  report.trigger = r.Enum(doc, "trigger", "$", kTriggerNames);
  report.mode = r.Enum(doc, "mode", "$", kApplyModeNames);
  report.held = r.Bool(doc, "held", "$");
  if (const rapidjson::Value* status = r.Member(doc, "status", "$")) {
    // ErrcId; ErrcName as a daemon older than the contract wrote it.
    const std::string text = r.Str(*status, "code", "$.status");
    Errc code = Errc::kInternal;
    if (auto id = kErrcIds.Parse(text)) {
      code = *id;
    } else if (auto name = kErrcNames.Parse(text)) {
      code = *name;
    } else if (r.ok()) {
      r.Fail("$.status.code: unknown value \"" + text + "\"");
    }
    std::string message = r.Str(*status, "message", "$.status");
    if (code != Errc::kOk) report.status = Status(code, std::move(message));
  }
  report.readiness = r.Enum(doc, "readiness", "$", kServerReadinessNames);
  r.Each(doc, "unhealthy", "$", [&](const rapidjson::Value& v, const std::string& at) {
    observers::ObjectHealth h;
    h.kind = r.Enum(v, "kind", at, observers::kObjectHealthKindNames);
    h.account = r.Str(v, "account", at);
    h.stream = r.Str(v, "stream", at);
    h.consumer = r.Str(v, "consumer", at);
    h.error = r.Str(v, "error", at);
    report.unhealthy.push_back(std::move(h));
  });
  report.records_valid = r.Bool(doc, "records_valid", "$");
  report.records_errors = r.Strings(doc, "records_errors", "$");
  for (const std::string& user : r.Strings(doc, "without_credential", "$")) {
    report.without_credential.emplace_back(user);
  }
  report.plan.drift = ReadDrift(r, doc, "drift");
  r.Each(doc, "actions", "$", [&](const rapidjson::Value& v, const std::string& at) {
    report.plan.actions.push_back(ReadAction(r, v, at));
  });
  report.plan.problems = r.Strings(doc, "problems", "$");
  r.Each(doc, "outcomes", "$", [&](const rapidjson::Value& v, const std::string& at) {
    ActionOutcome o;
    if (const rapidjson::Value* action = r.Member(v, "action", at)) {
      o.action = ReadAction(r, *action, at + ".action");
    }
    o.outcome = r.Enum(v, "outcome", at, kOutcomeNames);
    o.err_code = static_cast<int>(r.Int(v, "err_code", at));
    o.detail = r.Str(v, "detail", at);
    report.outcomes.push_back(std::move(o));
  });
  report.remaining = ReadDrift(r, doc, "remaining");
  report.remaining_problems = r.Strings(doc, "remaining_problems", "$");
  report.duration_seconds = r.Double(doc, "duration_seconds", "$");
  report.api_requests = r.Int(doc, "api_requests", "$");
  report.passwords_hashed = r.Int(doc, "passwords_hashed", "$");
  // Written since the status command (issue 37); absent from older daemons' reports.
  if (const rapidjson::Value* v = model::json::Member(doc, "finished_unix_ms"); v && v->IsInt64())
    report.finished_unix_ms = v->GetInt64();
  report.server_version = model::json::String(doc, "server_version");
  report.users_file_check = kUsersFileCheckNames.Parse(model::json::String(doc, "users_file_check"))
                                .value_or(UsersFileCheck::kNone);
  if (const rapidjson::Value* lease = model::json::Member(doc, "lease");
      lease && lease->IsObject()) {
    report.lease.role =
        kLeaseRoleNames.Parse(model::json::String(*lease, "role")).value_or(LeaseRole::kOff);
    report.lease.holder = model::json::String(*lease, "holder");
  }
  if (!r.ok()) return Status(Errc::kInvalidArgument, "pass report: " + r.error());
  return report;
}

}  // namespace mesh::reconciler
