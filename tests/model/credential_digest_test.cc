// Credential digests (model/credential_digest.h): a later hasher reuses every hash that the
// users file proves, and hashes only new and changed passwords (counted through the hasher's
// bcrypt_calls(), not timed); a hand-edited hash or digest, another key or another cost is
// never reused; nothing on disk lets a reader test a password guess without bcrypt; a live
// nats-server accepts every re-rendered entry.
#include "model/credential_digest.h"

#include <nats/nats.h>

#include <catch2/catch.hpp>
#include <regex>
#include <string>
#include <vector>

#include "bench/support/mesh_gen.h"
#include "model/digest.h"
#include "model/users_file.h"
#include "tests/model/fixtures.h"
#include "tests/support/nats_client.h"
#include "tests/support/nats_server.h"

namespace mesh::model {
namespace {

using test::kCheapCost;
using test::kReconcilerPassword;

size_t PlainCount(const DesiredState& desired) {
  size_t n = 0;
  for (const Principal& p : desired.principals) {
    n += p.credential.kind == Credential::Kind::kPlain ? 1 : 0;
  }
  return n;
}

RenderedUsersFile Reuse(const DesiredState& desired, const std::string& existing,
                        BcryptHasher& hasher) {
  Result<RenderedUsersFile> r = RenderUsersFileReusing(desired, existing, hasher);
  INFO(r.status().ToString());
  REQUIRE(r.ok());
  return std::move(r).value();
}

Principal& Mutable(DesiredState& desired, const std::string& user) {
  for (Principal& p : desired.principals) {
    if (p.user.str() == user) return p;
  }
  FAIL("no principal " << user);
  throw std::logic_error("unreachable");
}

// The value of `password: "..."` in `block`.
std::string HashOf(const std::string& block) {
  std::smatch m;
  REQUIRE(std::regex_search(block, m, std::regex("password: \"([^\"]+)\"")));
  return m[1];
}

std::string DigestOf(const std::string& block) {
  std::smatch m;
  REQUIRE(
      std::regex_search(block, m, std::regex("# credential digest: hmac-sha256-v1 ([0-9a-f]+)")));
  return m[1];
}

TEST_CASE("digests: a second process reuses every unchanged hash, bcrypt is not called",
          "[render][digest]") {
  const DesiredState desired = test::DeriveExample();
  BcryptHasher first(kReconcilerPassword, kCheapCost);
  const RenderedUsersFile written = Reuse(desired, "", first);
  CHECK(first.bcrypt_calls() == PlainCount(desired));
  for (const Principal& p : desired.principals) {
    if (p.credential.kind != Credential::Kind::kPlain) continue;
    const std::string& block = written.BlockAt(p.user);
    CHECK(DigestOf(block).size() == 64);
    CHECK(BcryptHasher::Verify(p.credential.secret, HashOf(block)));
  }

  BcryptHasher second(kReconcilerPassword, kCheapCost);  // a new process, same secret
  CHECK(ReusableHashes(desired, written.bytes, second.digest_key(), kCheapCost).size() ==
        PlainCount(desired));
  const RenderedUsersFile again = Reuse(desired, written.bytes, second);
  CHECK(second.bcrypt_calls() == 0);
  CHECK(again.bytes == written.bytes);
  // What the pass does: prove once, adopt, then render from the cache alone.
  BcryptHasher adopted(kReconcilerPassword, kCheapCost);
  adopted.Adopt(desired, ReusableHashes(desired, written.bytes, adopted.digest_key(), kCheapCost));
  Result<RenderedUsersFile> cached = RenderUsersFileCached(desired, adopted);
  REQUIRE(cached.ok());
  CHECK(adopted.bcrypt_calls() == 0);
  CHECK(cached->bytes == written.bytes);
  // And the reuse works from a file in another layout (e.g. one account's entries only).
  std::string one_entry = "users: [\n" + written.BlockAt(UserName("billing")) + "]\n";
  BcryptHasher third(kReconcilerPassword, kCheapCost);
  CHECK(ReusableHashes(desired, one_entry, third.digest_key(), kCheapCost)
            .count(UserName("billing")) == 1);
}

TEST_CASE("digests: a changed password gets a new hash and a new digest, nothing else is hashed",
          "[render][digest]") {
  DesiredState desired = test::DeriveExample();
  BcryptHasher first(kReconcilerPassword, kCheapCost);
  const RenderedUsersFile before = Reuse(desired, "", first);

  Mutable(desired, "billing").credential.secret = "a-new-billing-password";
  BcryptHasher second(kReconcilerPassword, kCheapCost);
  const RenderedUsersFile after = Reuse(desired, before.bytes, second);
  CHECK(second.bcrypt_calls() == 1);
  for (const auto& [user, block] : after.Blocks()) {
    if (user.str() == "billing") {
      CHECK(HashOf(block) != HashOf(before.BlockAt(user)));
      CHECK(DigestOf(block) != DigestOf(before.BlockAt(user)));
      CHECK(BcryptHasher::Verify("a-new-billing-password", HashOf(block)));
      CHECK_FALSE(BcryptHasher::Verify("demo-only-billing-password", HashOf(block)));
    } else {
      CHECK(block == before.BlockAt(user));
    }
  }
}

TEST_CASE("digests: a hand-edited hash or digest is not reused, and the rendering repairs it",
          "[render][digest]") {
  const DesiredState desired = test::DeriveExample();
  BcryptHasher first(kReconcilerPassword, kCheapCost);
  const RenderedUsersFile good = Reuse(desired, "", first);
  const std::string shop_hash = HashOf(good.BlockAt(UserName("shop")));
  const std::string billing_hash = HashOf(good.BlockAt(UserName("billing")));

  SECTION("another user's valid hash pasted in, digest kept") {
    std::string edited = good.bytes;
    edited.replace(edited.find(shop_hash), shop_hash.size(), billing_hash);
    BcryptHasher second(kReconcilerPassword, kCheapCost);
    CHECK(
        ReusableHashes(desired, edited, second.digest_key(), kCheapCost).count(UserName("shop")) ==
        0);
    const RenderedUsersFile repaired = Reuse(desired, edited, second);
    CHECK(second.bcrypt_calls() == 1);
    CHECK(repaired.bytes == good.bytes);
  }
  SECTION("a digest digit changed") {
    std::string edited = good.bytes;
    const std::string digest = DigestOf(good.BlockAt(UserName("shop")));
    const size_t at = edited.find(digest);
    edited[at] = edited[at] == '0' ? '1' : '0';
    BcryptHasher second(kReconcilerPassword, kCheapCost);
    const RenderedUsersFile repaired = Reuse(desired, edited, second);
    CHECK(second.bcrypt_calls() == 1);
    CHECK(repaired.bytes == good.bytes);
  }
  SECTION("a digest removed") {
    const std::string digest_line = "        " + std::string(kDigestCommentPrefix) +
                                    DigestOf(good.BlockAt(UserName("shop"))) + "\n";
    std::string edited = good.bytes;
    REQUIRE(edited.find(digest_line) != std::string::npos);
    edited.erase(edited.find(digest_line), digest_line.size());
    BcryptHasher second(kReconcilerPassword, kCheapCost);
    CHECK(Reuse(desired, edited, second).bytes == good.bytes);
    CHECK(second.bcrypt_calls() == 1);
  }
  SECTION("a hash edited into text that is no hash") {
    std::string edited = good.bytes;
    edited.replace(edited.find(shop_hash), shop_hash.size(), "demo-only-shop-password");
    BcryptHasher second(kReconcilerPassword, kCheapCost);
    CHECK(Reuse(desired, edited, second).bytes == good.bytes);
    CHECK(second.bcrypt_calls() == 1);
  }
}

TEST_CASE("digests: another reconciler secret or another cost reuses nothing", "[render][digest]") {
  const DesiredState desired = test::DeriveExample();
  BcryptHasher first(kReconcilerPassword, kCheapCost);
  const RenderedUsersFile written = Reuse(desired, "", first);

  BcryptHasher other_secret("another-reconciler-password", kCheapCost);
  CHECK(ReusableHashes(desired, written.bytes, other_secret.digest_key(), kCheapCost).empty());
  const RenderedUsersFile rekeyed = Reuse(desired, written.bytes, other_secret);
  CHECK(other_secret.bcrypt_calls() == PlainCount(desired));
  for (const Principal& p : desired.principals) {
    if (p.credential.kind != Credential::Kind::kPlain) continue;
    // A new salt (keyed), so a new hash and a new digest.
    CHECK(rekeyed.BlockAt(p.user) != written.BlockAt(p.user));
  }

  BcryptHasher other_cost(kReconcilerPassword, kCheapCost + 1);
  CHECK(ReusableHashes(desired, written.bytes, other_cost.digest_key(), kCheapCost + 1).empty());
  CHECK(ReusableHashes(desired, written.bytes, DigestKey(), kCheapCost).empty());
}

// Issue 37 item 8: a hasher at another cost proved nothing, so every password was hashed again.
// A digest is keyed at its hash's cost: one bcrypt (that cost's key) proves them all, and the
// file renders to the same bytes unless the hashes are to be re-hashed.
TEST_CASE("digests: hashes of another cost are proven with that cost's key, kept or re-hashed",
          "[render][digest]") {
  const DesiredState desired = test::DeriveExample();
  BcryptHasher first(kReconcilerPassword, kCheapCost);
  const RenderedUsersFile written = Reuse(desired, "", first);

  BcryptHasher keeps(kReconcilerPassword, kCheapCost + 1);
  CHECK(ProvenBy(keeps, desired, written.bytes, OtherCostHashes::kKeep).size() ==
        PlainCount(desired));
  Result<RenderedUsersFile> kept = RenderUsersFileReusing(desired, written.bytes, keeps);
  REQUIRE(kept.ok());
  CHECK(kept->bytes == written.bytes);
  CHECK(keeps.bcrypt_calls() == 0);

  BcryptHasher rehashes(kReconcilerPassword, kCheapCost + 1);
  CHECK(ProvenBy(rehashes, desired, written.bytes, OtherCostHashes::kRehash).empty());
  Result<RenderedUsersFile> rehashed = RenderUsersFileReusing(
      desired, written.bytes, rehashes, UsersScope::kServer, {}, OtherCostHashes::kRehash);
  REQUIRE(rehashed.ok());
  CHECK(rehashes.bcrypt_calls() == PlainCount(desired));
  CHECK(rehashed->bytes != written.bytes);
  // Rendered at the new cost, the file proves itself at either cost, and the first (cost 4)
  // keeps it as well: both render the same bytes without bcrypt.
  BcryptHasher again(kReconcilerPassword, kCheapCost + 1);
  CHECK(RenderUsersFileReusing(desired, rehashed->bytes, again)->bytes == rehashed->bytes);
  BcryptHasher back(kReconcilerPassword, kCheapCost);
  CHECK(RenderUsersFileReusing(desired, rehashed->bytes, back)->bytes == rehashed->bytes);
  CHECK(again.bcrypt_calls() + back.bcrypt_calls() == 0);
  // Another reconciler secret proves nothing, at any cost.
  BcryptHasher other_secret("another-reconciler-password", kCheapCost + 1);
  CHECK(ProvenBy(other_secret, desired, written.bytes, OtherCostHashes::kKeep).empty());
  CHECK(HashCost("$2b$04$abc") == 4);
  CHECK_FALSE(HashCost("$2a$04$abc").has_value());
  CHECK_FALSE(HashCost("$2b$4$abc").has_value());
}

TEST_CASE("digests: the file holds no plain password and no unkeyed digest of one",
          "[render][digest]") {
  const Records generated = mesh::testing::GenerateMesh(
      mesh::testing::MeshSize::Medium().WithCredentials(mesh::testing::CredentialMix::kPlain));
  const DesiredState desired = Derive(generated, test::Reconciler());
  BcryptHasher hasher(kReconcilerPassword, kCheapCost);
  const RenderedUsersFile r = Reuse(desired, "", hasher);
  REQUIRE(PlainCount(desired) > 10);
  for (const Principal& p : desired.principals) {
    if (p.credential.kind != Credential::Kind::kPlain) continue;
    INFO(p.user.str());
    CHECK(r.bytes.find(p.credential.secret) == std::string::npos);
    CHECK(r.bytes.find(Sha256Hex(p.credential.secret)) == std::string::npos);
    CHECK(r.bytes.find(Sha256Hex(p.user.str() + '\0' + p.credential.secret)) == std::string::npos);
    CHECK(r.bytes.find(Sha256Hex(p.user.str() + p.credential.secret)) == std::string::npos);
  }
  // The digest is keyed: the same inputs under another key give another digest.
  const std::string block = r.Blocks().begin()->second;
  const Principal& first = desired.principals.front();
  Result<std::string> other = CredentialDigest(DigestKey(std::string(32, 'x')), first.user,
                                               HashOf(block), first.credential.secret);
  REQUIRE(other.ok());
  CHECK(*other != DigestOf(block));
}

TEST_CASE("digests: a live nats-server accepts every re-rendered entry, changed or reused",
          "[render][digest][nats][server]") {
  DesiredState desired = test::DeriveExample();
  BcryptHasher first(kReconcilerPassword, BcryptHasher::kDefaultCost);
  const RenderedUsersFile before = Reuse(desired, "", first);
  const std::vector<std::string> changed = {"billing", "shop"};
  for (const std::string& user : changed) Mutable(desired, user).credential.secret += "-rotated";
  BcryptHasher second(kReconcilerPassword, BcryptHasher::kDefaultCost);
  const RenderedUsersFile after = Reuse(desired, before.bytes, second);
  CHECK(second.bcrypt_calls() == changed.size());

  mesh::testing::NatsServerOptions options;
  options.users_conf = after.bytes;
  auto server = mesh::testing::NatsServer::Start(options);
  for (const Principal& p : desired.principals) {
    if (p.credential.kind != Credential::Kind::kPlain) continue;
    INFO(p.user.str());
    natsStatus status = NATS_OK;
    auto connection =
        mesh::testing::ConnectNats(server->url(), p.user.str(), p.credential.secret, {}, status);
    CHECK(status == NATS_OK);
  }
  for (const std::string& user : changed) {
    INFO(user << " with its old password");
    natsStatus status = NATS_OK;
    std::string old = test::PrincipalOf(desired, user).credential.secret;
    old.resize(old.size() - std::string("-rotated").size());
    auto connection = mesh::testing::ConnectNats(server->url(), user, old, {}, status);
    CHECK(status != NATS_OK);
  }
}

}  // namespace
}  // namespace mesh::model
