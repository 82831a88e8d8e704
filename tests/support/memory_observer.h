// The in-memory twin of the live observer (observers/observer.h), for the pass's own logic:
// the server and the account are what the test sets, the connection is opened by no one. The
// users file is still read from disk: it is the test's own file in its own folder, written by
// apply like in production, and no server is needed to read it.
//
// Nothing here answers like a server would (no JetStream API, no refusals of its own): what
// depends on a server's answers is tested against real servers.
//
// MemoryMesh: the example records (or the test's) in a folder of their own, and a Reconciler
// over a MemoryObserver.
//
// Header-only (the test glob compiles only *_test.cc). Thread-safety: a pass calls UsersFile
// and Server on a second thread, and the opener on another; all state is under one mutex.
#pragma once

#include <algorithm>
#include <chrono>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>

#include "bench/support/observed_gen.h"
#include "model/desired.h"
#include "observers/observer.h"
#include "observers/users_file.h"
#include "reconciler/pass/pass.h"
#include "reconciler/pass/pass_io.h"
#include "tests/support/pass_fixtures.h"
#include "tests/support/temp_dir.h"

namespace mesh::reconciler::test {

class MemoryObserver final : public observers::Observer {
 public:
  // A healthy standalone server with JetStream and an empty account.
  MemoryObserver() {
    server_.monitor_configured = true;
    server_.reachable = true;
    server_.ready = true;
    server_.version = "2.10.27";
    server_.jetstream_cluster_size = 1;
    server_.config_load_time_unix_ns = mesh::testing::kConvergedConfigLoadTimeNs;
  }

  // The server's monitoring endpoint as the next observations see it.
  void SetServer(observers::ObservedServer server) {
    std::lock_guard<std::mutex> lock(mutex_);
    server_ = std::move(server);
  }
  // The account as the next observations list it (streams and consumers sorted by name).
  void SetAccount(observers::ObservedJetStream account) {
    std::lock_guard<std::mutex> lock(mutex_);
    account_ = std::move(account);
  }
  // Every desired stream and consumer, as the observers normalise what the reconciler created.
  void SetAccountAsDesired(const model::DesiredState& desired) {
    SetAccount(mesh::testing::ConvergedObservation(desired, "").jetstream);
  }
  // The error the next listings end with instead (e.g. a lost connection); Ok to list again.
  // With `from_listing` n > 0, the listings before the n-th (counting from 1) still succeed.
  void SetAccountError(Status error, int from_listing = 0) {
    std::lock_guard<std::mutex> lock(mutex_);
    account_error_ = std::move(error);
    error_from_listing_ = account_listings_ + stream_listings_ + std::max(from_listing, 1);
  }
  // What the next connection attempts end with.
  void SetConnectResult(Status status) {
    std::lock_guard<std::mutex> lock(mutex_);
    connect_result_ = std::move(status);
  }
  observers::ObservedJetStream account() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return account_;
  }
  int account_listings() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return account_listings_;
  }
  int stream_listings() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return stream_listings_;
  }
  int connect_attempts() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return connect_attempts_;
  }

  observers::ObservedUsersFile UsersFile(const std::string& path) override {
    return observers::ObserveUsersFile(path);
  }
  observers::ObservedServer Server(const std::string& /*monitor_url*/,
                                   std::chrono::milliseconds /*timeout*/) override {
    std::lock_guard<std::mutex> lock(mutex_);
    return server_;
  }
  Result<observers::ObservedJetStream> Account(observers::BusConnection* /*bus*/,
                                               const observers::ObserveScope& scope) override {
    std::lock_guard<std::mutex> lock(mutex_);
    ++account_listings_;
    if (Failing()) return account_error_;
    return InScope(account_, scope, nullptr);
  }
  Result<observers::ObservedJetStream> Streams(observers::BusConnection* /*bus*/,
                                               const std::set<StreamName>& named,
                                               const observers::ObserveScope& scope) override {
    std::lock_guard<std::mutex> lock(mutex_);
    ++stream_listings_;
    if (Failing()) return account_error_;
    return InScope(account_, scope, &named);
  }

  // The opener of a pass that uses this observer: it counts the attempt and opens nothing.
  OpenedConnection Open() {
    std::lock_guard<std::mutex> lock(mutex_);
    ++connect_attempts_;
    OpenedConnection opened;
    opened.status = connect_result_;
    return opened;
  }

 private:
  // What a listing returns: the consumers (and undescribed consumers) only on the streams in
  // scope (the live observer does not list the others), and with `named` only those streams.
  static observers::ObservedJetStream InScope(const observers::ObservedJetStream& account,
                                              const observers::ObserveScope& scope,
                                              const std::set<StreamName>* named) {
    observers::ObservedJetStream out;
    out.cluster_size = account.cluster_size;
    std::set<StreamName> covered;
    for (const observers::ObservedStream& s : account.streams) {
      if (named != nullptr && !named->count(s.config.name)) continue;
      out.streams.push_back(s);
      if (scope.Covers(s)) covered.insert(s.config.name);
    }
    for (const observers::ObservedConsumer& c : account.consumers) {
      if (covered.count(c.config.stream)) out.consumers.push_back(c);
    }
    for (const observers::UndescribedObject& u : account.undescribed) {
      if (named != nullptr && !named->count(u.stream)) continue;
      if (u.consumer.empty() || covered.count(u.stream)) out.undescribed.push_back(u);
    }
    return out;
  }

  // The listing just counted fails (the mutex held).
  bool Failing() const {
    return !account_error_.ok() && account_listings_ + stream_listings_ >= error_from_listing_;
  }

  mutable std::mutex mutex_;
  observers::ObservedServer server_;
  observers::ObservedJetStream account_;
  Status account_error_ = Status::Ok();
  Status connect_result_ = Status::Ok();
  int account_listings_ = 0;
  int stream_listings_ = 0;
  int connect_attempts_ = 0;
  int error_from_listing_ = 1;
};

// A pass's PassIo over `observer`.
inline PassIo MemoryIo(const std::shared_ptr<MemoryObserver>& observer) {
  PassIo io;
  io.observer = observer;
  io.open = [observer](uint64_t /*pass_id*/, ConnectInputs /*inputs*/) { return observer->Open(); };
  return io;
}

// The example records in a folder of their own, a users file beside them (when managed), and an
// in-memory bus.
struct MemoryMesh {
  enum class UsersFile { kManaged, kNotManaged };

  explicit MemoryMesh(UsersFile users = UsersFile::kNotManaged,
                      const std::string& records_json = test::ExampleRecordsJson())
      : observer(std::make_shared<MemoryObserver>()) {
    settings.records_path = dir.path + "/records.json";
    mesh::testing::WriteFile(settings.records_path, records_json);
    settings.bus.user = test::kReconcilerUser;
    settings.bus.password = test::kReconcilerPassword;
    if (users == UsersFile::kManaged) settings.users_file = dir.path + "/users.conf";
    settings.bcrypt_cost = test::kCheapCost;
    desired = test::DesiredFrom(records_json);
  }

  Reconciler Make() const {
    return Reconciler(settings, nullptr, std::nullopt, MemoryIo(observer));
  }

  mesh::testing::TempDir dir{"mesh-pass-logic"};
  PassSettings settings;
  model::DesiredState desired;
  std::shared_ptr<MemoryObserver> observer;
};

}  // namespace mesh::reconciler::test
