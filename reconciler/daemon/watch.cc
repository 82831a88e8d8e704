#include "reconciler/daemon/watch.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "reconciler/base/log.h"

namespace mesh::reconciler {
namespace {

// IN_ATTRIB: a chmod or chown of a watched file is a change too (the users file's mode and
// owner are drift). IN_CREATE: a symbolic link made in a file's place (no close-for-write).
constexpr uint32_t kMask =
    IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE | IN_ATTRIB | IN_CREATE;
constexpr const char* kKubernetesDataLink = "..data";

}  // namespace

Result<std::unique_ptr<FileWatcher>> FileWatcher::Start(std::vector<FileWatch> watches) {
  std::unique_ptr<FileWatcher> watcher(new FileWatcher());
  watcher->inotify_fd_ = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (watcher->inotify_fd_ < 0) {
    return Status(Errc::kIo, std::string("inotify_init1: ") + std::strerror(errno));
  }
  watcher->stop_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (watcher->stop_fd_ < 0) {
    return Status(Errc::kIo, std::string("eventfd: ") + std::strerror(errno));
  }
  for (FileWatch& watch : watches) {
    if (watch.path.empty()) continue;
    const std::filesystem::path path(watch.path);
    const std::filesystem::path folder_path =
        path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
    const std::string folder = folder_path.string();
    const int wd = inotify_add_watch(watcher->inotify_fd_, folder.c_str(), kMask);
    if (wd < 0) {
      Log(LogLevel::kWarn, 0, "cannot watch a folder; changes there will wait for the next pass",
          {{"folder", folder}, {"error", std::strerror(errno)}});
      continue;
    }
    watcher->targets_.push_back({wd, path.filename().string(), std::move(watch.on_change)});
    ++watcher->active_;
  }
  watcher->thread_ = std::thread([w = watcher.get()] { w->Run(); });
  return watcher;
}

FileWatcher::~FileWatcher() {
  if (thread_.joinable()) {
    const uint64_t one = 1;
    if (write(stop_fd_, &one, sizeof one) != sizeof one) {
      Log(LogLevel::kError, 0, "cannot stop the file watcher", {{"error", std::strerror(errno)}});
    }
    thread_.join();
  }
  if (inotify_fd_ >= 0) close(inotify_fd_);
  if (stop_fd_ >= 0) close(stop_fd_);
}

void FileWatcher::Run() {
  // Large enough for many events at once; each event is aligned for inotify_event.
  alignas(inotify_event) std::array<char, 16 * 1024> buffer;
  while (true) {
    std::array<pollfd, 2> fds = {pollfd{inotify_fd_, POLLIN, 0}, pollfd{stop_fd_, POLLIN, 0}};
    if (poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      Log(LogLevel::kError, 0, "file watcher stopped", {{"error", std::strerror(errno)}});
      return;
    }
    if ((fds[1].revents & POLLIN) != 0) return;
    const ssize_t length = read(inotify_fd_, buffer.data(), buffer.size());
    if (length <= 0) continue;  // EAGAIN or EINTR
    // Each callback runs at most once per batch of events.
    std::vector<bool> changed(targets_.size(), false);
    for (ssize_t offset = 0; offset < length;) {
      const auto* event = reinterpret_cast<const inotify_event*>(buffer.data() + offset);
      offset += static_cast<ssize_t>(sizeof(inotify_event) + event->len);
      if ((event->mask & IN_Q_OVERFLOW) != 0) {
        changed.assign(targets_.size(), true);  // events were lost: assume everything changed
        continue;
      }
      const std::string name = event->len > 0 ? std::string(event->name) : std::string();
      for (size_t i = 0; i < targets_.size(); ++i) {
        if (targets_[i].wd == event->wd &&
            (name == targets_[i].name || name == kKubernetesDataLink)) {
          changed[i] = true;
        }
      }
    }
    for (size_t i = 0; i < targets_.size(); ++i) {
      if (changed[i]) targets_[i].on_change();
    }
  }
}

}  // namespace mesh::reconciler
