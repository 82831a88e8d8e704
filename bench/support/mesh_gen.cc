#include "bench/support/mesh_gen.h"

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <set>
#include <utility>
#include <vector>

namespace mesh::testing {
namespace {

using model::Credential;
using model::FollowRef;
using model::Records;
using model::Seat;

// splitmix64: fully specified, so the same seed gives the same mesh on every platform.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform enough in [0, n); n > 0.
  size_t Below(size_t n) { return static_cast<size_t>(Next() % n); }
  // 1 + Below(n): between 1 and n.
  size_t OneTo(size_t n) { return 1 + Below(n); }

 private:
  uint64_t state_;
};

constexpr char kBcryptAlphabet[] =
    "./ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

// A well-formed bcrypt hash (cost 10) of nothing in particular: what `password_bcrypt` holds.
std::string FakeBcrypt(Rng& rng) {
  std::string hash = "$2b$10$";
  for (int i = 0; i < 21; ++i) hash += kBcryptAlphabet[rng.Below(64)];
  hash += '.';  // the salt's last character carries 2 bits only
  for (int i = 0; i < 30; ++i) hash += kBcryptAlphabet[rng.Below(64)];
  hash += '.';  // so does the digest's
  return hash;
}

Credential MakeCredential(const MeshSize& size, Rng& rng, size_t index, bool required) {
  Credential c;
  if (size.credentials == CredentialMix::kMixed && !required) {
    if (index % 7 == 3) return c;  // no credential
    if (index % 5 == 1) {
      c.kind = Credential::Kind::kBcrypt;
      c.secret = FakeBcrypt(rng);
      return c;
    }
  }
  c.kind = Credential::Kind::kPlain;
  c.secret = "pw-" + std::to_string(size.seed) + "-" + std::to_string(index) + "-" +
             std::to_string(rng.Next() % 1000000);
  return c;
}

std::vector<std::string> Names(const std::string& prefix, size_t count) {
  std::vector<std::string> out;
  for (size_t i = 0; i < count; ++i) out.push_back(prefix + std::to_string(i));
  return out;
}

// Up to `count` distinct picks from [0, n), skipping `excluded`, in draw order.
std::vector<size_t> Pick(Rng& rng, size_t n, size_t count, const std::set<size_t>& excluded) {
  std::vector<size_t> out;
  const size_t available = n > excluded.size() ? n - excluded.size() : 0;
  count = std::min(count, available);
  std::set<size_t> seen;
  while (out.size() < count) {
    const size_t i = rng.Below(n);
    if (excluded.count(i) || !seen.insert(i).second) continue;
    out.push_back(i);
  }
  return out;
}

Seat MakeSeat(Rng& rng, std::string name) {
  Seat seat;
  seat.name = std::move(name);
  seat.accepts = Names("k", rng.OneTo(3));
  seat.emits = Names("e", rng.OneTo(2));
  return seat;
}

// Every seat of the mesh (module seats first, then roles), for uses and follows.
struct SeatIndex {
  std::vector<Seat*> seats;
  std::vector<int> owner;  // module index, or -1 for a role
};

std::vector<FollowRef> PickFollows(Rng& rng, const SeatIndex& index, size_t count, int follower) {
  std::vector<FollowRef> follows;
  if (index.seats.empty()) return follows;
  std::set<std::pair<std::string, std::string>> seen;
  auto take = [&](size_t s, const std::string& event) {
    if (follows.size() < count && index.owner[s] != follower &&
        seen.emplace(index.seats[s]->name, event).second) {
      follows.push_back({index.seats[s]->name, event});
    }
  };
  // Random seats and events first; a small mesh may run out of draws, then take the rest in
  // order so that the count is reached whenever the mesh has enough events.
  for (size_t draw = 0; draw < 16 * count && follows.size() < count; ++draw) {
    const size_t s = rng.Below(index.seats.size());
    take(s, index.seats[s]->emits[rng.Below(index.seats[s]->emits.size())]);
  }
  for (size_t s = 0; s < index.seats.size() && follows.size() < count; ++s) {
    for (const std::string& event : index.seats[s]->emits) take(s, event);
  }
  return follows;
}

}  // namespace

MeshSize MeshSize::Small() {
  return {5, 4, 2, 2, 2, 2, 1, CredentialMix::kPlain};
}
MeshSize MeshSize::Medium() {
  return {200, 40, 2, 6, 3, 3, 1, CredentialMix::kPlain};
}
MeshSize MeshSize::Large() {
  return {2000, 300, 2, 20, 3, 3, 1, CredentialMix::kPlain};
}

MeshSize MeshSize::Times(int factor) const {
  MeshSize out = *this;
  out.nodes *= factor;
  out.modules *= factor;
  out.roles *= factor;
  return out;
}

MeshSize MeshSize::WithSeed(uint64_t new_seed) const {
  MeshSize out = *this;
  out.seed = new_seed;
  return out;
}

MeshSize MeshSize::WithCredentials(CredentialMix mix) const {
  MeshSize out = *this;
  out.credentials = mix;
  return out;
}

model::Records GenerateMesh(const MeshSize& size) {
  Rng rng(size.seed);
  Records r;
  r.version = 1;
  r.mesh = "gen-" + std::to_string(size.seed);
  r.bus.account = "MESH";
  r.bus.replicas = 1;
  r.bus.events_max_age_seconds = 86400;
  r.controller.user = "mesh-controller";
  r.controller.credential = MakeCredential(size, rng, 0, /*required=*/true);

  size_t principal = 1;
  for (int i = 0; i < size.nodes; ++i) {
    r.nodes.push_back({"node-" + std::to_string(i), MakeCredential(size, rng, principal++, false)});
  }
  for (int m = 0; m < size.modules; ++m) {
    model::Module module;
    module.name = "mod-" + std::to_string(m);
    module.credential = MakeCredential(size, rng, principal++, false);
    for (int s = 0; s < size.seats_per_module; ++s) {
      module.seats.push_back(MakeSeat(rng, "seat-" + std::to_string(m) + "-" + std::to_string(s)));
    }
    r.modules.push_back(std::move(module));
  }
  for (int i = 0; i < size.roles; ++i) {
    model::Role role;
    role.seat = MakeSeat(rng, "mesh-role-" + std::to_string(i));
    for (size_t h : Pick(rng, r.nodes.size(), static_cast<size_t>(size.holders_per_role), {})) {
      role.holders.push_back(r.nodes[h].name);
    }
    r.roles.push_back(std::move(role));
  }

  // Pointers into r are stable from here on: no more modules or roles are added.
  SeatIndex index;
  for (size_t m = 0; m < r.modules.size(); ++m) {
    for (Seat& seat : r.modules[m].seats) {
      index.seats.push_back(&seat);
      index.owner.push_back(static_cast<int>(m));
    }
  }
  const size_t module_seats = index.seats.size();
  for (model::Role& role : r.roles) {
    index.seats.push_back(&role.seat);
    index.owner.push_back(-1);
  }

  for (size_t s = 0; s < index.seats.size(); ++s) {
    Seat& seat = *index.seats[s];
    const bool is_role = s >= module_seats;
    if (is_role && module_seats == 0) continue;
    const size_t pool = is_role ? module_seats : index.seats.size();
    const size_t count = is_role ? 1 : rng.OneTo(2);
    for (size_t t : Pick(rng, pool, count, is_role ? std::set<size_t>{} : std::set<size_t>{s})) {
      seat.uses.push_back(index.seats[t]->name);
    }
  }
  for (size_t m = 0; m < r.modules.size(); ++m) {
    r.modules[m].follows =
        PickFollows(rng, index, static_cast<size_t>(size.follows_per_module), static_cast<int>(m));
  }
  r.controller.follows = PickFollows(rng, index, kControllerFollows, -2);
  for (size_t t : Pick(rng, index.seats.size(), kControllerSubmits, {})) {
    r.controller.submits_to.push_back(index.seats[t]->name);
  }
  return r;
}

namespace {

using JsonWriter = rapidjson::Writer<rapidjson::StringBuffer>;

void String(JsonWriter& w, const std::string& s) {
  w.String(s.data(), static_cast<rapidjson::SizeType>(s.size()));
}

void Strings(JsonWriter& w, const char* key, const std::vector<std::string>& values) {
  w.Key(key);
  w.StartArray();
  for (const std::string& v : values) String(w, v);
  w.EndArray();
}

void Follows(JsonWriter& w, const std::vector<FollowRef>& follows) {
  w.Key("follows");
  w.StartArray();
  for (const FollowRef& f : follows) String(w, f.seat + "." + f.event);
  w.EndArray();
}

void WriteCredential(JsonWriter& w, const Credential& c) {
  switch (c.kind) {
    case Credential::Kind::kNone:
      return;
    case Credential::Kind::kPlain:
      w.Key("password");
      break;
    case Credential::Kind::kBcrypt:
      w.Key("password_bcrypt");
      break;
  }
  String(w, c.secret);
}

void WriteSeatFields(JsonWriter& w, const Seat& seat) {
  w.Key("name");
  String(w, seat.name);
  Strings(w, "accepts", seat.accepts);
  Strings(w, "emits", seat.emits);
  Strings(w, "uses", seat.uses);
}

}  // namespace

std::string ToJson(const model::Records& r) {
  rapidjson::StringBuffer buffer;
  JsonWriter w(buffer);
  w.StartObject();
  w.Key("version");
  w.Int(r.version);
  w.Key("mesh");
  String(w, r.mesh);
  w.Key("bus");
  w.StartObject();
  w.Key("account");
  String(w, r.bus.account);
  w.Key("replicas");
  w.Int(r.bus.replicas);
  w.Key("events_max_age_seconds");
  w.Int64(r.bus.events_max_age_seconds);
  w.EndObject();

  w.Key("controller");
  w.StartObject();
  w.Key("user");
  String(w, r.controller.user);
  WriteCredential(w, r.controller.credential);
  Strings(w, "submits_to", r.controller.submits_to);
  Follows(w, r.controller.follows);
  w.EndObject();

  w.Key("nodes");
  w.StartArray();
  for (const model::Node& node : r.nodes) {
    w.StartObject();
    w.Key("name");
    String(w, node.name);
    WriteCredential(w, node.credential);
    w.EndObject();
  }
  w.EndArray();

  w.Key("modules");
  w.StartArray();
  for (const model::Module& module : r.modules) {
    w.StartObject();
    w.Key("name");
    String(w, module.name);
    WriteCredential(w, module.credential);
    w.Key("seats");
    w.StartArray();
    for (const Seat& seat : module.seats) {
      w.StartObject();
      WriteSeatFields(w, seat);
      w.EndObject();
    }
    w.EndArray();
    Follows(w, module.follows);
    w.EndObject();
  }
  w.EndArray();

  w.Key("roles");
  w.StartArray();
  for (const model::Role& role : r.roles) {
    w.StartObject();
    WriteSeatFields(w, role.seat);
    Strings(w, "holders", role.holders);
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  return std::string(buffer.GetString(), buffer.GetSize());
}

}  // namespace mesh::testing
