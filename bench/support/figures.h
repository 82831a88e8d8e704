// Turning measurements into the figures the benchmarks print: durations in seconds, the best
// and the median of repeated runs, and a process's memory as /proc reports it.
//
// Thread-safety: free functions over values.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace mesh::testing {

inline double Seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

// The least of `values` (on a shared machine the best time is the least disturbed one) and
// their median; `values` must not be empty.
double BestOf(const std::vector<double>& values);
double MedianOf(std::vector<double> values);

// kB from a "/proc/<pid>/status" line such as "VmRSS:     12345 kB"; -1 when there is none.
double ProcStatusKiB(pid_t pid, const std::string& field);

}  // namespace mesh::testing
