# shellcheck shell=bash
# Sourced (not run) by scripts/demo.sh and the script tests that need a bus of their own: a
# private nats-server and mesh-reconciler daemon on free loopback ports, every file in one
# folder (mode 0700; secrets 0600), the example records.
#   private_bus_init DIR NAME [RECORDS]
#                               ports, secrets and nats.conf in DIR (server_name NAME); sets
#                               port monitor_port http_port bus monitor listen records, the pass
#                               flags in settings=(...) and the daemon's in remote=(...);
#                               RECORDS: the records file (default: the example's)
#   private_bus_start BIN       renders the first users file (as the chart's init container
#                               does), starts nats-server ($MESH_NATS_SERVER or the installed
#                               one) and waits for /healthz; sets nats_pid
#   private_daemon_start BIN LOG [FLAG...]
#                               starts `BIN run` with stderr to LOG, waits for /readyz; sets
#                               daemon_pid
#   private_bus_stop            stops the daemon and the server started here, by PID
# Bash only.

# shellcheck source=scripts/loopback.sh
source "$(dirname "${BASH_SOURCE[0]}")/loopback.sh"  # free_port, wait_for

# shellcheck disable=SC2034  # the variables are for the caller
private_bus_init() {
  private_dir="$1"
  local name="$2"
  mkdir -p "$private_dir"
  chmod 700 "$private_dir"
  port=$(free_port); monitor_port=$(free_port); http_port=$(free_port)
  bus="nats://127.0.0.1:$port"
  monitor="http://127.0.0.1:$monitor_port"
  listen="127.0.0.1:$http_port"
  records="${3:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/examples/records.json}"
  (umask 077; openssl rand -hex 24 >"$private_dir/reconciler.password"; openssl rand -hex 32 >"$private_dir/admin.token")
  cat >"$private_dir/nats.conf" <<CONF
server_name: $name
listen: 127.0.0.1:$port
http: 127.0.0.1:$monitor_port
pid_file: "$private_dir/nats.pid"
log_file: "$private_dir/nats.log"
jetstream { store_dir: "$private_dir/jetstream" }
include "users.conf"
CONF
  settings=(--records "$records" --bus "$bus" --password-file "$private_dir/reconciler.password"
            --users-file "$private_dir/users.conf" --pid-file "$private_dir/nats.pid" --monitor "$monitor")
  remote=(--remote "http://$listen" --token-file "$private_dir/admin.token")
  nats_pid=""; daemon_pid=""
}

private_bus_start() {
  local bin="$1"
  "$bin" render-users "$records" --password-file "$private_dir/reconciler.password" \
    --out "$private_dir/users.conf" || return 1
  "${MESH_NATS_SERVER:-$(command -v nats-server || echo /usr/sbin/nats-server)}" -c "$private_dir/nats.conf" \
    >"$private_dir/nats.out" 2>&1 &
  nats_pid=$!
  wait_for 20 curl -fsS "$monitor/healthz" || {
    echo "nats-server did not become healthy"; tail -20 "$private_dir/nats.out" "$private_dir/nats.log"; return 1; }
}

private_daemon_start() {
  local bin="$1" log="$2"; shift 2
  "$bin" run "${settings[@]}" --listen "$listen" --token-file "$private_dir/admin.token" "$@" 2>"$log" &
  daemon_pid=$!
  wait_for 20 curl -fsS "http://$listen/readyz" || { echo "the daemon did not become ready"; tail -20 "$log"; return 1; }
}

# Safe under set -e (the demo's): a process already gone is not an error here.
private_bus_stop() {
  local pid
  for pid in "${daemon_pid:-}" "${nats_pid:-}"; do
    [[ -n "$pid" ]] || continue
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  daemon_pid=""; nats_pid=""
}
