// The one Catch2 v2 main shared by every test binary.
#define CATCH_CONFIG_MAIN
// No fatal-signal handler of Catch2's: it formats and reports the failure from inside the
// handler (allocation, stdio), which is not async-signal-safe. ThreadSanitizer reported it
// ("signal-unsafe call inside of a signal") when a test ended in std::terminate. Without it a
// crash is reported by the sanitizers' own handlers, or by CTest from the exit status; each
// test case runs in a process of its own, so CTest still names the case.
#define CATCH_CONFIG_NO_POSIX_SIGNALS
#include <algorithm>
#include <catch2/catch.hpp>

#include "tests/support/nats_server.h"

namespace {

// Tells the test support which test case runs and whether it is tagged [server], so that
// starting a nats-server from an untagged test case fails (tests/support/nats_server.h).
class ServerTagListener : public Catch::TestEventListenerBase {
 public:
  using TestEventListenerBase::TestEventListenerBase;

  void testCaseStarting(const Catch::TestCaseInfo& info) override {
    const auto& tags = info.lcaseTags;
    const bool server = std::find(tags.begin(), tags.end(), "server") != tags.end();
    mesh::testing::SetCurrentTestCase(info.name, server
                                                     ? mesh::testing::CurrentTestTag::kServer
                                                     : mesh::testing::CurrentTestTag::kNotServer);
  }
  void testCaseEnded(const Catch::TestCaseStats& stats) override {
    TestEventListenerBase::testCaseEnded(stats);
    mesh::testing::SetCurrentTestCase("", mesh::testing::CurrentTestTag::kNoTestCase);
  }
};

}  // namespace

CATCH_REGISTER_LISTENER(ServerTagListener)
