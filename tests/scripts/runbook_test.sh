#!/usr/bin/env bash
# docs/runbook.md, run: every command the runbook gives on-call, extracted from the document,
# against a private nats-server and daemon set up as the demo's (scripts/private-bus.sh), with
# the sidecar's settings in its environment as the chart sets them, the lease on. The commands
# reach them through stand-ins for kubectl and curl (tests/runbook/bin) that map the pod onto
# these processes; tests/runbook/run.mjs makes each alert's situation real and checks that every
# command ends as it should and that each grep finds what the runbook promises.
set -uo pipefail

root="${MESH_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
cd "$root" || exit 1
bin="${MESH_BINARY:?MESH_BINARY: the mesh-reconciler binary (CTest sets it)}"
source "$root/tests/scripts/lib.sh"
test_lib_init runbook_test
bash scripts/install-test-tools.sh >/dev/null 2>&1 || { echo "runbook_test: cannot install the test tools"; exit 1; }

# shellcheck source=scripts/private-bus.sh
source "$root/scripts/private-bus.sh"  # private_bus_*, free_port, wait_for
cp examples/records.json "$work/records.json"
private_bus_init "$work" runbook "$work/records.json"
stop_all() {
  private_bus_stop
  rm -rf "$work"
}
trap stop_all EXIT

# The sidecar's environment, as the chart sets it (docs/runbook.md, "Before you start"); the
# kubectl stand-in maps the pod's paths and addresses in it (the daemon's, the token's).
export MESH_RECONCILER_LEASE=1
cat >"$work/sidecar.env" <<ENV
MESH_RECONCILER_RECORDS=$work/records.json
MESH_RECONCILER_BUS=$bus
MESH_RECONCILER_PASSWORD_FILE=$work/reconciler.password
MESH_RECONCILER_USERS_FILE=$work/users.conf
MESH_RECONCILER_PID_FILE=$work/nats.pid
MESH_RECONCILER_MONITOR=$monitor
MESH_RECONCILER_LEASE=1
MESH_RECONCILER_REMOTE=http://127.0.0.1:9464
MESH_RECONCILER_TOKEN_FILE=/etc/mesh/token
ENV
mkdir -p "$work/sidecar-bin"
ln -s "$bin" "$work/sidecar-bin/mesh-reconciler"

start() {
  private_bus_start "$bin" || return 1
  # A first daemon, stopped: its log is what `kubectl logs --previous` reads.
  private_daemon_start "$bin" "$work/daemon.log" --interval 30s || return 1
  kill "$daemon_pid" && wait "$daemon_pid"
  daemon_pid=""
  mv "$work/daemon.log" "$work/daemon.previous.log"
  private_daemon_start "$bin" "$work/daemon.log" --interval 30s
}

run_runbook() {
  RUNBOOK_DIR="$work" RUNBOOK_LISTEN="$listen" RUNBOOK_MONITOR="$monitor" RUNBOOK_BUS="$bus" \
  RUNBOOK_ENV_FILE="$work/sidecar.env" RUNBOOK_POD=mesh-mesh-reconciler-0 \
  RUNBOOK_SIDECAR_PATH="$work/sidecar-bin:/usr/bin:/bin" MESH_BINARY="$bin" \
  RUNBOOK_NATS_SERVER="${MESH_NATS_SERVER:-$(command -v nats-server || echo /usr/sbin/nats-server)}" \
    node tests/runbook/run.mjs
}

run_test "the bus and the daemon start, with the lease, as the sidecar" start
run_test "every command of docs/runbook.md does what the runbook says" run_runbook

test_lib_finish
