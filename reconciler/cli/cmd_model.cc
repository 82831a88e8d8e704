// validate, desired, render-users: the commands that need only the records.
#include <rapidjson/prettywriter.h>
#include <rapidjson/stringbuffer.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "model/desired.h"
#include "model/desired_json.h"
#include "model/users_file.h"
#include "observers/users_file.h"
#include "reconciler/apply/apply.h"
#include "reconciler/cli/commands.h"
#include "reconciler/pass/pass.h"
#include "reconciler/pass/records_source.h"

namespace mesh::reconciler {
namespace {

constexpr const char* kNoRecords = "expected RECORDS (or --records FILE, MESH_RECONCILER_RECORDS)";

// The records path: the RECORDS operand (main.cc has put it in place of --records), else
// --records.
std::string RecordsPath(const Settings& settings) {
  return settings.positional.empty() ? settings.records_path : settings.positional.front();
}

// Loads and validates; prints every error. Returns nullopt-like false on failure.
bool LoadValid(const Settings& settings, model::Records& records, const char* command) {
  auto loaded = LoadRecords(RecordsPath(settings), settings.bus.user);
  if (!loaded.ok()) {
    std::fprintf(stderr, "mesh-reconciler %s: %s\n", command, loaded.status().message().c_str());
    return false;
  }
  if (!loaded->ok()) {
    for (const auto& error : loaded->errors) std::fprintf(stderr, "%s\n", error.ToString().c_str());
    std::fprintf(stderr, "%zu error(s) in %s\n", loaded->errors.size(),
                 RecordsPath(settings).c_str());
    return false;
  }
  records = std::move(loaded->records);
  return true;
}

// The daemon's identity (OwnIdentity: with --lease its user may also publish to the lease's
// subject, so that the file the init container renders is the one the daemon's first pass
// wants, and the daemon's first lease write is not refused), with a plain credential even when
// the password is empty: the reconciler's own user is always rendered, render-users refuses to
// run without its password, and validate/desired never print or hash credentials.
model::ReconcilerIdentity IdentityAlwaysRendered(const Settings& settings) {
  model::ReconcilerIdentity identity = OwnIdentity(settings);
  identity.credential = {model::Credential::Kind::kPlain, settings.bus.password};
  return identity;
}

}  // namespace

const char* const kValidateHelp = R"(Usage: mesh-reconciler validate RECORDS [flags]

Checks a records file against every rule of the mesh conventions and prints a one-line
summary (principals, seats, streams, consumers, users). On failure prints every error, each
with its JSON path, and exits 1. RECORDS defaults to --records (MESH_RECONCILER_RECORDS).
--json (or -o json): the summary or the errors as JSON on stdout
(docs/schemas/validation.v1.schema.json).

Exit codes: 0 valid, 1 invalid or unreadable, 64 usage error.
)";

const char* const kDesiredHelp = R"(Usage: mesh-reconciler desired RECORDS [flags]

Prints the desired JetStream streams, consumers and users (with their permissions) derived from
the records, as JSON (docs/schemas/desired.v1.schema.json; --json and -o json are accepted). No
password or hash is printed. RECORDS defaults to --records (MESH_RECONCILER_RECORDS).

Exit codes: 0 printed, 1 invalid or unreadable records, 64 usage error.
)";

const char* const kRenderUsersHelp = R"(Usage: mesh-reconciler render-users [RECORDS] [flags]

Renders the nats-server users file: the same records always give the same bytes; plain
passwords are written as bcrypt hashes, each with its keyed credential digest. With --out the
file is written atomically, mode 0600; otherwise it goes to standard output. A file already at
--out is read first: every hash whose digest proves it belongs to the current password is
reused, so only new and changed passwords are hashed (stderr says how many); a proven hash of
another cost than --bcrypt-cost is kept unless --rehash is given. The reconciler's
own user (--user, default mesh-reconciler) is included; its password comes from
MESH_RECONCILER_PASSWORD or --password-file. RECORDS defaults to --records
(MESH_RECONCILER_RECORDS). --users-scope and --lease (MESH_RECONCILER_USERS_SCOPE,
MESH_RECONCILER_LEASE) must be the daemon's: with the lease the reconciler's user may also
publish to the lease's subject; with the account scope the file is only the mesh's account
entry, to include inside your own accounts block.

Exit codes: 0 rendered, 1 error (invalid records, no password, a file not written), 64 usage
error.
)";

namespace {

using JsonWriter = rapidjson::PrettyWriter<rapidjson::StringBuffer>;

void WriteString(JsonWriter& w, const std::string& text) {
  w.String(text.c_str(), static_cast<rapidjson::SizeType>(text.size()));
}

// validate --json: docs/schemas/validation.v1.schema.json. `errors` empty: valid.
void PrintValidation(const std::string& file, const std::vector<model::ValidationError>& errors,
                     const model::Records* records, const model::DesiredState* desired,
                     size_t principals, size_t seats, size_t users) {
  rapidjson::StringBuffer buffer;
  JsonWriter w(buffer);
  w.SetIndent(' ', 2);
  w.StartObject();
  w.Key("schema");
  w.String(kValidationSchema);
  w.Key("file");
  WriteString(w, file);
  w.Key("valid");
  w.Bool(errors.empty());
  w.Key("errors");
  w.StartArray();
  for (const model::ValidationError& error : errors) {
    w.StartObject();
    w.Key("path");
    WriteString(w, error.path);
    w.Key("message");
    WriteString(w, error.message);
    w.EndObject();
  }
  w.EndArray();
  if (records != nullptr && desired != nullptr) {
    w.Key("mesh");
    WriteString(w, records->mesh);
    w.Key("principals");
    w.Uint64(principals);
    w.Key("seats");
    w.Uint64(seats);
    w.Key("streams");
    w.Uint64(desired->streams.size());
    w.Key("consumers");
    w.Uint64(desired->consumers.size());
    w.Key("users");
    w.Uint64(users);
    w.Key("without_credential");
    w.StartArray();
    for (const auto& user : desired->without_credential) WriteString(w, user.str());
    w.EndArray();
  }
  w.EndObject();
  std::printf("%s\n", buffer.GetString());
}

}  // namespace

int RunValidate(Settings& settings) {
  if (settings.records_path.empty()) return CommandUsage("validate", kNoRecords);
  model::Records records;
  const bool json = settings.format == OutputFormat::kJson;
  if (json) {
    // Errors in the records are the output (stdout), not a failure to produce it: exit 1 still
    // says "invalid". A file that cannot be read is a failure of the command (stderr).
    auto loaded = LoadRecords(RecordsPath(settings), settings.bus.user);
    if (!loaded.ok()) {
      std::fprintf(stderr, "mesh-reconciler validate: %s\n", loaded.status().message().c_str());
      return kExitError;
    }
    if (!loaded->ok()) {
      PrintValidation(RecordsPath(settings), loaded->errors, nullptr, nullptr, 0, 0, 0);
      return kExitError;
    }
    records = std::move(loaded->records);
  } else if (!LoadValid(settings, records, "validate")) {
    return kExitError;
  }
  model::DesiredState desired = model::Derive(records, IdentityAlwaysRendered(settings));
  size_t seats = records.roles.size();
  for (const auto& module : records.modules) seats += module.seats.size();
  // Principals of the records, plus the reconciler's own user, which is always rendered.
  size_t principals = 1 + records.nodes.size() + records.modules.size();
  size_t users = desired.principals.size() - desired.without_credential.size();
  if (json) {
    PrintValidation(RecordsPath(settings), {}, &records, &desired, principals, seats, users);
    return kExitOk;
  }
  std::printf("ok: mesh %s: %zu principals, %zu seats, %zu streams, %zu consumers, %zu users",
              records.mesh.c_str(), principals, seats, desired.streams.size(),
              desired.consumers.size(), users);
  if (!desired.without_credential.empty()) {
    std::printf(" (%zu without credential, left out:", desired.without_credential.size());
    for (const auto& user : desired.without_credential) std::printf(" %s", user.str().c_str());
    std::printf(")");
  }
  std::printf("\n");
  return kExitOk;
}

int RunDesired(Settings& settings) {
  if (settings.records_path.empty()) return CommandUsage("desired", kNoRecords);
  model::Records records;
  if (!LoadValid(settings, records, "desired")) return kExitError;
  std::string json = model::DesiredToJson(model::Derive(records, IdentityAlwaysRendered(settings)));
  std::fwrite(json.data(), 1, json.size(), stdout);
  if (json.empty() || json.back() != '\n') std::fputc('\n', stdout);
  return kExitOk;
}

int RunRenderUsers(Settings& settings) {
  if (settings.records_path.empty()) return CommandUsage("render-users", kNoRecords);
  if (Status secrets = LoadSecrets(settings, ProcessEnv); !secrets.ok()) {
    std::fprintf(stderr, "mesh-reconciler render-users: %s\n", secrets.message().c_str());
    return kExitError;
  }
  if (settings.bus.password.empty()) {
    std::fprintf(stderr,
                 "mesh-reconciler render-users: the reconciler's password is needed "
                 "(MESH_RECONCILER_PASSWORD or --password-file)\n");
    return kExitError;
  }
  model::Records records;
  if (!LoadValid(settings, records, "render-users")) return kExitError;
  model::DesiredState desired = model::Derive(records, IdentityAlwaysRendered(settings));
  model::BcryptHasher hasher(settings.bus.password, settings.bcrypt_cost);
  // The file the init container finds at --out (from an earlier pod): its proven hashes are
  // reused. An absent or unreadable file is simply rendered from scratch.
  std::string existing;
  if (!settings.out.empty()) existing = observers::ObserveUsersFile(settings.out).bytes;
  // A proven hash of another cost is kept unless --rehash (the daemon does the same).
  auto rendered = model::RenderUsersFileReusing(desired, existing, hasher, settings.users_scope, {},
                                                settings.other_costs);
  if (!rendered.ok()) {
    std::fprintf(stderr, "mesh-reconciler render-users: %s\n", rendered.status().message().c_str());
    return kExitError;
  }
  for (const auto& user : rendered->without_credential) {
    std::fprintf(stderr, "note: %s has no credential and is left out of the users file\n",
                 user.str().c_str());
  }
  std::fprintf(stderr, "note: %llu password(s) hashed with bcrypt, the others reused\n",
               static_cast<unsigned long long>(hasher.bcrypt_calls()));
  if (settings.out.empty()) {
    std::fwrite(rendered->bytes.data(), 1, rendered->bytes.size(), stdout);
    return kExitOk;
  }
  if (Status written = WriteFileAtomically(settings.out, rendered->bytes); !written.ok()) {
    std::fprintf(stderr, "mesh-reconciler render-users: %s\n", written.message().c_str());
    return kExitError;
  }
  return kExitOk;
}

}  // namespace mesh::reconciler
