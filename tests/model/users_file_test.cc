// The users file (model/users_file.h): RenderUsersFile's layout, quoting, determinism, refusal
// and secrecy; SplitUserBlocks cutting renderings (and hand edits) back into user blocks;
// BcryptHasher's deterministic, keyed salt, its cache and Verify; and the real nats-server
// accepting the rendering (`nats-server -t`, then a live server authenticating and enforcing
// the permissions).
#include "model/users_file.h"

#include <crypt.h>
#include <nats/nats.h>
#include <openssl/hmac.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "bench/support/mesh_gen.h"
#include "model/desired.h"
#include "tests/model/fixtures.h"
#include "tests/support/nats_client.h"
#include "tests/support/nats_server.h"

namespace mesh::model {
namespace {

using test::DeriveExample;
using test::kCheapCost;

// The example's plain passwords (examples/records.json) and the reconciler's.
const std::vector<std::string> kExamplePasswords = {
    "demo-only-controller-password", "demo-only-node-a-password", "demo-only-billing-password",
    "demo-only-shop-password", test::kReconcilerPassword};

RenderedUsersFile Render(const DesiredState& desired, BcryptHasher& hasher) {
  Result<HashedCredentials> hashes = hasher.HashAll(desired);
  INFO(hashes.status().ToString());
  REQUIRE(hashes.ok());
  Result<RenderedUsersFile> rendered = RenderUsersFile(desired, *hashes);
  INFO(rendered.status().ToString());
  REQUIRE(rendered.ok());
  return std::move(rendered).value();
}

RenderedUsersFile RenderExample(int cost = kCheapCost) {
  BcryptHasher hasher("test-salt-key", cost);
  return Render(DeriveExample(), hasher);
}

Credential Plain(const std::string& password) {
  return Credential{Credential::Kind::kPlain, password};
}

// A principal with a plain password and no permissions yet.
Principal PlainPrincipal(const std::string& user, PrincipalKind kind, const std::string& password) {
  Principal p;
  p.user = UserName(user);
  p.kind = kind;
  p.credential = Plain(password);
  return p;
}

// The rendering of an account "MESH" holding only `principal`.
RenderedUsersFile RenderAlone(const Principal& principal) {
  DesiredState d;
  d.account = "MESH";
  d.principals.push_back(principal);
  BcryptHasher hasher("key", kCheapCost);
  return Render(d, hasher);
}

std::vector<std::string> Lines(const std::string& bytes) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < bytes.size()) {
    const size_t end = bytes.find('\n', start);
    lines.push_back(bytes.substr(start, end - start));
    start = end == std::string::npos ? bytes.size() : end + 1;
  }
  return lines;
}

TEST_CASE("the example renders one quoted entry per principal with a credential", "[render]") {
  const RenderedUsersFile r = RenderExample();
  CHECK(r.bytes.rfind("# Managed by mesh-reconciler", 0) == 0);
  CHECK(r.bytes.find("accounts {\n  \"MESH\": {\n    jetstream: enabled\n    users: [\n") !=
        std::string::npos);
  CHECK(r.bytes.back() == '\n');

  // node-c has no credential: left out, and named.
  std::vector<std::string> users;
  for (const auto& [user, block] : r.Blocks()) users.push_back(user.str());
  CHECK(users == std::vector<std::string>{"billing", "mesh-controller", "mesh-reconciler", "node-a",
                                          "node-b", "shop"});
  REQUIRE(r.without_credential.size() == 1);
  CHECK(r.without_credential[0].str() == "node-c");
  CHECK(r.bytes.find("user: \"node-c\"") == std::string::npos);

  // Entries appear in the file in user-name order, each exactly as in `blocks`.
  size_t last = 0;
  for (const auto& [user, block] : r.Blocks()) {
    const size_t at = r.bytes.find(block);
    REQUIRE(at != std::string::npos);
    CHECK(at >= last);
    last = at;
  }

  // Every line is structure, a comment, or a key with a double-quoted string: nothing that
  // nats-server could read as a variable reference ($JS..., $2b$...).
  const std::regex allowed(
      R"(\s*(#.*|\{|\}|\]|accounts \{|"MESH": \{|jetstream: enabled|users: \[|permissions: \{|)"
      R"((publish|subscribe): \{|(allow|deny): \[|(user|password): "[^"\\]*"|"[^"\\]*"))");
  for (const std::string& line : Lines(r.bytes)) {
    INFO(line);
    CHECK(std::regex_match(line, allowed));
  }
}

TEST_CASE("the rendering carries each principal's permissions", "[render]") {
  const RenderedUsersFile r = RenderExample();
  const std::string& reconciler = r.BlockAt(UserName("mesh-reconciler"));
  CHECK(reconciler ==
        "      {\n"
        "        user: \"mesh-reconciler\"\n"
        "        password: \"" +
            reconciler.substr(reconciler.find("$2b$"), 60) +
            "\"\n"
            "        permissions: {\n"
            "          publish: {\n"
            "            allow: [\n"
            "              \"$JS.API.>\"\n"
            "            ]\n"
            "          }\n"
            "          subscribe: {\n"
            "            allow: [\n"
            "              \"$JS.EVENT.ADVISORY.>\"\n"
            "              \"_INBOX.mesh-reconciler.>\"\n"
            "            ]\n"
            "          }\n"
            "        }\n"
            "      }\n");
  const std::string& shop = r.BlockAt(UserName("shop"));
  CHECK(shop.find("\"mesh.q.intake\"") != std::string::npos);
  CHECK(shop.find("\"$JS.ACK.SEAT_intake.worker.>\"") != std::string::npos);
  CHECK(shop.find("\"mesh.work.mesh-notify.notify\"") != std::string::npos);
}

TEST_CASE("an empty allow list is written as deny everything", "[render]") {
  Principal p = PlainPrincipal("quiet", PrincipalKind::kNode, "secret");
  p.subscribe_allow = {"_INBOX.quiet.>"};
  const RenderedUsersFile r = RenderAlone(p);
  const std::string& block = r.BlockAt(UserName("quiet"));
  CHECK(block.find("publish: {\n            deny: [\n              \">\"\n            ]\n") !=
        std::string::npos);
  CHECK(block.find("subscribe: {\n            allow: [\n              \"_INBOX.quiet.>\"\n") !=
        std::string::npos);
  CHECK(block.find("allow: [\n            ]") == std::string::npos);
}

TEST_CASE("rendering is byte-stable", "[render]") {
  const DesiredState d = DeriveExample();
  BcryptHasher first("same-key", kCheapCost);
  BcryptHasher second("same-key", kCheapCost);
  const RenderedUsersFile a = Render(d, first);
  CHECK(Render(d, first).bytes == a.bytes);   // again, from the cache
  CHECK(Render(d, second).bytes == a.bytes);  // another instance, same key
  CHECK(Render(d, second).Blocks() == a.Blocks());

  BcryptHasher other_key("other-key", kCheapCost);
  const RenderedUsersFile b = Render(d, other_key);
  CHECK(b.bytes != a.bytes);
  // password_bcrypt is passed through whatever the key: node-b's entry is the same.
  CHECK(b.BlockAt(UserName("node-b")) == a.BlockAt(UserName("node-b")));
  CHECK(b.BlockAt(UserName("node-a")) != a.BlockAt(UserName("node-a")));
}

TEST_CASE("no plain-text password is ever written", "[render]") {
  const RenderedUsersFile r = RenderExample();
  for (const std::string& password : kExamplePasswords) {
    INFO(password);
    CHECK(r.bytes.find(password) == std::string::npos);
  }
  // node-b's password_bcrypt from the records is passed through unchanged.
  CHECK(r.BlockAt(UserName("node-b"))
            .find("\"$2b$10$.GLC1pJmU2OqkLXbYOlnSuWDpWEj3BK0Ujo6O8FZ0CqlqE1E.VtA.\"") !=
        std::string::npos);

  using mesh::testing::CredentialMix;
  using mesh::testing::MeshSize;
  const Records generated = mesh::testing::GenerateMesh(
      MeshSize::Small().WithSeed(9).WithCredentials(CredentialMix::kMixed));
  BcryptHasher hasher("key", kCheapCost);
  const RenderedUsersFile g = Render(Derive(generated, test::Reconciler()), hasher);
  auto absent = [&](const Credential& c) {
    if (c.kind == Credential::Kind::kPlain) CHECK(g.bytes.find(c.secret) == std::string::npos);
  };
  absent(generated.controller.credential);
  for (const Node& n : generated.nodes) absent(n.credential);
  for (const Module& m : generated.modules) absent(m.credential);
}

TEST_CASE("refuses a rendering in which only the reconciler has a credential", "[render]") {
  Records r = test::Example();
  r.controller.credential = {};
  for (Node& n : r.nodes) n.credential = {};
  for (Module& m : r.modules) m.credential = {};
  const DesiredState d = Derive(r, test::Reconciler());
  BcryptHasher hasher("key", kCheapCost);
  Result<HashedCredentials> hashes = hasher.HashAll(d);
  REQUIRE(hashes.ok());
  CHECK(hashes->size() == 1);  // the reconciler's
  Result<RenderedUsersFile> rendered = RenderUsersFile(d, *hashes);
  REQUIRE_FALSE(rendered.ok());
  CHECK(rendered.status().code() == Errc::kInvalidArgument);
  CHECK(rendered.status().message().rfind("$: ", 0) == 0);

  // Nobody at all, the reconciler included: refused too.
  DesiredState nobody = d;
  for (Principal& p : nobody.principals) p.credential = {};
  CHECK(RenderUsersFile(nobody, {}).status().code() == Errc::kInvalidArgument);
}

TEST_CASE("refuses to render a principal without its hash, or with a non-bcrypt one", "[render]") {
  const DesiredState d = DeriveExample();
  BcryptHasher hasher("key", kCheapCost);
  Result<HashedCredentials> hashes = hasher.HashAll(d);
  REQUIRE(hashes.ok());
  HashedCredentials missing = *hashes;
  missing.erase(UserName("shop"));
  CHECK(RenderUsersFile(d, missing).status().code() == Errc::kInternal);
  HashedCredentials plain = *hashes;
  plain[UserName("shop")] = "demo-only-shop-password";
  Result<RenderedUsersFile> refused = RenderUsersFile(d, plain);
  CHECK(refused.status().code() == Errc::kInternal);
  CHECK(refused.status().message().find("demo-only") == std::string::npos);
}

TEST_CASE("SplitUserBlocks cuts a rendering back into its blocks", "[render]") {
  const RenderedUsersFile example = RenderExample();
  CHECK(SplitUserBlocks(example.bytes) == example.Blocks());

  using mesh::testing::CredentialMix;
  using mesh::testing::MeshSize;
  for (uint64_t seed : {1, 2, 3}) {
    const Records generated = mesh::testing::GenerateMesh(
        MeshSize::Medium().WithSeed(seed).WithCredentials(CredentialMix::kMixed));
    BcryptHasher hasher("key", kCheapCost);
    const RenderedUsersFile r = Render(Derive(generated, test::Reconciler()), hasher);
    CHECK(SplitUserBlocks(r.bytes) == r.Blocks());
  }
}

TEST_CASE("SplitUserBlocks reads hand-edited files and ignores what it cannot recognise",
          "[render]") {
  const std::string text =
      "# a comment with { braces } and user: \"nobody\"\n"
      "accounts {\n"
      "  MESH {\n"
      "    users = [\n"
      "      {user = alice, password: \"$2b$x\"}\n"
      "      {\n"
      "        'user': \"bob\" // trailing comment }\n"
      "        permissions { publish = [\"a.b\", \"}\"] }\n"
      "      },\n"
      "      { password: \"user\" }\n"
      "      { nkey: UABC }\n"
      "    ]\n"
      "  }\n"
      "}\n";
  const auto blocks = SplitUserBlocks(text);
  REQUIRE(blocks.size() == 2);
  CHECK(blocks.at(UserName("alice")) == "      {user = alice, password: \"$2b$x\"}\n");
  CHECK(blocks.at(UserName("bob")) ==
        "      {\n"
        "        'user': \"bob\" // trailing comment }\n"
        "        permissions { publish = [\"a.b\", \"}\"] }\n"
        "      },\n");
  CHECK(SplitUserBlocks("").empty());
  CHECK(SplitUserBlocks("{{{ user: \"unterminated").empty());
  CHECK(SplitUserBlocks("}}]] user: x }").empty());
}

TEST_CASE("users scope account: the account entry alone, same users, byte-stable", "[render]") {
  BcryptHasher hasher("test-salt-key", kCheapCost);
  const DesiredState desired = DeriveExample();
  Result<HashedCredentials> hashes = hasher.HashAll(desired);
  REQUIRE(hashes.ok());
  Result<RenderedUsersFile> server = RenderUsersFile(desired, *hashes, UsersScope::kServer);
  Result<RenderedUsersFile> account = RenderUsersFile(desired, *hashes, UsersScope::kAccount);
  REQUIRE(server.ok());
  REQUIRE(account.ok());
  CHECK(server->bytes == RenderExample().bytes);  // the default is today's file
  // No accounts block: the entry starts at the left margin, to be included inside one.
  CHECK(account->bytes.find("\naccounts {\n") == std::string::npos);
  CHECK(account->bytes.find("\n\"" + desired.account +
                            "\": {\n  jetstream: enabled\n  users: [\n") != std::string::npos);
  CHECK(account->bytes.substr(account->bytes.size() - 4) == "]\n}\n");
  // The same principals, each block one level less indented; the splitter reads both.
  REQUIRE(account->entries.size() == server->entries.size());
  for (const auto& [user, block] : server->Blocks()) {
    const std::string entry = account->BlockAt(user);
    std::string unindented;
    std::istringstream lines(block);
    for (std::string line; std::getline(lines, line);) unindented += line.substr(2) + "\n";
    CHECK(entry == unindented);
  }
  CHECK(SplitUserBlocks(account->bytes) == account->Blocks());
  Result<RenderedUsersFile> again = RenderUsersFile(desired, *hashes, UsersScope::kAccount);
  REQUIRE(again.ok());
  CHECK(again->bytes == account->bytes);
  CHECK(std::string(ToString(UsersScope::kAccount)) == "account");
  CHECK(std::string(ToString(UsersScope::kServer)) == "server");
}

TEST_CASE("strings are escaped for the nats-server configuration syntax", "[render]") {
  Principal p = PlainPrincipal("odd\"user\\name", PrincipalKind::kController, "pw");
  p.publish_allow = {"a.\"b\""};
  p.subscribe_allow = {"tab\there"};
  const RenderedUsersFile r = RenderAlone(p);
  CHECK(r.bytes.find("user: \"odd\\\"user\\\\name\"\n") != std::string::npos);
  CHECK(r.bytes.find("\"a.\\\"b\\\"\"\n") != std::string::npos);
  CHECK(r.bytes.find("\"tab\\there\"\n") != std::string::npos);
  const auto blocks = SplitUserBlocks(r.bytes);
  CHECK(blocks.count(p.user) == 1);
  CHECK(blocks == r.Blocks());
}

// --- BcryptHasher ---

TEST_CASE("bcrypt: hashes verify, are per user, and follow the documented scheme", "[render]") {
  BcryptHasher hasher("salt-key", kCheapCost);
  const UserName alice("alice");
  Result<std::string> hash = hasher.Hash(alice, Plain("correct horse"));
  REQUIRE(hash.ok());
  CHECK(hash->rfind("$2b$04$", 0) == 0);
  CHECK(hash->size() == 60);
  CHECK(BcryptHasher::Verify("correct horse", *hash));
  CHECK_FALSE(BcryptHasher::Verify("correct horsE", *hash));
  CHECK_FALSE(BcryptHasher::Verify("correct horse", "not a hash"));
  CHECK_FALSE(BcryptHasher::Verify("correct horse", ""));

  // Same password, another user: another salt, another hash.
  Result<std::string> bob = hasher.Hash(UserName("bob"), Plain("correct horse"));
  REQUIRE(bob.ok());
  CHECK(*bob != *hash);
  // Cached: the same answer again.
  CHECK(*hasher.Hash(alice, Plain("correct horse")) == *hash);

  // The scheme, recomputed independently: K = bcrypt(salt_key, fixed salt, cost);
  // salt = HMAC-SHA256(K, user '\0' password)[0..16]; hash = bcrypt(password, salt, cost).
  auto work = std::make_unique<crypt_data>();
  char setting[CRYPT_GENSALT_OUTPUT_SIZE];
  REQUIRE(crypt_gensalt_rn("$2b$", kCheapCost, "mesh-reconciler!", 16, setting, sizeof setting) !=
          nullptr);
  const std::string key = crypt_rn("salt-key", setting, work.get(), sizeof *work);
  const std::string message = std::string("alice") + '\0' + "correct horse";
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int mac_len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(), mac, &mac_len);
  REQUIRE(crypt_gensalt_rn("$2b$", kCheapCost, reinterpret_cast<const char*>(mac), 16, setting,
                           sizeof setting) != nullptr);
  CHECK(std::string(crypt_rn("correct horse", setting, work.get(), sizeof *work)) == *hash);

  // Another key: another salt.
  BcryptHasher other("other-key", kCheapCost);
  CHECK(*other.Hash(alice, Plain("correct horse")) != *hash);
}

TEST_CASE("bcrypt: credentials without a password, bcrypt pass-through, bad input", "[render]") {
  BcryptHasher hasher("salt-key", kCheapCost);
  const std::string given = "$2a$11$abcdefghijklmnopqrstuu5Yh2vQq1x0ZbZ0wZbZ0wZbZ0wZbZ0wZb";
  CHECK(*hasher.Hash(UserName("n"), Credential{Credential::Kind::kBcrypt, given}) == given);
  CHECK(hasher.Hash(UserName("n"), Credential{}).status().code() == Errc::kInvalidArgument);
  CHECK(hasher.Hash(UserName("n"), Plain(std::string("a\0b", 3))).status().code() ==
        Errc::kInvalidArgument);
  BcryptHasher broken("salt-key", 99);  // no such cost
  CHECK_FALSE(broken.Hash(UserName("n"), Plain("pw")).ok());
}

TEST_CASE("bcrypt: HashAll on two threads equals hashing one by one", "[render][server]") {
  using mesh::testing::CredentialMix;
  using mesh::testing::MeshSize;
  const DesiredState d =
      Derive(mesh::testing::GenerateMesh(MeshSize::Small().WithCredentials(CredentialMix::kMixed)),
             test::Reconciler());
  BcryptHasher parallel("k", kCheapCost);
  Result<HashedCredentials> all = parallel.HashAll(d);
  REQUIRE(all.ok());
  BcryptHasher serial("k", kCheapCost);
  size_t with_credential = 0;
  for (const Principal& p : d.principals) {
    if (p.credential.kind == Credential::Kind::kNone) {
      CHECK(all->count(p.user) == 0);
      continue;
    }
    ++with_credential;
    CHECK(all->at(p.user) == *serial.Hash(p.user, p.credential));
    if (p.credential.kind == Credential::Kind::kPlain) {
      CHECK(BcryptHasher::Verify(p.credential.secret, all->at(p.user)));
    }
  }
  CHECK(all->size() == with_credential);
  CHECK(*parallel.HashAll(d) == *all);
}

// --- The real nats-server ---

struct CommandResult {
  int status = -1;
  std::string output;
};

CommandResult RunCommand(const std::string& command) {
  CommandResult result;
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen((command + " 2>&1").c_str(), "r"), pclose);
  REQUIRE(pipe != nullptr);
  char buffer[4096];
  size_t n = 0;
  while ((n = fread(buffer, 1, sizeof buffer, pipe.get())) > 0) result.output.append(buffer, n);
  result.status = pclose(pipe.release());
  return result;
}

// `nats-server -t` on a main configuration that includes `users` as users.conf.
CommandResult TestConfig(const std::string& users) {
  const std::string dir = mesh::testing::MakeTempDir("mesh-render");
  mesh::testing::WriteFile(dir + "/users.conf", users);
  mesh::testing::WriteFile(dir + "/main.conf",
                           "listen: 127.0.0.1:" + std::to_string(mesh::testing::FreePort()) +
                               "\njetstream {store_dir: \"" + dir + "/js\"}\n" +
                               "include \"users.conf\"\n");
  CommandResult result =
      RunCommand("'" + mesh::testing::ServerBinary() + "' -t -c " + dir + "/main.conf");
  std::filesystem::remove_all(dir);
  return result;
}

TEST_CASE("nats-server -t accepts the rendered example", "[render][nats][server]") {
  const RenderedUsersFile r = RenderExample(BcryptHasher::kDefaultCost);
  const CommandResult accepted = TestConfig(r.bytes);
  INFO(accepted.output);
  CHECK(accepted.status == 0);

  // The check has teeth: an unquoted hash is read as a variable reference and refused.
  std::string unquoted = r.bytes;
  const size_t at = unquoted.find("password: \"$2b$");
  REQUIRE(at != std::string::npos);
  unquoted.erase(at + 10, 1);
  unquoted.erase(unquoted.find('"', at + 10), 1);
  const CommandResult refused = TestConfig(unquoted);
  INFO(refused.output);
  CHECK(refused.status != 0);
}

// A connection to `url` as `user`, or null with the server's error.
using Connection = mesh::testing::NatsConnectionPtr;

std::atomic<int> permission_errors{0};

void OnAsyncError(natsConnection*, natsSubscription*, natsStatus status, void*) {
  if (status == NATS_NOT_PERMITTED) ++permission_errors;
}

Connection Connect(const std::string& url, const std::string& user, const std::string& password,
                   natsStatus& status) {
  mesh::testing::NatsClientOptions options;
  options.error_handler = OnAsyncError;
  return mesh::testing::ConnectNats(url, user, password, options, status);
}

TEST_CASE("a live nats-server loads the rendering, authenticates and enforces it",
          "[render][nats][server]") {
  const RenderedUsersFile r = RenderExample(BcryptHasher::kDefaultCost);
  mesh::testing::NatsServerOptions options;
  options.users_conf = r.bytes;
  auto server = mesh::testing::NatsServer::Start(options);

  natsStatus status = NATS_OK;
  Connection wrong = Connect(server->url(), "billing", "not-the-password", status);
  CHECK(status != NATS_OK);
  Connection left_out = Connect(server->url(), "node-c", "", status);
  CHECK(status != NATS_OK);

  Connection billing = Connect(server->url(), "billing", "demo-only-billing-password", status);
  REQUIRE(status == NATS_OK);
  // Allowed: its own seat's queue. A flush is a round trip: a refusal would arrive before it.
  natsSubscription* raw_sub = nullptr;
  REQUIRE(natsConnection_SubscribeSync(&raw_sub, billing.get(), "mesh.q.invoicer") == NATS_OK);
  std::unique_ptr<natsSubscription, void (*)(natsSubscription*)> own(raw_sub,
                                                                     natsSubscription_Destroy);
  REQUIRE(natsConnection_Flush(billing.get()) == NATS_OK);
  CHECK(permission_errors.load() == 0);
  // Denied: another module's seat.
  REQUIRE(natsConnection_SubscribeSync(&raw_sub, billing.get(), "mesh.q.intake") == NATS_OK);
  std::unique_ptr<natsSubscription, void (*)(natsSubscription*)> other(raw_sub,
                                                                       natsSubscription_Destroy);
  CHECK(mesh::testing::WaitFor([] { return permission_errors.load() > 0; }));

  Connection reconciler =
      Connect(server->url(), "mesh-reconciler", test::kReconcilerPassword, status);
  CHECK(status == NATS_OK);
}

}  // namespace
}  // namespace mesh::model
