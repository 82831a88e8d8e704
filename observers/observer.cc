#include "observers/observer.h"

#include "observers/monitor.h"
#include "observers/users_file.h"

namespace mesh::observers {
namespace {

Status Connected(const BusConnection* bus) {
  if (bus == nullptr || !bus->connected()) return Status(Errc::kUnavailable, "not connected");
  return Status::Ok();
}

class Live final : public Observer {
 public:
  ObservedUsersFile UsersFile(const std::string& path) override { return ObserveUsersFile(path); }
  ObservedServer Server(const std::string& monitor_url,
                        std::chrono::milliseconds timeout) override {
    return ObserveServer(monitor_url, timeout);
  }
  Result<ObservedJetStream> Account(BusConnection* bus, const ObserveScope& scope) override {
    if (Status connected = Connected(bus); !connected.ok()) return connected;
    return ObserveJetStream(*bus, scope);
  }
  Result<ObservedJetStream> Streams(BusConnection* bus, const std::set<StreamName>& named,
                                    const ObserveScope& scope) override {
    if (Status connected = Connected(bus); !connected.ok()) return connected;
    return ObserveStreams(*bus, named, scope);
  }
};

}  // namespace

std::shared_ptr<Observer> LiveObserver() {
  static const std::shared_ptr<Observer> live = std::make_shared<Live>();
  return live;
}

}  // namespace mesh::observers
