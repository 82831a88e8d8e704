#include "bench/support/figures.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>

namespace mesh::testing {

double BestOf(const std::vector<double>& values) {
  return *std::min_element(values.begin(), values.end());
}

double MedianOf(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

double ProcStatusKiB(pid_t pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) == 0) {
      return std::strtod(line.c_str() + field.size() + 1, nullptr);
    }
  }
  return -1;
}

}  // namespace mesh::testing
