#include "bench/support/bench_identity.h"

#include "model/records.h"
#include "model/users_file.h"

namespace mesh::testing {

Result<model::DesiredState> BenchDesired(const std::string& records_json) {
  model::ParseOptions options;
  options.reconciler_user = kBenchUser;
  model::ParseOutcome parsed = model::ParseRecords(records_json, options);
  if (!parsed.ok()) {
    return Status(Errc::kInvalidArgument, "records invalid: " + parsed.errors.front().ToString());
  }
  model::ReconcilerIdentity identity;
  identity.user = UserName(kBenchUser);
  identity.credential = {model::Credential::Kind::kPlain, kBenchPassword};
  return model::Derive(parsed.records, identity);
}

Result<std::string> BenchUsersConf(const model::DesiredState& desired) {
  model::BcryptHasher hasher(kBenchPassword, kBenchCost);
  auto rendered = model::RenderUsersFileReusing(desired, "", hasher);
  if (!rendered.ok()) return rendered.status();
  return rendered->bytes;
}

observers::BusSettings BenchBusSettings(const std::string& url) {
  observers::BusSettings settings;
  settings.urls = {url};
  settings.user = kBenchUser;
  settings.password = kBenchPassword;
  return settings;
}

}  // namespace mesh::testing
