// What one pass needs to know, whoever runs it (the daemon's loop, the CLI's plan and
// reconcile, the tests): where the records are, how to reach the bus, the users file and the
// server's files, what it may delete, the lease. The CLI's Settings (reconciler/cli/settings.h)
// extends it with the flags of its commands, which the pass never reads.
//
// Thread-safety: plain values.
#pragma once

#include <chrono>
#include <string>

#include "model/names.h"
#include "model/users_file.h"
#include "observers/bus.h"

namespace mesh::reconciler {

enum class LeaseMode { kOff, kKv };  // --lease: act on JetStream only while holding the KV lease

struct PassSettings {
  std::string records_path;    // --records (or the first positional argument of validate,...)
  observers::BusSettings bus;  // --bus URL[,URL...], --user, password, --ca-file, pinning
  std::string users_file;      // --users-file: the file nats-server includes
  std::string pid_file;        // --pid-file: nats-server's pid file
  std::string monitor_url;     // --monitor: http://127.0.0.1:8222
  // --store-dir: the server's JetStream store_dir as mounted here (read only); on 2.9, which
  // shows no store on disk, a recreation waits until the old folder is gone there instead of a
  // fixed settle (observers/store_folder.h). Standalone servers only.
  std::string store_dir;
  Prune prune = Prune::kNo;           // --prune
  LeaseMode lease = LeaseMode::kOff;  // --lease (MESH_RECONCILER_LEASE=1)
  int bcrypt_cost = 10;               // --bcrypt-cost
  // --rehash: a hash of the users file at another cost than --bcrypt-cost, proven by its digest,
  // is hashed again at --bcrypt-cost; without it, it is kept (not drift).
  model::OtherCostHashes other_costs = model::OtherCostHashes::kKeep;
  // --users-scope server|account: what the users file holds (model/users_file.h).
  model::UsersScope users_scope = model::UsersScope::kServer;
  // --interval 30s | 5m | 500ms: the daemon's period; the lease's TTL and rounds follow it.
  std::chrono::milliseconds interval{30000};
};

}  // namespace mesh::reconciler
