#include "reconciler/base/duration.h"

#include <cctype>
#include <cstdint>

namespace mesh::reconciler {

Result<std::chrono::milliseconds> ParseDuration(const std::string& text) {
  if (text.empty()) return Status(Errc::kInvalidArgument, "empty duration");
  std::chrono::milliseconds total{0};
  size_t i = 0;
  while (i < text.size()) {
    size_t start = i;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
    if (start == i || i - start > 9) {
      return Status(Errc::kInvalidArgument, "expected a duration such as 30s, 5m, 1h, 250ms");
    }
    int64_t number = std::stoll(text.substr(start, i - start));
    std::string unit;
    while (i < text.size() && std::isalpha(static_cast<unsigned char>(text[i]))) unit += text[i++];
    int64_t ms_per_unit = 0;
    if (unit == "ms")
      ms_per_unit = 1;
    else if (unit == "s")
      ms_per_unit = 1000;
    else if (unit == "m")
      ms_per_unit = 60 * 1000;
    else if (unit == "h")
      ms_per_unit = 3600 * 1000;
    else
      return Status(Errc::kInvalidArgument, "unknown unit in \"" + text + "\" (ms, s, m, h)");
    total += std::chrono::milliseconds(number * ms_per_unit);
  }
  return total;
}

}  // namespace mesh::reconciler
