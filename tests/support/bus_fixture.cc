#include "tests/support/bus_fixture.h"

namespace mesh::testing {

std::string ReconcilerUsersConf(const std::vector<std::string>& extra_publish) {
  std::string publish = "\"$JS.API.>\"";
  for (const std::string& subject : extra_publish) publish += ", \"" + subject + "\"";
  return std::string(R"(accounts {
  MESH {
    jetstream: enabled
    users: [
      { user: "admin", password: "admin" }
      { user: ")") +
         kReconcilerUser + R"(", password: ")" + kReconcilerPassword + R"("
        permissions: {
          publish: { allow: [)" +
         publish + R"(] }
          subscribe: { allow: ["$JS.EVENT.ADVISORY.>", "_INBOX.)" +
         kReconcilerUser + R"(.>"] }
        }
      }
    ]
  }
}
)";
}

observers::BusSettings BusSettingsFor(const NatsServer& server, const std::string& user,
                                      const std::string& password) {
  observers::BusSettings settings;
  settings.urls = {server.url()};
  settings.user = user;
  settings.password = password;
  settings.request_timeout = std::chrono::seconds(5);
  settings.connect_timeout = std::chrono::seconds(2);
  return settings;
}

}  // namespace mesh::testing
