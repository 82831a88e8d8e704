#include "tests/support/nats_client.h"

#include <stdexcept>

namespace mesh::testing {
namespace {

struct OptionsDeleter {
  void operator()(natsOptions* p) const { natsOptions_Destroy(p); }
};

}  // namespace

NatsConnectionPtr ConnectNats(const std::vector<std::string>& urls, const std::string& user,
                              const std::string& password, std::chrono::milliseconds timeout) {
  natsOptions* raw_options = nullptr;
  natsStatus s = natsOptions_Create(&raw_options);
  std::unique_ptr<natsOptions, OptionsDeleter> options(raw_options);
  std::vector<const char*> servers;
  for (const std::string& url : urls) servers.push_back(url.c_str());
  const std::string inbox_prefix = "_INBOX." + user;
  if (s == NATS_OK) {
    s = natsOptions_SetServers(options.get(), servers.data(), static_cast<int>(servers.size()));
  }
  if (s == NATS_OK) s = natsOptions_SetUserInfo(options.get(), user.c_str(), password.c_str());
  if (s == NATS_OK) s = natsOptions_SetCustomInboxPrefix(options.get(), inbox_prefix.c_str());
  if (s == NATS_OK) s = natsOptions_SetTimeout(options.get(), timeout.count());
  if (s == NATS_OK) s = natsOptions_SetMaxReconnect(options.get(), -1);
  if (s == NATS_OK) s = natsOptions_SetReconnectWait(options.get(), 100);
  natsConnection* raw_connection = nullptr;
  if (s == NATS_OK) s = natsConnection_Connect(&raw_connection, options.get());
  NatsConnectionPtr connection(raw_connection);
  if (s != NATS_OK) {
    const char* last = nats_GetLastError(nullptr);
    throw std::runtime_error("connect as " + user + ": " +
                             (last != nullptr && *last != '\0' ? last : natsStatus_GetText(s)));
  }
  return connection;
}

NatsConnectionPtr ConnectNats(const std::string& url, const std::string& user,
                              const std::string& password, const NatsClientOptions& options,
                              natsStatus& status) {
  natsOptions* raw_options = nullptr;
  status = natsOptions_Create(&raw_options);
  std::unique_ptr<natsOptions, OptionsDeleter> nats_options(raw_options);
  const std::string inbox_prefix = "_INBOX." + user;
  natsOptions* o = nats_options.get();
  if (status == NATS_OK) status = natsOptions_SetURL(o, url.c_str());
  if (status == NATS_OK) status = natsOptions_SetUserInfo(o, user.c_str(), password.c_str());
  if (status == NATS_OK) status = natsOptions_SetMaxReconnect(o, 0);
  if (status == NATS_OK && options.own_inbox_prefix) {
    status = natsOptions_SetCustomInboxPrefix(o, inbox_prefix.c_str());
  }
  if (status == NATS_OK && options.error_handler != nullptr) {
    status = natsOptions_SetErrorHandler(o, options.error_handler, options.error_closure);
  }
  natsConnection* raw_connection = nullptr;
  if (status == NATS_OK) status = natsConnection_Connect(&raw_connection, o);
  return NatsConnectionPtr(raw_connection);
}

}  // namespace mesh::testing
