// Wakes the daemon when a file it reads changes on disk: the records file, the users file and
// the admin token file. These files are replaced by rename (an atomic write, or Kubernetes
// swapping the "..data" link of a mounted ConfigMap or Secret), which a watch on the file itself
// would miss; so the watch is on each file's parent folder (inotify), filtered by name.
//
// An event is a completed write (IN_CLOSE_WRITE), a rename into or out of the folder, a
// deletion, a creation (e.g. a symbolic link made in the file's place) or a change of mode or
// owner (IN_ATTRIB: chmod, chown), of the file itself or of "..data" in its folder. Partial
// writes do not wake.
//
// Ownership: FileWatcher owns its inotify descriptor, an eventfd used to stop it, and one
// thread that runs the callbacks. Thread-safety: callbacks run on that thread and must not
// block for long (they only wake the loop or re-read a small file).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "model/result.h"

namespace mesh::reconciler {

struct FileWatch {
  std::string path;
  std::function<void()> on_change;
};

class FileWatcher {
 public:
  // Starts watching. A folder that cannot be watched (absent, no permission) is logged and
  // skipped; only a failure of inotify itself is an error.
  static Result<std::unique_ptr<FileWatcher>> Start(std::vector<FileWatch> watches);
  ~FileWatcher();  // stops and joins the thread
  FileWatcher(const FileWatcher&) = delete;
  FileWatcher& operator=(const FileWatcher&) = delete;

  // How many of the watches are in force.
  size_t active() const { return active_; }

 private:
  struct Target {
    int wd = -1;
    std::string name;  // the file's name within its folder
    std::function<void()> on_change;
  };
  FileWatcher() = default;
  void Run();

  int inotify_fd_ = -1;
  int stop_fd_ = -1;
  std::vector<Target> targets_;
  size_t active_ = 0;
  std::thread thread_;
};

}  // namespace mesh::reconciler
