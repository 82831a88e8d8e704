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
  cmake --build build -j2 --target mesh-reconciler
  bin="$root/build/mesh-reconciler"
else
  bin="$MESH_BINARY"
fi

# shellcheck source=scripts/private-bus.sh
source "$root/scripts/private-bus.sh"  # private_bus_*, free_port, wait_for

demo="${MESH_DEMO_DIR:-$root/run/demo}"
rm -rf "$demo"
private_bus_init "$demo" demo

trap private_bus_stop EXIT
echo "== rendering the first users file (the chart's init container does the same), and"
echo "== starting a private nats-server on $bus (monitoring $monitor, folder $demo)"
private_bus_start "$bin" || exit 1

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

delete_cmd="$bin delete-stream EVENTS --yes ${settings[*]}"
cat <<TEXT

mesh-reconciler is running (pid $daemon_pid) against nats-server (pid $nats_pid).

  metrics:       curl -s http://$listen/metrics | grep ^mesh_reconciler_
  drift report:  curl -s http://$listen/drift
  readiness:     curl -s http://$listen/readyz

Delete a stream and watch it come back (a JetStream advisory wakes the loop at once):
  $delete_cmd
  curl -s http://$listen/metrics | grep -E '^mesh_reconciler_repairs_total'

On-call:
  $bin reconcile --remote http://$listen --token-file $demo/admin.token
  $bin hold --remote http://$listen --token-file $demo/admin.token --for 30m --reason "\$USER: why"
  $bin release --remote http://$listen --token-file $demo/admin.token

TEXT

if [ "$mode" = "--check" ]; then
  echo "== check: deleting stream EVENTS"
  eval "$delete_cmd"
  # Converged again once the daemon has recreated it: plan exits 0.
  wait_for 20 "$bin" plan "${settings[@]}" || { echo "EVENTS was not recreated"; exit 1; }
  curl -fsS "http://$listen/metrics" | grep -E '^mesh_reconciler_repairs_total\{.*kind="stream".*\} [1-9]' \
    || { echo "no stream repair counted"; exit 1; }
  echo "demo check: the deleted stream came back"
  exit 0
fi

echo "Ctrl-C stops the daemon and the server."
wait "$daemon_pid"
