// The model's enums and their tables (model/enum_names.h): every enumerator is spelled and
// read back. A new enumerator does not build until its switch below lists it.
#include <catch2/catch.hpp>

#include "model/desired.h"
#include "model/names.h"
#include "model/result.h"
#include "model/users_file.h"
#include "tests/support/enum_round_trip.h"

namespace mesh::model {
namespace {

using mesh::testing::RequireRoundTrip;

bool Listed(Retention v) {
  switch (v) {
    case Retention::kLimits:
    case Retention::kInterest:
    case Retention::kWorkQueue:
      return true;
  }
  return false;
}
bool Listed(Storage v) {
  switch (v) {
    case Storage::kFile:
    case Storage::kMemory:
      return true;
  }
  return false;
}
bool Listed(Discard v) {
  switch (v) {
    case Discard::kOld:
    case Discard::kNew:
      return true;
  }
  return false;
}
bool Listed(AckPolicy v) {
  switch (v) {
    case AckPolicy::kNone:
    case AckPolicy::kAll:
    case AckPolicy::kExplicit:
      return true;
  }
  return false;
}
bool Listed(DeliverPolicy v) {
  switch (v) {
    case DeliverPolicy::kAll:
    case DeliverPolicy::kLast:
    case DeliverPolicy::kNew:
    case DeliverPolicy::kByStartSequence:
    case DeliverPolicy::kByStartTime:
    case DeliverPolicy::kLastPerSubject:
      return true;
  }
  return false;
}
bool Listed(ReplayPolicy v) {
  switch (v) {
    case ReplayPolicy::kInstant:
    case ReplayPolicy::kOriginal:
      return true;
  }
  return false;
}
bool Listed(PrincipalKind v) {
  switch (v) {
    case PrincipalKind::kReconciler:
    case PrincipalKind::kController:
    case PrincipalKind::kNode:
    case PrincipalKind::kModule:
      return true;
  }
  return false;
}
bool Listed(ApplyMode v) {
  switch (v) {
    case ApplyMode::kApply:
    case ApplyMode::kObserveOnly:
      return true;
  }
  return false;
}
bool Listed(UsersScope v) {
  switch (v) {
    case UsersScope::kServer:
    case UsersScope::kAccount:
      return true;
  }
  return false;
}
bool Listed(Errc v) {
  switch (v) {
    case Errc::kOk:
    case Errc::kInvalidArgument:
    case Errc::kIo:
    case Errc::kTimeout:
    case Errc::kUnavailable:
    case Errc::kRefused:
    case Errc::kUnsatisfiable:
    case Errc::kInternal:
      return true;
  }
  return false;
}

TEST_CASE("every model enumerator is spelled by its table and read back", "[enum]") {
  RequireRoundTrip(kRetentionNames, Listed);
  RequireRoundTrip(kStorageNames, Listed);
  RequireRoundTrip(kDiscardNames, Listed);
  RequireRoundTrip(kAckPolicyNames, Listed);
  RequireRoundTrip(kDeliverPolicyNames, Listed);
  RequireRoundTrip(kReplayPolicyNames, Listed);
  RequireRoundTrip(kPrincipalKindNames, Listed);
  RequireRoundTrip(kApplyModeNames, Listed);
  RequireRoundTrip(kUsersScopeNames, Listed);
  RequireRoundTrip(kErrcNames, Listed);
  RequireRoundTrip(kErrcIds, Listed);
}

TEST_CASE("the API spellings are the server's, and Errc has one for people and one for programs",
          "[enum]") {
  CHECK(std::string(ToApi(Retention::kWorkQueue)) == "workqueue");
  CHECK(std::string(ToApi(DeliverPolicy::kLastPerSubject)) == "last_per_subject");
  CHECK(std::string(ToString(UsersScope::kAccount)) == "account");
  CHECK(std::string(ErrcName(Errc::kInvalidArgument)) == "invalid argument");
  CHECK(std::string(ErrcId(Errc::kInvalidArgument)) == "invalid_argument");
  CHECK(kStorageNames.Parse("File") == std::nullopt);  // exact spelling only
}

}  // namespace
}  // namespace mesh::model
