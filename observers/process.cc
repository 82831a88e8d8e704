#include "observers/process.h"

#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <optional>
#include <sstream>

namespace mesh::observers {
namespace {

std::string FileName(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// The whole of a small /proc file; nullopt when it cannot be opened (the process is gone).
std::optional<std::string> ReadProcFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream all;
  all << in.rdbuf();
  return all.str();
}

// /proc/<pid>/exe's target without the " (deleted)" the kernel appends when the binary was
// replaced since the process started (a package upgrade).
std::string ExeName(const std::string& dir) {
  char exe[4096];
  const ssize_t n = readlink((dir + "/exe").c_str(), exe, sizeof exe - 1);
  if (n <= 0) return "";
  std::string target(exe, static_cast<size_t>(n));
  const std::string deleted = " (deleted)";
  if (target.size() > deleted.size() &&
      target.compare(target.size() - deleted.size(), deleted.size(), deleted) == 0) {
    target.resize(target.size() - deleted.size());
  }
  return FileName(target);
}

}  // namespace

Result<ProcessInfo> ReadProcess(pid_t pid) {
  const std::string dir = "/proc/" + std::to_string(pid);
  const std::optional<std::string> status = ReadProcFile(dir + "/status");
  if (!status) {
    if (access(dir.c_str(), F_OK) != 0 && errno == ENOENT) {
      return Status(Errc::kUnavailable, "no process " + std::to_string(pid));
    }
    return Status(Errc::kIo, "cannot read " + dir + "/status");
  }
  ProcessInfo info;
  info.pid = pid;
  // "State:\tZ (zombie)": a process that has exited and not yet been reaped.
  const size_t state = status->find("\nState:");
  if (state != std::string::npos) {
    const size_t letter = status->find_first_not_of(" \t", state + 7);
    if (letter != std::string::npos && (status->at(letter) == 'Z' || status->at(letter) == 'X')) {
      info.state = ProcessState::kZombie;
    }
  }
  if (std::optional<std::string> cmdline = ReadProcFile(dir + "/cmdline")) {
    info.program = FileName(cmdline->substr(0, cmdline->find('\0')));
  }
  info.exe_name = ExeName(dir);
  return info;
}

}  // namespace mesh::observers
