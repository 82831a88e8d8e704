#include "reconciler/daemon/process_metrics.h"

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <charconv>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>

namespace mesh::reconciler {
namespace {

std::optional<uint64_t> ToNumber(std::string_view text) {
  uint64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

std::optional<std::string> ReadSmallFile(const char* path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::optional<uint64_t> CountOpenFds() {
  std::unique_ptr<DIR, int (*)(DIR*)> dir(opendir("/proc/self/fd"), closedir);
  if (!dir) return std::nullopt;
  uint64_t count = 0;
  while (const dirent* entry = readdir(dir.get())) {
    if (entry->d_name[0] != '.') ++count;
  }
  return count > 0 ? count - 1 : 0;  // the descriptor opendir itself holds
}

prometheus::MetricFamily Family(const char* name, const char* help, prometheus::MetricType type,
                                double value) {
  prometheus::MetricFamily family;
  family.name = name;
  family.help = help;
  family.type = type;
  prometheus::ClientMetric metric;
  if (type == prometheus::MetricType::Counter) {
    metric.counter.value = value;
  } else {
    metric.gauge.value = value;
  }
  family.metric.push_back(metric);
  return family;
}

}  // namespace

std::optional<ProcStat> ParseProcStat(std::string_view text) {
  const size_t close = text.rfind(')');
  if (close == std::string_view::npos) return std::nullopt;
  // Fields from 3 on (state, ppid, ...), separated by single spaces.
  std::vector<std::string_view> fields;
  size_t pos = close + 1;
  while (pos < text.size()) {
    while (pos < text.size() && (text[pos] == ' ' || text[pos] == '\n')) ++pos;
    size_t end = pos;
    while (end < text.size() && text[end] != ' ' && text[end] != '\n') ++end;
    if (end > pos) fields.push_back(text.substr(pos, end - pos));
    pos = end;
  }
  // proc(5) numbers fields from 1; fields[0] here is field 3 (state).
  auto field = [&](size_t number) -> std::optional<uint64_t> {
    if (number < 3 || number - 3 >= fields.size()) return std::nullopt;
    return ToNumber(fields[number - 3]);
  };
  const auto utime = field(14), stime = field(15), start = field(22), vsize = field(23),
             rss = field(24);
  if (!utime || !stime || !start || !vsize || !rss) return std::nullopt;
  return ProcStat{*utime, *stime, *start, *vsize, *rss};
}

std::optional<uint64_t> ParseBootTime(std::string_view proc_stat) {
  size_t pos = 0;
  while (pos < proc_stat.size()) {
    size_t end = proc_stat.find('\n', pos);
    if (end == std::string_view::npos) end = proc_stat.size();
    const std::string_view line = proc_stat.substr(pos, end - pos);
    constexpr std::string_view kKey = "btime ";
    if (line.substr(0, kKey.size()) == kKey) return ToNumber(line.substr(kKey.size()));
    pos = end + 1;
  }
  return std::nullopt;
}

std::vector<prometheus::MetricFamily> CollectProcessMetrics() {
  using prometheus::MetricType;
  std::vector<prometheus::MetricFamily> families;
  const long ticks_per_second = sysconf(_SC_CLK_TCK);
  const long page_size = sysconf(_SC_PAGESIZE);
  const auto stat_text = ReadSmallFile("/proc/self/stat");
  const auto stat = stat_text ? ParseProcStat(*stat_text) : std::nullopt;
  if (stat && ticks_per_second > 0 && page_size > 0) {
    const double ticks = static_cast<double>(ticks_per_second);
    families.push_back(Family(
        "process_cpu_seconds_total", "Total user and system CPU time spent in seconds.",
        MetricType::Counter, static_cast<double>(stat->utime_ticks + stat->stime_ticks) / ticks));
    families.push_back(
        Family("process_resident_memory_bytes", "Resident memory size in bytes.", MetricType::Gauge,
               static_cast<double>(stat->rss_pages) * static_cast<double>(page_size)));
    families.push_back(Family("process_virtual_memory_bytes", "Virtual memory size in bytes.",
                              MetricType::Gauge, static_cast<double>(stat->vsize_bytes)));
    const auto system_stat = ReadSmallFile("/proc/stat");
    const auto boot = system_stat ? ParseBootTime(*system_stat) : std::nullopt;
    if (boot) {
      families.push_back(Family(
          "process_start_time_seconds", "Start time of the process since unix epoch in seconds.",
          MetricType::Gauge,
          static_cast<double>(*boot) + static_cast<double>(stat->start_ticks_after_boot) / ticks));
    }
  }
  if (const auto open = CountOpenFds()) {
    families.push_back(Family("process_open_fds", "Number of open file descriptors.",
                              MetricType::Gauge, static_cast<double>(*open)));
  }
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
    families.push_back(Family("process_max_fds", "Maximum number of open file descriptors.",
                              MetricType::Gauge, static_cast<double>(limit.rlim_cur)));
  }
  return families;
}

}  // namespace mesh::reconciler
