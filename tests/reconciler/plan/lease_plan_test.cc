// `plan` never takes, renews or writes the lease (issue 14): run inside a pod beside the daemon
// (kubectl exec ... plan, with the container's MESH_RECONCILER_LEASE=1), it must leave the KV
// bucket exactly as it was: no bucket created, no revision written. Checked on a real
// nats-server, through the bucket stream's own sequence numbers, for the Reconciler and for the
// real binary.
#include <rapidjson/document.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <string>

#include "observers/bus.h"
#include "reconciler/pass/pass.h"
#include "reconciler/plan/lease.h"
#include "tests/support/bus_fixture.h"
#include "tests/support/pass_fixtures.h"

namespace mesh::reconciler {
namespace {

using test::LiveMesh;

struct BucketState {
  bool exists = false;
  uint64_t last_seq = 0;
  uint64_t first_seq = 0;
};

BucketState Bucket(const mesh::testing::NatsServer& server) {
  auto bus = observers::BusConnection::Connect(
      mesh::testing::BusSettingsFor(server, test::kReconcilerUser, test::kReconcilerPassword));
  REQUIRE(bus.ok());
  observers::ApiReply reply =
      (*bus)->Request({std::string("$JS.API.STREAM.INFO.KV_") + kLeaseBucket, ""});
  REQUIRE(reply.status.ok());
  rapidjson::Document doc;
  doc.Parse(reply.payload.c_str());
  INFO(reply.payload);
  REQUIRE(doc.IsObject());
  BucketState out;
  if (doc.HasMember("error")) return out;  // 10059: stream not found
  REQUIRE(doc.HasMember("state"));
  out.exists = true;
  out.last_seq = doc["state"]["last_seq"].GetUint64();
  out.first_seq = doc["state"]["first_seq"].GetUint64();
  return out;
}

int RunPlanBinary(const LiveMesh& mesh) {
  const std::string command =
      std::string("MESH_RECONCILER_LEASE=1 MESH_RECONCILER_PASSWORD=") + test::kReconcilerPassword +
      " " + MESH_BINARY + " plan --records " + mesh.records_path + " --bus " + mesh.server->url() +
      " --users-file " + mesh.server->users_file() + " --pid-file " + mesh.server->pid_file() +
      " --monitor " + mesh.server->monitor_url() + " --bcrypt-cost 4 --log-level error >/dev/null";
  const int status = std::system(command.c_str());
  REQUIRE(WIFEXITED(status));
  return WEXITSTATUS(status);
}

TEST_CASE("plan with --lease neither creates the bucket nor writes the lease",
          "[pass][lease][integration][server]") {
  LiveMesh mesh(test::ExampleRecordsJson());
  Settings settings = mesh.PassSettings();
  settings.lease = LeaseMode::kKv;

  // No bucket yet: plan does not create it.
  {
    Reconciler planner(settings);
    PassReport plan = planner.RunPass(1, Trigger::kOnce, ApplyMode::kObserveOnly);
    INFO(FormatReportTable(plan));
    REQUIRE(plan.status.ok());
    CHECK(plan.lease.role != LeaseRole::kHolder);
  }
  CHECK(RunPlanBinary(mesh) == 2);  // drift: nothing was created yet
  CHECK_FALSE(Bucket(*mesh.server).exists);

  // A daemon's passes take the lease (the first one also lets its user write the lease).
  Reconciler holder(settings);
  uint64_t pass = 1;
  PassReport held;
  REQUIRE(mesh::testing::WaitFor([&] {
    held = holder.RunPass(pass++, Trigger::kForced, ApplyMode::kApply);
    return held.lease.role == LeaseRole::kHolder && held.converged();
  }));
  const BucketState before = Bucket(*mesh.server);
  REQUIRE(before.exists);
  REQUIRE(before.last_seq >= 1);

  {
    Reconciler planner(settings);
    PassReport plan = planner.RunPass(1, Trigger::kOnce, ApplyMode::kObserveOnly);
    INFO(FormatReportTable(plan));
    REQUIRE(plan.status.ok());
    CHECK(plan.plan.drift.empty());
    CHECK(plan.lease.role != LeaseRole::kHolder);
  }
  CHECK(RunPlanBinary(mesh) == 0);
  const BucketState after = Bucket(*mesh.server);
  CHECK(after.last_seq == before.last_seq);
  CHECK(after.first_seq == before.first_seq);

  // The holder still holds: its next round renews from its own revision.
  PassReport next = holder.RunPass(pass++, Trigger::kForced, ApplyMode::kApply);
  CHECK(next.lease.role == LeaseRole::kHolder);
}

}  // namespace
}  // namespace mesh::reconciler
