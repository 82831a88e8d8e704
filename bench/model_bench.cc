// The pure core's cost on large meshes (the goal: under 50 ms for the large mesh, the
// whole path from the records' bytes to the users file's bytes, bcrypt excluded), and what
// bcrypt costs the first time a password is seen.
//
//   Large: 2,000 nodes, 300 modules of 2 seats, 20 roles -> 623 streams, 3,526 consumers,
//          2,302 users. Large x10 for the pure parts.
//
// All figures are wall time (UseRealTime). Run: build-*/model_bench [--benchmark_filter=...]
#include <benchmark/benchmark.h>

#include <map>
#include <string>

#include "bench/support/mesh_gen.h"
#include "model/desired.h"
#include "model/records.h"
#include "model/users_file.h"

namespace {

using mesh::UserName;
using mesh::model::BcryptHasher;
using mesh::model::Credential;
using mesh::model::DesiredState;
using mesh::model::HashedCredentials;
using mesh::model::ReconcilerIdentity;
using mesh::testing::MeshSize;

ReconcilerIdentity Reconciler() {
  ReconcilerIdentity identity;
  identity.credential = {Credential::Kind::kPlain, "bench-reconciler-password"};
  return identity;
}

// The records of a mesh as JSON, and the hashes to render it with (precomputed: stand-ins of
// bcrypt's shape, since rendering only copies them).
struct Fixture {
  std::string json;
  mesh::model::Records records;
  DesiredState desired;
  HashedCredentials hashes;
};

const Fixture& FixtureFor(int factor) {
  static std::map<int, Fixture> fixtures;
  auto [it, added] = fixtures.try_emplace(factor);
  if (added) {
    Fixture& f = it->second;
    f.records = mesh::testing::GenerateMesh(MeshSize::Large().Times(factor));
    f.json = mesh::testing::ToJson(f.records);
    f.desired = mesh::model::Derive(f.records, Reconciler());
    const std::string stand_in = "$2b$10$" + std::string(53, 'x');
    for (const mesh::model::Principal& p : f.desired.principals) f.hashes[p.user] = stand_in;
  }
  return it->second;
}

void Count(benchmark::State& state, const DesiredState& d) {
  state.counters["streams"] = static_cast<double>(d.streams.size());
  state.counters["consumers"] = static_cast<double>(d.consumers.size());
  state.counters["users"] = static_cast<double>(d.principals.size());
}

// Parse + validate + derive + render: the whole pure path, bcrypt excluded.
void BM_WholePath(benchmark::State& state) {
  const Fixture& f = FixtureFor(static_cast<int>(state.range(0)));
  state.counters["json_bytes"] = static_cast<double>(f.json.size());
  for (auto _ : state) {
    mesh::model::ParseOutcome parsed = mesh::model::ParseRecords(f.json);
    if (!parsed.ok()) state.SkipWithError("the generated records do not parse");
    DesiredState d = mesh::model::Derive(parsed.records, Reconciler());
    auto rendered = mesh::model::RenderUsersFile(d, f.hashes);
    if (!rendered.ok()) state.SkipWithError("render failed");
    benchmark::DoNotOptimize(rendered);
  }
  Count(state, f.desired);
}
BENCHMARK(BM_WholePath)->Arg(1)->Arg(10)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_Parse(benchmark::State& state) {
  const Fixture& f = FixtureFor(static_cast<int>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(mesh::model::ParseRecords(f.json));
}
BENCHMARK(BM_Parse)->Arg(1)->Arg(10)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_Derive(benchmark::State& state) {
  const Fixture& f = FixtureFor(static_cast<int>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(mesh::model::Derive(f.records, Reconciler()));
  Count(state, f.desired);
}
BENCHMARK(BM_Derive)->Arg(1)->Arg(10)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_Render(benchmark::State& state) {
  const Fixture& f = FixtureFor(static_cast<int>(state.range(0)));
  for (auto _ : state) {
    benchmark::DoNotOptimize(mesh::model::RenderUsersFile(f.desired, f.hashes));
  }
}
BENCHMARK(BM_Render)->Arg(1)->Arg(10)->Unit(benchmark::kMillisecond)->UseRealTime();

// A pass over unchanged records: derive, look every password up in the hasher's cache (the
// first hashing, at bcrypt's cheapest cost 4, happens once outside the timing), render.
void BM_RerenderCachedHashes(benchmark::State& state) {
  const Fixture& f = FixtureFor(1);
  static BcryptHasher hasher("bench-salt-key", 4);
  if (!hasher.HashAll(f.desired).ok()) state.SkipWithError("hashing failed");
  for (auto _ : state) {
    DesiredState d = mesh::model::Derive(f.records, Reconciler());
    auto hashes = hasher.HashAll(d);
    if (!hashes.ok()) state.SkipWithError("hashing failed");
    benchmark::DoNotOptimize(mesh::model::RenderUsersFile(d, *hashes));
  }
  Count(state, f.desired);
}
BENCHMARK(BM_RerenderCachedHashes)->Unit(benchmark::kMillisecond)->UseRealTime();

// One bcrypt hash of a password never seen before, at cost 10 (the default) and 11: what each
// new or changed password costs the first pass (a mesh's first pass pays it for every user,
// on two threads).
void BM_BcryptFirstHash(benchmark::State& state) {
  BcryptHasher hasher("bench-salt-key", static_cast<int>(state.range(0)));
  int64_t n = 0;
  for (auto _ : state) {
    auto hash = hasher.Hash(UserName("user-" + std::to_string(n++)),
                            {Credential::Kind::kPlain, "a-password"});
    if (!hash.ok()) state.SkipWithError("bcrypt failed");
    benchmark::DoNotOptimize(hash);
  }
}
BENCHMARK(BM_BcryptFirstHash)->Arg(10)->Arg(11)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
