// The reconciler's enums and their tables (model/enum_names.h): every enumerator is spelled and
// read back, and a report carries each trigger, mode and outcome through its JSON form. A new
// enumerator does not build until its switch below lists it.
#include <catch2/catch.hpp>

#include "observers/observed.h"
#include "reconciler/apply/apply.h"
#include "reconciler/base/log.h"
#include "reconciler/daemon/metrics.h"
#include "reconciler/http/daemon_view.h"
#include "reconciler/pass/report.h"
#include "reconciler/plan/lease.h"
#include "reconciler/plan/plan.h"
#include "tests/support/enum_round_trip.h"

namespace mesh::reconciler {
namespace {

using mesh::testing::ListedEnumerators;
using mesh::testing::RequireRoundTrip;

bool Listed(Outcome v) {
  switch (v) {
    case Outcome::kDone:
    case Outcome::kRefused:
    case Outcome::kFailed:
    case Outcome::kSkipped:
      return true;
  }
  return false;
}
bool Listed(SignalRefusal v) {
  switch (v) {
    case SignalRefusal::kNone:
    case SignalRefusal::kStale:
    case SignalRefusal::kForeign:
      return true;
  }
  return false;
}
bool Listed(LogLevel v) {
  switch (v) {
    case LogLevel::kDebug:
    case LogLevel::kInfo:
    case LogLevel::kWarn:
    case LogLevel::kError:
      return true;
  }
  return false;
}
bool Listed(PassResult v) {
  switch (v) {
    case PassResult::kSuccess:
    case PassResult::kFailure:
    case PassResult::kWaiting:
      return true;
  }
  return false;
}
bool Listed(HoldScope v) {
  switch (v) {
    case HoldScope::kPod:
    case HoldScope::kBus:
      return true;
  }
  return false;
}
bool Listed(LeaseRole v) {
  switch (v) {
    case LeaseRole::kOff:
    case LeaseRole::kHolder:
    case LeaseRole::kStandby:
    case LeaseRole::kUnknown:
      return true;
  }
  return false;
}
bool Listed(ObjectKind v) {
  switch (v) {
    case ObjectKind::kUsersFile:
    case ObjectKind::kStream:
    case ObjectKind::kConsumer:
      return true;
  }
  return false;
}
bool Listed(DriftState v) {
  switch (v) {
    case DriftState::kMissing:
    case DriftState::kDiffers:
    case DriftState::kUnexpected:
    case DriftState::kUnhealthy:
    case DriftState::kUnrecoverable:
      return true;
  }
  return false;
}
bool Listed(Remedy v) {
  switch (v) {
    case Remedy::kCreate:
    case Remedy::kUpdateInPlace:
    case Remedy::kRewrite:
    case Remedy::kReload:
    case Remedy::kReportOnly:
    case Remedy::kUnsatisfiable:
    case Remedy::kPrune:
    case Remedy::kLeave:
      return true;
  }
  return false;
}
bool Listed(ActionKind v) {
  switch (v) {
    case ActionKind::kWriteUsersFile:
    case ActionKind::kReloadServer:
    case ActionKind::kCreateStream:
    case ActionKind::kUpdateStream:
    case ActionKind::kDeleteStream:
    case ActionKind::kCreateConsumer:
    case ActionKind::kUpdateConsumer:
    case ActionKind::kDeleteConsumer:
      return true;
  }
  return false;
}
bool Listed(Trigger v) {
  switch (v) {
    case Trigger::kStart:
    case Trigger::kPeriodic:
    case Trigger::kAdvisory:
    case Trigger::kReconnect:
    case Trigger::kRecordsChanged:
    case Trigger::kUsersFileChanged:
    case Trigger::kForced:
    case Trigger::kRetry:
    case Trigger::kLeaseAcquired:
    case Trigger::kOnce:
    case Trigger::kRepair:
      return true;
  }
  return false;
}
bool Listed(ServerReadiness v) {
  switch (v) {
    case ServerReadiness::kReady:
    case ServerReadiness::kNotReady:
      return true;
  }
  return false;
}
bool Listed(UsersFileCheck v) {
  switch (v) {
    case UsersFileCheck::kNone:
    case UsersFileCheck::kCompared:
    case UsersFileCheck::kLeftAlone:
      return true;
  }
  return false;
}
bool Listed(observers::ObjectHealth::Kind v) {
  switch (v) {
    case observers::ObjectHealth::Kind::kStream:
    case observers::ObjectHealth::Kind::kConsumer:
      return true;
  }
  return false;
}

TEST_CASE("every reconciler enumerator is spelled by its table and read back", "[enum]") {
  RequireRoundTrip(kOutcomeNames, Listed);
  RequireRoundTrip(kSignalRefusalNames, Listed);
  RequireRoundTrip(kLogLevelNames, Listed);
  RequireRoundTrip(kPassResultNames, Listed);
  RequireRoundTrip(kHoldScopeNames, Listed);
  RequireRoundTrip(kLeaseRoleNames, Listed);
  RequireRoundTrip(kObjectKindNames, Listed);
  RequireRoundTrip(kDriftStateNames, Listed);
  RequireRoundTrip(kRemedyNames, Listed);
  RequireRoundTrip(kActionKindNames, Listed);
  RequireRoundTrip(kTriggerNames, Listed);
  RequireRoundTrip(kServerReadinessNames, Listed);
  RequireRoundTrip(kUsersFileCheckNames, Listed);
  RequireRoundTrip(observers::kObjectHealthKindNames, Listed);
}

// The bug the tables replace: reading a report back searched the enumerators up to one passed
// in by hand (kRepair for triggers), so a trigger added after it was written but not read.
TEST_CASE("a report read back keeps every trigger, mode, readiness and outcome", "[enum][pass]") {
  for (Trigger trigger : ListedEnumerators<Trigger>(Listed)) {
    for (ApplyMode mode : {ApplyMode::kApply, ApplyMode::kObserveOnly}) {
      PassReport report;
      report.pass_id = 7;
      report.trigger = trigger;
      report.mode = mode;
      report.readiness = ServerReadiness::kNotReady;
      report.users_file_check = UsersFileCheck::kLeftAlone;
      for (Outcome outcome : ListedEnumerators<Outcome>(Listed)) {
        ActionOutcome o;
        o.action.kind = ActionKind::kReloadServer;
        o.outcome = outcome;
        report.outcomes.push_back(o);
      }
      INFO(ToString(trigger));
      Result<PassReport> back = ReportFromJson(ReportToJson(report));
      REQUIRE(back.ok());
      CHECK(back->trigger == trigger);
      CHECK(back->mode == mode);
      CHECK(back->readiness == ServerReadiness::kNotReady);
      CHECK(back->users_file_check == UsersFileCheck::kLeftAlone);
      REQUIRE(back->outcomes.size() == report.outcomes.size());
      for (size_t i = 0; i < report.outcomes.size(); ++i) {
        CHECK(back->outcomes[i].outcome == report.outcomes[i].outcome);
      }
    }
  }
}

TEST_CASE("the flags' words and the log level come from the tables", "[enum]") {
  CHECK(WordsOf(kLogLevelNames) == std::vector<std::string>{"debug", "info", "warn", "error"});
  CHECK(ParseLogLevel("warn") == LogLevel::kWarn);
  CHECK(ParseLogLevel("loud") == LogLevel::kInfo);
  CHECK(HoldScopeFromName("bus") == HoldScope::kBus);
  CHECK(!HoldScopeFromName("cluster").has_value());
}

}  // namespace
}  // namespace mesh::reconciler
