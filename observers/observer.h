// What a pass reads of the world, behind one interface (leveldb's Env and its in-memory twin):
// the users file, the server's monitoring endpoint, the whole account, and named streams. The
// live implementation reads the file, the endpoint and the JetStream API; tests/support has an
// in-memory one (MemoryObserver) for the logic above the observers, which is then tested
// without a server. What depends on how a server answers stays tested against real servers.
//
// Thread-safety: a pass calls UsersFile and Server on a second thread while it lists the account
// on its own (Reconciler::Impl::Observe); an implementation allows that.
#pragma once

#include <chrono>
#include <memory>
#include <set>
#include <string>

#include "model/names.h"
#include "model/result.h"
#include "observers/bus.h"
#include "observers/jetstream.h"
#include "observers/observed.h"

namespace mesh::observers {

class Observer {
 public:
  virtual ~Observer() = default;
  // The users file at `path` as it is now (absent and unreadable are data).
  virtual ObservedUsersFile UsersFile(const std::string& path) = 0;
  // The monitoring endpoint at `monitor_url` (an empty URL: not configured); unreachable is data.
  virtual ObservedServer Server(const std::string& monitor_url,
                                std::chrono::milliseconds timeout) = 0;
  // Every stream of the account and the consumers in `scope`, over `bus`: the pass's connection,
  // which the live observer needs (kUnavailable when it is null or not connected) and the
  // in-memory one ignores.
  virtual Result<ObservedJetStream> Account(BusConnection* bus, const ObserveScope& scope) = 0;
  // The named streams alone and their consumers in `scope`; a name not there is absent.
  virtual Result<ObservedJetStream> Streams(BusConnection* bus, const std::set<StreamName>& named,
                                            const ObserveScope& scope) = 0;
};

// The live observer: ObserveUsersFile, ObserveServer, ObserveJetStream and ObserveStreams. It
// holds no state; one instance serves every pass.
std::shared_ptr<Observer> LiveObserver();

}  // namespace mesh::observers
