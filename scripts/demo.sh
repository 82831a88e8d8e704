#!/usr/bin/env bash
# The README's main command: mesh-reconciler on an embedded default.
#
# Installs what it needs (idempotently), builds, starts a private nats-server on free loopback
# ports in run/demo/ with the example records, shows the plan of the fresh bus, runs one pass,
# shows that a second plan is empty, then runs the daemon in the foreground and tells you where
# to look. Ctrl-C stops the daemon and the server (by PID).
#
#   bash scripts/demo.sh            # the full demo, daemon in the foreground
#   bash scripts/demo.sh --check    # non-interactive: also deletes a stream, waits until the
#                                   # daemon has recreated it, then stops (used by the tests)
# MESH_NATS_SERVER=/path/to/nats-server runs that binary instead of the installed one.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root="$PWD"
mode="${1:-interactive}"

if [ -z "${MESH_BINARY:-}" ]; then
  bash scripts/install-deps.sh build demo
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build build -j2 --target mesh-reconciler mesh-nats-request
  bin="$root/build/mesh-reconciler"
  request="$root/build/mesh-nats-request"
else
  bin="$MESH_BINARY"
  request="$(dirname "$MESH_BINARY")/mesh-nats-request"
fi

# shellcheck source=scripts/loopback.sh
source "$root/scripts/loopback.sh"

demo="${MESH_DEMO_DIR:-$root/run/demo}"
rm -rf "$demo"
mkdir -p "$demo"
chmod 700 "$demo"
port=$(free_port); monitor_port=$(free_port); http_port=$(free_port)
bus="nats://127.0.0.1:$port"
monitor="http://127.0.0.1:$monitor_port"
listen="127.0.0.1:$http_port"
records="$root/examples/records.json"
( umask 077; openssl rand -hex 24 > "$demo/reconciler.password"; openssl rand -hex 32 > "$demo/admin.token" )

cat > "$demo/nats.conf" <<CONF
server_name: demo
listen: 127.0.0.1:$port
http: 127.0.0.1:$monitor_port
pid_file: "$demo/nats.pid"
log_file: "$demo/nats.log"
jetstream { store_dir: "$demo/jetstream" }
include "users.conf"
CONF

settings=(--records "$records" --bus "$bus" --password-file "$demo/reconciler.password"
          --users-file "$demo/users.conf" --pid-file "$demo/nats.pid" --monitor "$monitor")

echo "== rendering the first users file (the chart's init container does the same)"
"$bin" render-users "$records" --password-file "$demo/reconciler.password" --out "$demo/users.conf"

nats_pid=""; daemon_pid=""
cleanup() {
  [ -n "$daemon_pid" ] && kill "$daemon_pid" 2>/dev/null && wait "$daemon_pid" 2>/dev/null || true
  [ -n "$nats_pid" ] && kill "$nats_pid" 2>/dev/null && wait "$nats_pid" 2>/dev/null || true
}
trap cleanup EXIT

echo "== starting a private nats-server on $bus (monitoring $monitor, folder $demo)"
"${MESH_NATS_SERVER:-nats-server}" -c "$demo/nats.conf" &
nats_pid=$!
wait_for 20 curl -fsS "$monitor/healthz" || { echo "nats-server did not become healthy"; tail -20 "$demo/nats.log"; exit 1; }

echo
echo "== plan of a fresh bus (exit code 2: drift found)"
set +e; "$bin" plan "${settings[@]}"; code=$?; set -e
[ "$code" -eq 2 ] || { echo "expected exit 2 from plan on a fresh bus, got $code"; exit 1; }

echo
echo "== one pass"
"$bin" reconcile --once "${settings[@]}"

echo
echo "== a second plan: nothing to do (exit code 0)"
"$bin" plan "${settings[@]}"

echo
echo "== the daemon"
"$bin" run "${settings[@]}" --listen "$listen" --token-file "$demo/admin.token" --interval 30s \
  2> >(tee "$demo/daemon.log" >&2) &
daemon_pid=$!
wait_for 20 curl -fsS "http://$listen/readyz" || { echo "the daemon did not become ready"; exit 1; }

delete_cmd="$request --bus $bus --password-file $demo/reconciler.password '\$JS.API.STREAM.DELETE.EVENTS'"
cat <<TEXT

mesh-reconciler is running (pid $daemon_pid) against nats-server (pid $nats_pid).

  metrics:       curl -s http://$listen/metrics | grep ^mesh_
  drift report:  curl -s http://$listen/drift
  readiness:     curl -s http://$listen/readyz

Delete a stream and watch it come back (a JetStream advisory wakes the loop at once):
  $delete_cmd
  curl -s http://$listen/metrics | grep -E '^mesh_repairs_total'

On-call:
  $bin reconcile --remote http://$listen --token-file $demo/admin.token
  $bin hold --remote http://$listen --token-file $demo/admin.token --for 30m
  $bin release --remote http://$listen --token-file $demo/admin.token

TEXT

if [ "$mode" = "--check" ]; then
  echo "== check: deleting stream EVENTS"
  eval "$delete_cmd"
  # Converged again once the daemon has recreated it: plan exits 0.
  wait_for 20 "$bin" plan "${settings[@]}" || { echo "EVENTS was not recreated"; exit 1; }
  curl -fsS "http://$listen/metrics" | grep -E '^mesh_repairs_total\{.*kind="stream".*\} [1-9]' \
    || { echo "no stream repair counted"; exit 1; }
  echo "demo check: the deleted stream came back"
  exit 0
fi

echo "Ctrl-C stops the daemon and the server."
wait "$daemon_pid"
