// URL helpers shared by the observers: an address in a message or a log never carries a
// credential.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>

namespace mesh::observers {

// "nats://user:pass@host:4222" -> "nats://host:4222"; a URL without userinfo is unchanged.
std::string StripUserInfo(std::string_view url);

}  // namespace mesh::observers
