// mesh-nats-request: send one raw request on the bus and print the answer. A tool for the
// README's demo ("delete a stream and watch it come back") and for shell tests; there is no
// NATS CLI in Debian 12.
//
//   mesh-nats-request --bus nats://127.0.0.1:4222 --user U --password-file F SUBJECT [PAYLOAD]
//   mesh-nats-request --bus ... --count-for SECONDS SUBJECT
//       subscribes to SUBJECT (wildcards allowed), prints "subscribed" once the server has the
//       interest, then one line per message received (its subject) until SECONDS have passed,
//       and last "count N". For shell tests that count advisories.
//
// The password comes from a file (or MESH_RECONCILER_PASSWORD), never from the command line.
#include <nats/nats.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

namespace {

using OptionsPtr = std::unique_ptr<natsOptions, decltype(&natsOptions_Destroy)>;
using ConnectionPtr = std::unique_ptr<natsConnection, decltype(&natsConnection_Destroy)>;
using MsgPtr = std::unique_ptr<natsMsg, decltype(&natsMsg_Destroy)>;

int Fail(const std::string& what, natsStatus status) {
  const char* detail = nats_GetLastError(nullptr);  // capture at once
  std::fprintf(stderr, "mesh-nats-request: %s: %s%s%s\n", what.c_str(), natsStatus_GetText(status),
               detail ? ": " : "", detail ? detail : "");
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string bus, user = "mesh-reconciler", password_file, subject, payload;
  int count_for_seconds = -1;  // >= 0: count messages on SUBJECT instead of a request
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (arg == "--bus")
      bus = next();
    else if (arg == "--user")
      user = next();
    else if (arg == "--password-file")
      password_file = next();
    else if (arg == "--count-for")
      count_for_seconds = std::atoi(next().c_str());
    else if (subject.empty())
      subject = arg;
    else
      payload = arg;
  }
  if (bus.empty() || subject.empty()) {
    std::fprintf(stderr,
                 "usage: mesh-nats-request --bus URL [--user U] [--password-file F] SUBJECT "
                 "[PAYLOAD]\n       mesh-nats-request --bus URL ... --count-for SECONDS SUBJECT\n");
    return 64;
  }
  std::string password;
  if (const char* env = std::getenv("MESH_RECONCILER_PASSWORD")) password = env;
  if (!password_file.empty()) {
    std::ifstream in(password_file);
    std::stringstream buffer;
    buffer << in.rdbuf();
    password = buffer.str();
    while (!password.empty() && (password.back() == '\n' || password.back() == '\r')) {
      password.pop_back();
    }
  }
  natsOptions* raw_options = nullptr;
  if (natsStatus s = natsOptions_Create(&raw_options); s != NATS_OK) return Fail("options", s);
  OptionsPtr options(raw_options, natsOptions_Destroy);
  natsOptions_SetURL(options.get(), bus.c_str());
  natsOptions_SetUserInfo(options.get(), user.c_str(), password.c_str());
  std::string inbox = "_INBOX." + user;
  natsOptions_SetCustomInboxPrefix(options.get(), inbox.c_str());
  natsConnection* raw_connection = nullptr;
  if (natsStatus s = natsConnection_Connect(&raw_connection, options.get()); s != NATS_OK) {
    return Fail("cannot connect to " + bus, s);
  }
  ConnectionPtr connection(raw_connection, natsConnection_Destroy);
  if (count_for_seconds >= 0) {
    natsSubscription* raw_sub = nullptr;
    if (natsStatus s = natsConnection_SubscribeSync(&raw_sub, connection.get(), subject.c_str());
        s != NATS_OK) {
      return Fail("subscribe " + subject, s);
    }
    std::unique_ptr<natsSubscription, decltype(&natsSubscription_Destroy)> sub(
        raw_sub, natsSubscription_Destroy);
    if (natsStatus s = natsConnection_Flush(connection.get()); s != NATS_OK) {
      return Fail("flush", s);
    }
    std::printf("subscribed\n");
    std::fflush(stdout);
    const int64_t deadline = nats_Now() + int64_t{count_for_seconds} * 1000;
    int count = 0;
    for (int64_t left = deadline - nats_Now(); left > 0; left = deadline - nats_Now()) {
      natsMsg* raw_msg = nullptr;
      if (natsSubscription_NextMsg(&raw_msg, sub.get(), left) != NATS_OK) continue;
      MsgPtr msg(raw_msg, natsMsg_Destroy);
      std::printf("%s\n", natsMsg_GetSubject(msg.get()));
      ++count;
    }
    std::printf("count %d\n", count);
    return 0;
  }
  natsMsg* raw_reply = nullptr;
  natsStatus s = natsConnection_Request(&raw_reply, connection.get(), subject.c_str(),
                                        payload.data(), static_cast<int>(payload.size()), 5000);
  if (s != NATS_OK) return Fail("request " + subject, s);
  MsgPtr reply(raw_reply, natsMsg_Destroy);
  std::fwrite(natsMsg_GetData(reply.get()), 1, natsMsg_GetDataLength(reply.get()), stdout);
  std::fputc('\n', stdout);
  return 0;
}
