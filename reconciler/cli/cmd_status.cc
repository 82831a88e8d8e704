// mesh-reconciler status: what a running daemon sees, in a few lines, from its read-only
// /drift (a GET, no token): the hold, the lease, the last pass, the drift by kind and state
// with the first objects named, the users file and the server's version. For on-call inside
// the pod (`kubectl exec POD -c mesh-reconciler -- mesh-reconciler status`), where the image
// has no curl.
#include <rapidjson/document.h>
#include <rapidjson/prettywriter.h>
#include <rapidjson/stringbuffer.h>

#include <cstdio>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "model/json_read.h"
#include "observers/http_client.h"
#include "reconciler/base/log.h"
#include "reconciler/cli/commands.h"
#include "reconciler/pass/report.h"

namespace mesh::reconciler {
namespace {

constexpr const char* kCommand = "status";
constexpr const char* kStatusSchema = "mesh-reconciler/status/v1";
constexpr auto kStatusTimeout = std::chrono::seconds(10);
constexpr size_t kNamesShown = 3;  // objects named per kind and state

struct DriftGroup {
  size_t count = 0;
  std::vector<std::string> first;  // at most kNamesShown
};

// The daemon's hold object, read as is.
struct HoldView {
  bool held = false;
  std::string scope, until, reason, by, through, error;
  bool published = false;
};

HoldView ReadHold(const rapidjson::Value& doc) {
  HoldView view;
  const rapidjson::Value* hold = model::json::Member(doc, "hold");
  if (hold == nullptr || !hold->IsObject()) return view;
  view.held = model::json::Bool(*hold, "held", false);
  view.scope = model::json::String(*hold, "scope");
  if (view.scope.empty() && view.held) view.scope = "pod";  // a daemon before the bus hold
  view.until = model::json::String(*hold, "until");
  view.reason = model::json::String(*hold, "reason");
  view.by = model::json::String(*hold, "by");
  view.through = model::json::String(*hold, "through");
  view.error = model::json::String(*hold, "error");
  view.published = model::json::Bool(*hold, "published", false);
  return view;
}

// kind -> state -> group, of what remains after the last pass (what it found, when it acted
// on nothing).
std::map<std::string, std::map<std::string, DriftGroup>> GroupDrift(const PassReport& report) {
  const std::vector<DriftEntry>& entries =
      report.outcomes.empty() ? report.plan.drift : report.remaining;
  std::map<std::string, std::map<std::string, DriftGroup>> groups;
  for (const DriftEntry& e : entries) {
    DriftGroup& group = groups[ToString(e.kind)][ToString(e.state)];
    ++group.count;
    if (group.first.size() < kNamesShown) group.first.push_back(e.name);
  }
  return groups;
}

std::string ResultOf(const PassReport& report) {
  if (!report.status.ok()) return "failed: " + report.status.message();
  if (report.any_action_failed()) return "actions failed";
  return report.converged() ? "converged" : "drift remains";
}

std::string UsersFileState(const PassReport& report) {
  for (const DriftEntry& e : report.outcomes.empty() ? report.plan.drift : report.remaining) {
    if (e.kind == ObjectKind::kUsersFile) return std::string("differs (") + ToString(e.state) + ")";
  }
  switch (report.users_file_check) {
    case UsersFileCheck::kCompared:
      return "as rendered";
    case UsersFileCheck::kLeftAlone:
      return "left alone (passwords still being hashed)";
    case UsersFileCheck::kNone:
      break;
  }
  return "not checked";
}

void PrintText(const HoldView& hold, const PassReport& report,
               const std::map<std::string, std::map<std::string, DriftGroup>>& drift) {
  if (!hold.held) {
    std::printf("held:       no\n");
  } else {
    std::printf("held:       yes, %s hold until %s, by %s%s%s%s\n", hold.scope.c_str(),
                hold.until.c_str(), hold.by.empty() ? "unknown" : hold.by.c_str(),
                hold.reason.empty() ? "" : (", reason \"" + hold.reason + "\"").c_str(),
                hold.scope == "bus" && !hold.published ? " (not yet written for the bus)" : "",
                hold.error.empty() ? "" : (" [" + hold.error + "]").c_str());
  }
  if (report.lease.role == LeaseRole::kOff) {
    std::printf("lease:      off (this instance acts alone)\n");
  } else {
    std::printf("lease:      %s%s%s\n", ToString(report.lease.role),
                report.lease.holder.empty() ? "" : ", holder ", report.lease.holder.c_str());
  }
  std::printf("last pass:  #%llu %s at %s, %s, %.3f s\n",
              static_cast<unsigned long long>(report.pass_id), ToString(report.trigger),
              report.finished_unix_ms > 0 ? FormatRfc3339Millis(report.finished_unix_ms).c_str()
                                          : "an unknown time",
              ResultOf(report).c_str(), report.duration_seconds);
  if (drift.empty()) {
    std::printf("drift:      none\n");
  } else {
    std::printf("drift:\n");
    for (const auto& [kind, states] : drift) {
      for (const auto& [state, group] : states) {
        std::string names;
        for (const std::string& n : group.first) names += (names.empty() ? "" : ", ") + n;
        if (group.count > group.first.size()) names += ", ...";
        std::printf("  %-10s %-13s %5zu  %s\n", kind.c_str(), state.c_str(), group.count,
                    names.c_str());
      }
    }
  }
  std::printf("users file: %s\n", UsersFileState(report).c_str());
  std::printf("server:     %s\n", report.server_version.empty()
                                      ? "not observed"
                                      : ("nats-server " + report.server_version).c_str());
}

void String(rapidjson::PrettyWriter<rapidjson::StringBuffer>& w, const char* key,
            const std::string& value) {
  w.Key(key);
  w.String(value.c_str(), static_cast<rapidjson::SizeType>(value.size()));
}

void PrintJson(const HoldView& hold, const PassReport& report,
               const std::map<std::string, std::map<std::string, DriftGroup>>& drift) {
  rapidjson::StringBuffer buffer;
  rapidjson::PrettyWriter<rapidjson::StringBuffer> w(buffer);
  w.SetIndent(' ', 2);
  w.StartObject();
  String(w, "schema", kStatusSchema);
  w.Key("hold");
  w.StartObject();
  w.Key("held");
  w.Bool(hold.held);
  if (hold.held) {
    String(w, "scope", hold.scope);
    String(w, "until", hold.until);
    String(w, "by", hold.by);
    String(w, "reason", hold.reason);
    w.Key("published");
    w.Bool(hold.scope != "bus" || hold.published);
    if (!hold.error.empty()) String(w, "error", hold.error);
  }
  w.EndObject();
  w.Key("lease");
  w.StartObject();
  String(w, "role", ToString(report.lease.role));
  String(w, "holder", report.lease.holder);
  w.EndObject();
  w.Key("last_pass");
  w.StartObject();
  w.Key("pass_id");
  w.Uint64(report.pass_id);
  String(w, "trigger", ToString(report.trigger));
  String(w, "finished",
         report.finished_unix_ms > 0 ? FormatRfc3339Millis(report.finished_unix_ms) : "");
  String(w, "result", ResultOf(report));
  w.Key("converged");
  w.Bool(report.converged());
  w.Key("duration_seconds");
  w.Double(report.duration_seconds);
  w.EndObject();
  w.Key("drift");
  w.StartArray();
  for (const auto& [kind, states] : drift) {
    for (const auto& [state, group] : states) {
      w.StartObject();
      String(w, "kind", kind);
      String(w, "state", state);
      w.Key("count");
      w.Uint64(group.count);
      w.Key("first");
      w.StartArray();
      for (const std::string& n : group.first) w.String(n.c_str());
      w.EndArray();
      w.EndObject();
    }
  }
  w.EndArray();
  String(w, "users_file", UsersFileState(report));
  String(w, "server_version", report.server_version);
  w.EndObject();
  std::printf("%s\n", buffer.GetString());
}

}  // namespace

const char* const kStatusHelp =
    R"(Usage: mesh-reconciler status --remote URL [--ca-file FILE] [--json | -o json]

What a running daemon sees, in a few lines, read from its /drift (a GET: no token needed):
whether it is held (by whom, until when, for this pod or the whole bus), the lease holder,
the last pass (when, why, its result and duration), the drift by kind and state with the first
objects named, the users file's state and the server's version. --remote defaults to
MESH_RECONCILER_REMOTE, which the chart sets in the sidecar. --json (or -o json): under
docs/schemas/status.v1.schema.json.

Exit codes: 0 converged, 2 drift remains or the last pass failed, 1 error (unreachable daemon,
no pass yet), 64 usage error.
)";

int RunStatus(Settings& settings) {
  if (settings.remote.empty()) {
    return CommandUsage(kCommand, "--remote URL is required (e.g. http://127.0.0.1:9464)");
  }
  std::string base = settings.remote;
  while (!base.empty() && base.back() == '/') base.pop_back();
  observers::HttpCall call;
  call.url = base + "/drift";
  call.ca_file = settings.bus.ca_file;
  Result<observers::HttpResponse> response = observers::HttpSend(call, kStatusTimeout);
  if (!response.ok()) return CommandFail(kCommand, response.status().message());
  if (response->status == 503) return CommandFail(kCommand, "no pass has finished yet");
  if (response->status != 200) {
    return CommandFail(kCommand, "the daemon answered HTTP " + std::to_string(response->status));
  }
  std::optional<rapidjson::Document> doc = model::json::ParseObject(response->body);
  Result<PassReport> report = ReportFromJson(response->body);
  if (!doc || !report.ok()) {
    return CommandFail(kCommand, "unreadable /drift from the daemon" +
                                     (report.ok() ? "" : ": " + report.status().message()));
  }
  const HoldView hold = ReadHold(*doc);
  const auto drift = GroupDrift(*report);
  if (settings.format == OutputFormat::kJson) {
    PrintJson(hold, *report, drift);
  } else {
    PrintText(hold, *report, drift);
  }
  return report->converged() ? kExitOk : kExitDrift;
}

}  // namespace mesh::reconciler
