// The planner's cost (pure: no I/O, no clock) on the Large generated mesh (623 streams, 3,526
// consumers, 2,302 users) and on Large x10, the "10x" size for the pure parts:
//   Converged  the bus holds exactly the desired state: no drift, no action
//   EmptyBus   nothing exists (a first pass, or after a store wipe): everything missing
//   Drifted    every tenth stream and consumer differs in a field updated in place
// The users file is compared too (same bytes, loaded). All figures are wall time.
// Run: build-*/plan_bench [--benchmark_filter=...]
#include <benchmark/benchmark.h>

#include <map>
#include <string>

#include "bench/support/mesh_gen.h"
#include "bench/support/observed_gen.h"
#include "model/desired.h"
#include "model/users_file.h"
#include "reconciler/plan/plan.h"

namespace {

using mesh::model::DesiredState;
using mesh::observers::ObservedState;
using mesh::reconciler::PlanOptions;
using mesh::reconciler::PlanResult;
using mesh::testing::MeshSize;

constexpr int kDriftEvery = 10;
constexpr char kUsersFile[] = "/etc/nats/users.conf";

struct Fixture {
  DesiredState desired;
  mesh::model::RenderedUsersFile rendered;
  ObservedState converged;
  ObservedState empty;
  ObservedState drifted;
};

const Fixture& FixtureFor(int factor) {
  static std::map<int, Fixture> fixtures;
  auto [it, added] = fixtures.try_emplace(factor);
  if (added) {
    Fixture& f = it->second;
    mesh::model::ReconcilerIdentity identity;
    identity.credential = {mesh::model::Credential::Kind::kPlain, "bench-reconciler-password"};
    f.desired =
        mesh::model::Derive(mesh::testing::GenerateMesh(MeshSize::Large().Times(factor)), identity);
    // Stand-ins of bcrypt's shape: rendering only copies them.
    mesh::model::HashedCredentials hashes;
    for (const auto& p : f.desired.principals) hashes[p.user] = "$2b$10$" + std::string(53, 'x');
    auto rendered = mesh::model::RenderUsersFile(f.desired, hashes);
    if (rendered.ok()) f.rendered = std::move(*rendered);
    f.converged = mesh::testing::ConvergedObservation(f.desired, f.rendered.bytes);
    f.empty = f.converged;
    f.empty.jetstream.streams.clear();
    f.empty.jetstream.consumers.clear();
    f.drifted = mesh::testing::DriftedObservation(f.converged, kDriftEvery);
  }
  return it->second;
}

void RunPlan(benchmark::State& state, const ObservedState Fixture::*observed) {
  const Fixture& f = FixtureFor(static_cast<int>(state.range(0)));
  if (f.rendered.bytes.empty()) state.SkipWithError("the users file could not be rendered");
  const PlanOptions options{mesh::Prune::kNo, kUsersFile};
  size_t actions = 0;
  for (auto _ : state) {
    PlanResult plan = mesh::reconciler::Plan(f.desired, f.rendered, f.*observed, options);
    actions = plan.actions.size();
    benchmark::DoNotOptimize(plan);
  }
  state.counters["streams"] = static_cast<double>(f.desired.streams.size());
  state.counters["consumers"] = static_cast<double>(f.desired.consumers.size());
  state.counters["actions"] = static_cast<double>(actions);
}

void BM_PlanConverged(benchmark::State& state) {
  RunPlan(state, &Fixture::converged);
}
void BM_PlanEmptyBus(benchmark::State& state) {
  RunPlan(state, &Fixture::empty);
}
void BM_PlanDrifted(benchmark::State& state) {
  RunPlan(state, &Fixture::drifted);
}
BENCHMARK(BM_PlanConverged)->Arg(1)->Arg(10)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_PlanEmptyBus)->Arg(1)->Arg(10)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_PlanDrifted)->Arg(1)->Arg(10)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
