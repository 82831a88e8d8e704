#!/usr/bin/env bash
# The Grafana dashboard (charts/mesh-reconciler/dashboards/mesh-reconciler.json) against real
# data: three daemons with the lease on one real nats-server, as the chart's three replicas
# share one bus, scraped by a real Prometheus whose targets carry the labels the chart's
# PodMonitor/ServiceMonitor give them (job="mesh-reconciler", namespace, bus, pod). A stream marked
# as the mesh's but not derived from the records is drift every daemon reports ("unexpected");
# then every panel's query, with the dashboard's variables substituted as Grafana would
# ($bus: the bus label, $pod: All), is evaluated through Prometheus' HTTP API:
#   - the bus variable's query returns the bus, the pod variable's the three pods;
#   - no query fails, and every one returns data (but the certificate panel: no TLS here);
#   - the drift on the bus is counted once (1), where a sum over the pods counts it three times;
#   - exactly one lease holder; every per-pod series is named by its pod, and with one pod
#     chosen the per-pod panels show that pod alone.
# Every process is started here on free loopback ports and stopped by PID.
set -uo pipefail

root="${MESH_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
cd "$root" || exit 1
bin="${MESH_BINARY:?MESH_BINARY: the mesh-reconciler binary (CTest sets it)}"
nats_request="${MESH_BUILD_DIR:-$(dirname "$bin")}/mesh-nats-request"
readonly kDashboard="charts/mesh-reconciler/dashboards/mesh-reconciler.json"
readonly kBus="mesh-live"            # the bus label (and the namespace): the bus
readonly kSts="mesh-mesh-reconciler"  # the pods are $kSts-0, -1, -2
bash scripts/install-test-tools.sh >/dev/null 2>&1 || { echo "dashboard_live_test: cannot install the test tools"; exit 1; }
source "$root/tests/scripts/lib.sh"
test_lib_init dashboard_live_test

# shellcheck source=scripts/private-bus.sh
source "$root/scripts/private-bus.sh"  # private_bus_*, free_port, wait_for
cp examples/records.json "$work/records.json"
export MESH_RECONCILER_LEASE=1  # the users file admits the lease's bucket (render-users)
private_bus_init "$work/bus" live "$work/records.json"
daemon_pids=() daemon_ports=() prometheus_pid=""
stop_all() {
  local pid
  for pid in "${daemon_pids[@]}" "$prometheus_pid"; do
    [[ -n "$pid" ]] || continue
    kill "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
  done
  private_bus_stop
  rm -rf "$work"
}
trap stop_all EXIT

metrics_of() { curl -fsS --max-time 2 "http://127.0.0.1:${daemon_ports[$1]}/metrics"; }
holders() {
  local i n=0
  for i in 0 1 2; do
    metrics_of "$i" | grep -Eq '^mesh_reconciler_lease_holder 1(\.0+)?$' && n=$((n + 1))
  done
  echo "$n"
}
one_holder() { [[ "$(holders)" == 1 ]]; }

# Three sidecars with the lease on the one bus. The first keeps the users file; the others
# change JetStream only (their users files would be the same one).
three_daemons() {
  [[ -x "$nats_request" ]] || { echo "no $nats_request: build the mesh-nats-request target"; return 1; }
  private_bus_start "$bin" || return 1
  local i flags
  for i in 0 1 2; do
    daemon_ports[i]=$(free_port)
    flags=(--records "$work/records.json" --bus "$bus" --password-file "$work/bus/reconciler.password"
           --monitor "$monitor" --lease --interval 2s --listen "127.0.0.1:${daemon_ports[i]}")
    ((i == 0)) && flags+=(--users-file "$work/bus/users.conf" --pid-file "$work/bus/nats.pid")
    HOSTNAME="$kSts-$i" "$bin" run "${flags[@]}" 2>"$work/daemon-$i.log" &
    daemon_pids[i]=$!
  done
  for i in 0 1 2; do
    wait_for 30 curl -fsS "http://127.0.0.1:${daemon_ports[i]}/readyz" ||
      { echo "daemon $i not ready"; tail -20 "$work/daemon-$i.log"; return 1; }
  done
  wait_for 60 one_holder || { echo "not one lease holder: $(holders)"; return 1; }
  echo "three daemons ready, one lease holder"
}

# A stream with the mesh's mark that the records do not derive: "unexpected" drift, which
# every daemon reports and none deletes (pruning is off).
unexpected_everywhere() {
  local i
  for i in 0 1 2; do
    metrics_of "$i" | grep -Eq '^mesh_reconciler_drift_objects\{kind="stream",state="unexpected"\} 1(\.0+)?$' || return 1
  done
}
# shellcheck disable=SC2016  # the subject is literal, $JS included
drift() {
  "$nats_request" --bus "$bus" --password-file "$work/bus/reconciler.password" '$JS.API.STREAM.CREATE.SEAT_gone' \
    '{"name":"SEAT_gone","subjects":["mesh.work.gone.*"],"storage":"file","description":"mesh demo: managed by mesh-reconciler"}' \
    >"$work/create.out" 2>&1 || { cat "$work/create.out"; return 1; }
  grep -q '"error"' "$work/create.out" && { cat "$work/create.out"; return 1; }
  wait_for 30 unexpected_everywhere || { echo "not every daemon reports SEAT_gone unexpected"; return 1; }
  echo "every daemon reports one unexpected stream"
}

# Prometheus, scraping the three every second, their targets labelled as the chart's
# PodMonitor labels them. Ready once each target has been scraped at least twice (rates).
prometheus_up() {
  local port i
  port=$(free_port)
  prometheus_url="http://127.0.0.1:$port"
  {
    echo "global: { scrape_interval: 1s, evaluation_interval: 1s }"
    echo "scrape_configs:"
    echo "  - job_name: mesh-reconciler"
    echo "    static_configs:"
    for i in 0 1 2; do
      echo "      - targets: ['127.0.0.1:${daemon_ports[i]}']"
      echo "        labels: { namespace: $kBus, bus: $kBus, pod: $kSts-$i }"
    done
  } >"$work/prometheus.yml"
  promtool check config "$work/prometheus.yml" >/dev/null || return 1
  prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/tsdb" \
    --web.listen-address="127.0.0.1:$port" >"$work/prometheus.log" 2>&1 &
  prometheus_pid=$!
  wait_for 60 curl -fsS "$prometheus_url/-/ready" || { echo "Prometheus not ready"; tail -20 "$work/prometheus.log"; return 1; }
  wait_for 60 scraped_enough || { echo "Prometheus has not scraped the three daemons"; return 1; }
  echo "Prometheus scrapes the three daemons"
}
prom_true() {  # QUERY: Prometheus answers it with a non-empty result
  curl -fsS "$prometheus_url/api/v1/query" --data-urlencode "query=$1" | grep -q '"result":\[{'
}
scraped_enough() {
  prom_true 'count(count_over_time(mesh_reconciler_build_info{job="mesh-reconciler"}[1m]) >= 3) == 3' &&
    prom_true 'sum(mesh_reconciler_drift_objects{job="mesh-reconciler", kind="stream", state="unexpected"}) == 3'
}

panels_evaluate() {
  node tests/dashboard/live.mjs "$kDashboard" "$prometheus_url" "$kBus" "$kSts-0" "$kSts-1" "$kSts-2"
}

run_test "one nats-server and three daemons with the lease, one holder" three_daemons
run_test "a stream of the mesh's that the records do not derive: drift in every daemon" drift
run_test "a real Prometheus scrapes the three, labelled as the chart's monitor does" prometheus_up
run_test "every panel's query, variables substituted, evaluated by Prometheus" panels_evaluate

test_lib_finish
