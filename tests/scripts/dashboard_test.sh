#!/usr/bin/env bash
# Tests of the Grafana dashboard charts/mesh-reconciler/dashboards/mesh-reconciler.json:
#   - it is valid JSON with a title, a uid, panels and a Prometheus data-source variable;
#   - every panel has a title and at least one query, and every query's expression parses with
#     promtool (each is checked as a recording rule, after Grafana's variables are replaced by
#     the values Grafana would send: $__rate_interval -> 5m, $bus -> mesh, $pod -> .*);
#   - it is made for several replicas: a single-valued bus variable (the bus label) and a pod
#     variable; no panel names or groups by instance (an IP:port) rather than pod; every stat
#     panel has thresholds beyond its base colour;
#   - every metric an expression names is one the daemon registers (reconciler/*/*.cc, prometheus-cpp
#     families; a histogram's _bucket/_sum/_count series included), so a rename breaks this test,
#     and none is a deprecated 0.1.0 name (kRenamedMetrics, reconciler/daemon/metrics.h; lib.sh);
#   - tests/scripts/dashboard_live_test.sh evaluates every query against a real Prometheus
#     scraping three daemons;
#   - the chart ships the file unchanged in a ConfigMap labelled for Grafana's sidecar, only when
#     monitoring.dashboard.enabled is true.
# Standalone: bash tests/scripts/dashboard_test.sh (needs node, promtool and helm: the Debian
# package prometheus and scripts/install-test-tools.sh).
set -uo pipefail

root="${MESH_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
cd "$root" || exit 1
bash scripts/install-test-tools.sh >/dev/null || { echo "dashboard_test: cannot install the test tools"; exit 1; }

readonly kDashboard="charts/mesh-reconciler/dashboards/mesh-reconciler.json"
helm="$root/.tools/bin/helm"
yaml_module="$root/.tools/node/node_modules/yaml"
source "$root/tests/scripts/lib.sh"
test_lib_init dashboard_test

# Prints one expression per line (Grafana variables substituted), or fails on a malformed file.
expressions() {
  node -e '
    const fs = require("fs");
    const d = JSON.parse(fs.readFileSync(process.argv[1], "utf8"));
    const fail = (m) => { console.error(m); process.exit(1); };
    if (!d.title || !d.uid) fail("no title or uid");
    const vars = ((d.templating || {}).list || []);
    if (!vars.some((v) => v.type === "datasource" && v.query === "prometheus"))
      fail("no Prometheus data-source variable");
    if (!Array.isArray(d.panels) || d.panels.length === 0) fail("no panels");
    for (const p of d.panels) {
      if (!p.title) fail(`panel ${p.id}: no title`);
      if (!Array.isArray(p.targets) || p.targets.length === 0) fail(`panel "${p.title}": no query`);
      for (const t of p.targets) {
        if (!t.expr) fail(`panel "${p.title}": a query without expr`);
        const e = t.expr.replace(/\$__rate_interval|\$__interval|\$__range/g, "5m")
                        .replace(/\$bus/g, "mesh").replace(/\$pod/g, ".*");
        if (e.includes("$")) fail(`panel "${p.title}": unknown variable in ${t.expr}`);
        console.log(e.replace(/\n/g, " "));
      }
    }' "$kDashboard"
}

json_is_valid() {
  expressions >"$work/exprs" || return 1
  echo "$(wc -l <"$work/exprs") expressions in $(node -e 'console.log(require(process.argv[1]).panels.length)' "$root/$kDashboard") panels"
}

every_expression_parses() {
  expressions >"$work/exprs" || return 1
  {
    echo "groups:"
    echo "  - name: dashboard"
    echo "    rules:"
    local i=0 e
    while IFS= read -r e; do
      i=$((i + 1))
      printf '      - record: dashboard:panel_query_%d\n        expr: %s\n' "$i" \
        "$(node -e 'console.log(JSON.stringify(process.argv[1]))' "$e")"
    done <"$work/exprs"
  } >"$work/rules.yaml"
  promtool check rules "$work/rules.yaml"
}

for_replicas() {
  node -e '
    const d = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
    const problems = [];
    const vars = Object.fromEntries(d.templating.list.map((v) => [v.name, v]));
    if (!vars.bus || vars.bus.multi || vars.bus.includeAll || !/, bus\)$/.test(vars.bus.definition))
      problems.push("no single-valued bus variable over the bus label");
    if (!vars.pod || !/, pod\)$/.test(vars.pod.definition)) problems.push("no pod variable");
    for (const p of d.panels) {
      for (const t of p.targets) {
        if (/instance=~|by \(instance\)|\{\{instance\}\}/.test(`${t.expr} ${t.legendFormat}`))
          problems.push(`panel "${p.title}": by instance, not pod: ${t.expr} ${t.legendFormat}`);
        if (!/bus="\$bus"/.test(t.expr)) problems.push(`panel "${p.title}": not restricted to $bus`);
      }
      const steps = (((p.fieldConfig || {}).defaults || {}).thresholds || {}).steps || [];
      if (p.type === "stat" && steps.length < 2) problems.push(`stat panel "${p.title}": no thresholds`);
    }
    if (problems.length) { console.error(problems.join("\n")); process.exit(1); }
    console.log(`${d.panels.length} panels for one bus, by pod, stats with thresholds`);' "$kDashboard"
}

only_exported_metrics() {
  expressions >"$work/exprs" || return 1
  check_metrics_named_in "$work/exprs"
}

chart_ships_it() {
  "$helm" template mesh charts/mesh-reconciler --namespace mesh-test \
    --set-file records.content=tests/charts/records.json >"$work/off.yaml" || return 1
  if grep -q 'mesh-reconciler-dashboard' "$work/off.yaml"; then
    echo "the dashboard ConfigMap is rendered although monitoring.dashboard.enabled is false"
    return 1
  fi
  "$helm" template mesh charts/mesh-reconciler --namespace mesh-test \
    --set-file records.content=tests/charts/records.json \
    --set monitoring.dashboard.enabled=true --set monitoring.dashboard.annotations.grafana_folder=NATS \
    >"$work/on.yaml" || return 1
  node -e '
    const fs = require("fs");
    const YAML = require(process.argv[1]);
    const docs = YAML.parseAllDocuments(fs.readFileSync(process.argv[2], "utf8")).map((d) => d.toJSON());
    const cm = docs.filter((d) => d && d.kind === "ConfigMap" && d.metadata.name.endsWith("-dashboard"));
    if (cm.length !== 1) { console.error(`${cm.length} dashboard ConfigMaps`); process.exit(1); }
    const m = cm[0].metadata;
    if (m.labels.grafana_dashboard !== "1") { console.error("no grafana_dashboard label"); process.exit(1); }
    if (m.annotations.grafana_folder !== "NATS") { console.error("annotation lost"); process.exit(1); }
    const shipped = cm[0].data["mesh-reconciler.json"];
    const source = fs.readFileSync(process.argv[3], "utf8").replace(/\n$/, "");
    if (shipped !== source) { console.error("the ConfigMap differs from the dashboard file"); process.exit(1); }
    console.log("shipped unchanged in", m.name);' "$yaml_module" "$work/on.yaml" "$kDashboard"
}

run_test "the dashboard is valid JSON with panels and a data-source variable" json_is_valid
run_test "every panel's expression parses (promtool check rules)" every_expression_parses
run_test "made for several replicas: a bus variable, pods by name, stats with thresholds" for_replicas
run_test "every metric named is one the daemon registers, none deprecated" only_exported_metrics
run_test "the chart ships the dashboard for Grafana's sidecar, off by default" chart_ships_it

test_lib_finish
