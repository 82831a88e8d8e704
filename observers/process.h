// A local process as /proc shows it: which program it runs, for the one signal the reconciler
// sends (SIGHUP to nats-server, to reload the users file). The PID comes from a pid file that
// nats-server leaves behind when it stops, so the PID may be free, or reused by any other
// process (in a pod's shared PID namespace, the sidecar's own): apply checks what it runs
// before it signals it.
//
// Works across the containers of one pod (one PID namespace): /proc/<pid>/cmdline and status are
// readable by any process; /proc/<pid>/exe only by the same user, and is then a path in the
// other container's file system (only its file name is compared).
//
// Thread-safety: free functions; read only.
#pragma once

#include <sys/types.h>

#include <string>

#include "model/result.h"

namespace mesh::observers {

enum class ProcessState { kRunning, kZombie };

struct ProcessInfo {
  pid_t pid = 0;
  ProcessState state = ProcessState::kRunning;
  std::string program;   // the file name of argv[0] ("nats-server"); empty when unknown
  std::string exe_name;  // the file name of /proc/<pid>/exe, when readable
};

// Errc::kUnavailable when there is no process `pid`; Errc::kIo when /proc cannot be read.
Result<ProcessInfo> ReadProcess(pid_t pid);

}  // namespace mesh::observers
