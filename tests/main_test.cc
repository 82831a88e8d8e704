// The one Catch2 v2 main shared by every test binary.
#define CATCH_CONFIG_MAIN
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
