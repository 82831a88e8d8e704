// The standard process metrics of Prometheus client libraries (prometheus-cpp offers none):
//
//   process_cpu_seconds_total        counter: user + system CPU time
//   process_resident_memory_bytes    gauge
//   process_virtual_memory_bytes     gauge
//   process_start_time_seconds       gauge: Unix time the process started
//   process_open_fds                 gauge
//   process_max_fds                  gauge: the soft RLIMIT_NOFILE
//
// Read from /proc at each scrape, as the Go and Python clients do. Parsing is pure and tested on
// its own; CollectProcessMetrics() is the effectful shell around it (Linux only).
#pragma once

#include <prometheus/metric_family.h>

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace mesh::reconciler {

// The fields of /proc/<pid>/stat that the metrics need, in the units the kernel reports.
struct ProcStat {
  uint64_t utime_ticks = 0;
  uint64_t stime_ticks = 0;
  uint64_t start_ticks_after_boot = 0;
  uint64_t vsize_bytes = 0;
  uint64_t rss_pages = 0;
};

// Parses the single line of /proc/<pid>/stat. The command name (field 2) is in parentheses and
// may hold spaces and parentheses itself, so the fields are counted after its last ')'.
std::optional<ProcStat> ParseProcStat(std::string_view text);

// The "btime" line of /proc/stat: the boot time as Unix seconds.
std::optional<uint64_t> ParseBootTime(std::string_view proc_stat);

// The kernel's figures for this process, or no family at all for what cannot be read.
std::vector<prometheus::MetricFamily> CollectProcessMetrics();

}  // namespace mesh::reconciler
