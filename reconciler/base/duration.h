// Durations as people type them on the command line and in a query: "30s", "5m", "1h",
// "250ms", "2h30m". The one parser for --interval, --for, --advisory-floor and POST /hold?for=.
//
// Thread-safety: pure.
#pragma once

#include <chrono>
#include <string>

#include "model/result.h"

namespace mesh::reconciler {

// "30s", "5m", "1h", "250ms", "2h30m" -> duration; error otherwise.
Result<std::chrono::milliseconds> ParseDuration(const std::string& text);

}  // namespace mesh::reconciler
