#!/usr/bin/env bash
# Tests of the Helm chart charts/mesh-reconciler:
#   - helm lint --strict and helm template: default values, a 3-member cluster, monitoring on;
#   - values.schema.json refuses typos and contradictory values;
#   - every rendered manifest is valid for the Kubernetes API (kubernetes-models);
#   - the pod's wiring (tests/charts/assert.mjs): shared users and pid volumes, the init
#     container, probes on the right ports, one UID, restrictive security contexts, cluster
#     routes, monitoring objects, and no secret value outside a Secret;
#   - the rendered nats.conf is accepted by nats-server (-t), TLS included;
#   - the chart's own commands work: the StatefulSet's containers, as rendered, run on loopback
#     (tests/charts/pod.mjs): render-users, nats-server, then `mesh-reconciler run`, which must
#     reconcile that server; then the on-call commands of NOTES.txt;
#   - the same for 3 replicas: three pods laid out side by side (ports of their own, the cluster
#     routes mapped to them), a 3-node cluster, three sidecars with the lease: exactly one holds
#     it, and a deleted stream is recreated by one sidecar alone (one creation advisory; the
#     sidecars' logs show one creator).
#
# Standalone: bash tests/scripts/chart_test.sh (installs helm and node modules into .tools/
# through scripts/install-test-tools.sh). The runtime part needs MESH_BINARY (CTest sets it);
# without it those steps are reported as skipped. A failed runtime step (or
# MESH_KEEP_TEST_DIR=1) leaves the work folder (printed) for a post-mortem.
set -uo pipefail

root="${MESH_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
cd "$root" || exit 1
bash scripts/install-test-tools.sh || { echo "chart_test: cannot install the test tools"; exit 1; }

helm="$root/.tools/bin/helm"
chart="$root/charts/mesh-reconciler"
nats_server="${MESH_NATS_SERVER:-$(command -v nats-server || echo /usr/sbin/nats-server)}"
work="$(mktemp -d "${TMPDIR:-/tmp}/chart-test.XXXXXX")"
keep_work="${MESH_KEEP_TEST_DIR:-0}"  # 1: keep the work folder
pids=()

# Fake secrets: each must end up in Secrets only.
readonly kPassword="fake-reconciler-password-5e1b"
readonly kToken="fake-admin-token-c0d4-7a9e51b3f68d2c40"
readonly kRoutePassword="fake-route-password-93c1d7"
readonly kRecords="$root/tests/charts/records.json"
mapfile -t record_passwords < <(grep -o '"password": *"[^"]*"' "$kRecords" | sed 's/.*: *"\(.*\)"/\1/')

passed=0
failed=0
skipped=0

cleanup() {
  local pid
  for pid in "${pids[@]}"; do stop_pid "$pid"; done
  if [[ $keep_work -eq 0 ]]; then rm -rf "$work"; else echo "chart_test: left $work for a post-mortem"; fi
}
trap cleanup EXIT

# Runs one test: `run_test NAME FUNCTION ARGS...`; its output is shown only when it fails.
run_test() {
  local name="$1"
  shift
  local log="$work/test.log"
  if "$@" >"$log" 2>&1; then
    passed=$((passed + 1))
    echo "ok - $name"
  else
    failed=$((failed + 1))
    echo "not ok - $name"
    sed 's/^/    /' "$log"
  fi
}

skip_test() {
  skipped=$((skipped + 1))
  echo "skip - $1 ($2)"
}

# Polls a command until it succeeds or `seconds` pass.
wait_for() {
  local seconds="$1"
  shift
  local deadline=$((SECONDS + seconds))
  until "$@" >/dev/null 2>&1; do
    ((SECONDS >= deadline)) && return 1
    sleep 0.1
  done
}

stop_pid() {
  local pid="$1"
  kill -0 "$pid" 2>/dev/null || return 0
  kill -TERM "$pid" 2>/dev/null
  local deadline=$((SECONDS + 15))
  while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  return 0
}

render() {  # render OUT [helm args...]
  local out="$1"
  shift
  "$helm" template mesh "$chart" --namespace mesh-test "$@" >"$out"
}

# NOTES.txt is not rendered by `helm template`: render it through tpl in a copy of the chart.
render_notes() {  # render_notes OUT [helm args...]
  local out="$1"
  shift
  local copy="$work/notes-chart"
  if [[ ! -d "$copy" ]]; then
    cp -r "$chart" "$copy" && cp "$chart/templates/NOTES.txt" "$copy/files/notes.tpl" &&
    printf 'notes: |\n{{ tpl (.Files.Get "files/notes.tpl") . | indent 2 }}\n' >"$copy/templates/notes-test.yaml" ||
      return 1
  fi
  "$helm" template mesh "$copy" --namespace mesh-test --show-only templates/notes-test.yaml "$@" |
    node -e 'const YAML = require(process.argv[1]); let t = ""; process.stdin.on("data", (d) => (t += d));
             process.stdin.on("end", () => process.stdout.write(YAML.parse(t).notes));' \
      "$root/.tools/node/node_modules/yaml" >"$out"
}

# The on-call lines of rendered NOTES: "CONTAINER SUBCOMMAND ARGS..." per kubectl exec line.
notes_commands() {
  # shellcheck disable=SC2016  # a literal $POD
  sed -n 's/^ *kubectl -n [^ ]* exec \$POD -c \([a-z-]*\) -- mesh-reconciler \(.*\)$/\1 \2/p' "$1"
}

with_secrets=(--set-file "records.content=$kRecords"
              --set "reconcilerPassword.value=$kPassword" --set "adminToken.value=$kToken"
              --set "routePassword.value=$kRoutePassword")

# --- lint and render ---------------------------------------------------------------------

lint() { "$helm" lint --strict "$chart" "$@"; }

render_and_check() {  # NAME CHECKS-SPEC [helm args...]; CHECKS-SPEC: "pod;cluster 3;monitoring none"
  local name="$1" checks="$2"
  shift 2
  local out="$work/$name.yaml"
  render "$out" "$@" || return 1
  node tests/charts/validate.mjs "$out" || return 1
  local spec
  IFS=';' read -ra specs <<<"$checks"
  for spec in "${specs[@]}"; do
    # shellcheck disable=SC2086
    node tests/charts/assert.mjs "$out" $spec || return 1
  done
}

refused() {  # EXPECTED-TEXT [helm args...]: rendering must fail, saying EXPECTED-TEXT
  local expected="$1"
  shift
  if render "$work/refused.yaml" "$@" 2>"$work/refused.err"; then
    echo "rendered although it should be refused: $*"
    return 1
  fi
  grep -qF -- "$expected" "$work/refused.err" || { echo "refused, but not saying '$expected':"; cat "$work/refused.err"; return 1; }
  echo "refused: $* -> $(grep -F -- "$expected" "$work/refused.err" | head -1)"
}

typos_refused() {
  refused "Additional property replica is not allowed" --set replica=3 &&
  refused "Additional property imag is not allowed" --set nats.imag.tag=2.10 &&
  refused "Additional property enabeld is not allowed" --set monitoring.enabeld=true &&
  refused "Additional property request is not allowed" --set reconciler.resources.request.cpu=1 &&
  refused "Additional property existingSecrets is not allowed" --set records.existingSecrets=x &&
  refused "replicas must be one of the following" --set replicas=2 &&
  refused "Invalid type. Expected: boolean" --set reconciler.prune=yes &&
  refused "monitoring.scrape must be one of the following" --set monitoring.scrape=Probe &&
  refused "reconciler.usersFile must be one of the following" --set reconciler.usersFile=off &&
  refused "Additional property automount is not allowed" --set serviceAccount.automount=true &&
  refused "Additional property extraContainer is not allowed" --set 'extraContainer[0].name=x' &&
  refused "Additional property extraEnvs is not allowed" --set 'nats.extraEnvs[0].name=x' &&
  refused "imagePullSecrets.0: name is required" --set 'imagePullSecrets[0].nam=x' &&
  refused "Additional property patches is not allowed" --set 'podTemplate.patches[0].op=add' &&
  refused "op must be one of the following" --set 'nats.patch[0].op=move' --set 'nats.patch[0].path=/env' &&
  refused "service.type must be one of the following" --set service.type=ExternalName &&
  refused "Additional property podAffinty is not allowed" --set affinity.podAffinty.x=y &&
  refused "Additional property enable is not allowed" --set helmTest.enable=false
}

# A patch that names what is not there fails the render, saying which value and where.
patches_checked() {
  refused 'podTemplate.patch /spec/nothing/x: no "nothing"' \
    --set 'podTemplate.patch[0].op=add' --set 'podTemplate.patch[0].path=/spec/nothing/x' --set 'podTemplate.patch[0].value=1' &&
  refused 'nats.patch /ports/9: index 9 out of range' \
    --set 'nats.patch[0].op=remove' --set 'nats.patch[0].path=/ports/9' &&
  refused 'reconciler.patch /nope: no "nope" to replace' \
    --set 'reconciler.patch[0].op=replace' --set 'reconciler.patch[0].path=/nope' --set 'reconciler.patch[0].value=1'
}

# The helm test Pod: rendered by default (checked with the extension points), with TLS it uses
# tls:// and the CA; none with helmTest.enabled false.
helm_test_rendered() {
  local out="$work/helm-test.yaml"
  render "$out" --set tls.enabled=true --set tls.existingSecret=mesh-tls || return 1
  node tests/charts/assert.mjs "$out" helm-test || return 1
  grep -A1 'MESH_RECONCILER_CA_FILE' "$out" | grep -q '/etc/nats-tls/ca.crt' || { echo "no CA for the helm test with TLS"; return 1; }
  render "$out" --set helmTest.enabled=false || return 1
  if grep -q 'helm.sh/hook: test' "$out"; then echo "a helm test Pod with helmTest.enabled false"; return 1; fi
  echo "helm test Pod with TLS; none when disabled"
}

contradictions_refused() {
  refused "records: set either content or existingSecret, not both" \
    --set records.content=x --set records.existingSecret=y &&
  refused "adminToken: set either value or existingSecret, not both" \
    --set adminToken.value=x --set adminToken.existingSecret=y &&
  refused "adminToken.value: shorter than 32 characters" --set adminToken.value=short-token &&
  refused "tls.existingSecret is required when tls.enabled" --set tls.enabled=true &&
  refused "routePassword: set either value or existingSecret, not both" --set replicas=3 \
    --set routePassword.value=x --set routePassword.existingSecret=y &&
  refused "routePassword.value: Does not match pattern" --set 'routePassword.value=a@b' &&
  refused "routes.tls.secretName (or tls.existingSecret) is required" --set replicas=3 --set routes.tls.enabled=true
}

secrets_confined() {
  local out="$work/secrets.yaml" out3="$work/secrets-3.yaml"
  render "$out" "${with_secrets[@]}" || return 1
  node tests/charts/assert.mjs "$out" confined "$kPassword" "$kToken" "${record_passwords[@]}" || return 1
  # With 3 replicas the route password too (in the route URLs through $(MESH_ROUTE_PASSWORD)).
  render "$out3" "${with_secrets[@]}" --set replicas=3 || return 1
  grep -q 'route-password:' "$out3" || { echo "no route-password in the credentials Secret"; return 1; }
  node tests/charts/assert.mjs "$out3" confined "$kPassword" "$kToken" "$kRoutePassword" "${record_passwords[@]}"
}

# The route password is generated into the chart's Secret when none is given, and only with
# more than one replica and routes.authorization.
route_password_generated() {
  local out="$work/route-generated.yaml"
  render "$out" --set replicas=3 || return 1
  grep -q '^  route-password: [A-Za-z0-9+/=]\{40,\}$' "$out" || { echo "no generated route-password"; return 1; }
  render "$out" || return 1
  if grep -q 'route-password\|MESH_ROUTE' "$out"; then echo "one replica, yet a route credential"; return 1; fi
  render "$out" --set replicas=3 --set routes.authorization=false || return 1
  if grep -q 'route-password\|MESH_ROUTE' "$out"; then echo "routes.authorization false, yet a route credential"; return 1; fi
  render "$out" --set replicas=3 --set routePassword.existingSecret=cp-routes --set routePassword.key=pw || return 1
  if grep -q 'route-password:' "$out"; then echo "routePassword.existingSecret, yet the chart's Secret holds one"; return 1; fi
  grep -A1 'name: cp-routes' "$out" | grep -q 'key: pw' || { echo "the existing route Secret is not referenced"; return 1; }
  echo "generated with 3 replicas; none with one, with routes.authorization false, or with an existing Secret"
}

existing_secrets_used() {
  local out="$work/existing.yaml"
  render "$out" --set records.existingSecret=cp-records --set records.key=mesh.json \
    --set reconcilerPassword.existingSecret=cp-credentials --set reconcilerPassword.key=pw \
    --set adminToken.existingSecret=cp-credentials --set adminToken.key=admin || return 1
  node tests/charts/validate.mjs "$out" || return 1
  if grep -q '^kind: Secret' "$out"; then echo "a Secret is rendered although all are existing"; return 1; fi
  # shellcheck disable=SC2016  # JavaScript
  node -e '
    const [file] = process.argv.slice(1);
    const text = require("fs").readFileSync(file, "utf8");
    for (const want of ["name: cp-records", "key: mesh.json", "name: cp-credentials", "key: pw", "key: admin"]) {
      if (!text.includes(want)) { console.error(`missing "${want}"`); process.exit(1); }
    }
    console.log("existing Secrets and keys are referenced");' "$out"
}

# nats-server accepts the rendered nats.conf (-t: check it and exit).
nats_config_valid() {  # NAME [extra manifests...] -- [helm args...]
  local name="$1"
  shift
  local extra=()
  while [[ $# -gt 0 && "$1" != "--" ]]; do extra+=(--extra "$1"); shift; done
  shift
  local out="$work/conf-$name.yaml" dir="$work/conf-$name"
  render "$out" "${with_secrets[@]}" "$@" || return 1
  node tests/charts/pod.mjs "$out" --root "$dir" --bin mesh-reconciler=/bin/false \
    --bin "nats-server=$nats_server" --bin sh=/bin/false "${extra[@]}" || return 1
  # The users file the init container would write (any valid one will do for -t); none with
  # reconciler.usersFile: none.
  # shellcheck disable=SC2016  # a literal bcrypt hash
  [[ ! -d "$dir/etc/nats-users" ]] ||
    printf 'accounts { MESH { jetstream: enabled, users: [ {user: stub, password: "%s"} ] } }\n' \
      '$2a$11$PWIFAL8RsWyGI3jVZtO9Nu8.6jOxzxfZo7c/W0eLk017hjgUKWrhy' >"$dir/etc/nats-users/users.conf"
  "$dir/run/nats.sh" -t
}

make_tls_secret() {  # OUT: a kubernetes.io/tls Secret "mesh-tls" for 127.0.0.1, with ca.crt
  local dir="$work/tls"
  mkdir -p "$dir"
  (
    cd "$dir" &&
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
      -subj /CN=mesh-test-ca -keyout ca.key -out ca.crt &&
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj /CN=mesh \
      -keyout tls.key -out tls.csr &&
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' >san.ext &&
    openssl x509 -req -in tls.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 \
      -extfile san.ext -out tls.crt
  ) >/dev/null 2>&1 || { echo "openssl failed"; return 1; }
  {
    printf 'apiVersion: v1\nkind: Secret\nmetadata:\n  name: mesh-tls\ntype: kubernetes.io/tls\ndata:\n'
    for key in tls.crt tls.key ca.crt; do printf '  %s: %s\n' "$key" "$(base64 -w0 "$dir/$key")"; done
  } >"$1"
}

route_tls_config_valid() {
  make_tls_secret "$work/tls-secret.yaml" || return 1
  nats_config_valid route-tls "$work/tls-secret.yaml" -- --set replicas=3 --set routes.tls.enabled=true \
    --set routes.tls.secretName=mesh-tls
}

tls_config_valid() {
  make_tls_secret "$work/tls-secret.yaml" || return 1
  nats_config_valid tls "$work/tls-secret.yaml" -- --set tls.enabled=true --set tls.existingSecret=mesh-tls
}

notes_name_the_oncall_commands() {
  local notes="$work/notes.txt" out="$work/notes-sts.yaml"
  render_notes "$notes" --set reconciler.port=9999 || return 1
  render "$out" --set reconciler.port=9999 || return 1
  local token_file
  token_file="$(grep -A1 -- '- --token-file' "$out" | tail -1 | sed 's/^ *- *//')"
  local sub ok=0
  for sub in plan reconcile hold release; do
    local line
    line="$(notes_commands "$notes" | grep "^mesh-reconciler $sub\b")" ||
      { echo "NOTES.txt has no '$sub' command"; ok=1; continue; }
    echo "$line"
    # As typed after kubectl exec: the sidecar's environment names its daemon and token
    # (MESH_RECONCILER_REMOTE, _TOKEN_FILE; tests/charts/assert.mjs checks them).
    if grep -qE -- '--(remote|token-file)' <<<"$line"; then
      echo "'$sub' carries --remote/--token-file: the sidecar's environment has them"; ok=1
    fi
  done
  grep -qF -- "value: \"http://127.0.0.1:9999\"" "$out" ||
    { echo "the sidecar's MESH_RECONCILER_REMOTE does not name port 9999"; ok=1; }
  grep -qF -- "value: $token_file" "$out" ||
    { echo "the sidecar's MESH_RECONCILER_TOKEN_FILE is not $token_file"; ok=1; }
  return $ok
}

# The overlay for the official NATS chart (examples/official-nats-chart-values.yaml): valid YAML,
# only keys of the official values.yaml, rendered by tests/charts/official.mjs's stand-in of that
# chart's merge/patch mechanism, then `nats-server -t` on the nats.conf it gives, beside the
# operator's own account, with the mesh's account file rendered by the real binary
# (--users-scope account; a stub entry when MESH_BINARY is not set). official_chart below runs
# the official chart itself; what is left unproven is in docs/kubernetes.md.
official_overlay() {
  local dir="$work/official" users
  node tests/charts/official.mjs examples/official-nats-chart-values.yaml --root "$dir" \
    --values tests/charts/official-own-account.yaml || return 1
  users="$dir/etc/nats-users/mesh-account.conf"
  if [[ -n "${MESH_BINARY:-}" ]]; then
    MESH_RECONCILER_PASSWORD="$kPassword" "$MESH_BINARY" render-users "$kRecords" --users-scope account \
      --lease --bcrypt-cost 4 --out "$users" || return 1
  else
    # shellcheck disable=SC2016  # a literal bcrypt hash
    printf 'MESH: { jetstream: enabled, users: [ {user: stub, password: "%s"} ] }\n' \
      '$2a$11$PWIFAL8RsWyGI3jVZtO9Nu8.6jOxzxfZo7c/W0eLk017hjgUKWrhy' >"$users"
  fi
  if grep -q '^accounts' "$users"; then echo "the account-scoped file has an accounts block"; return 1; fi
  "$nats_server" -t -c "$dir/etc/nats-config/nats.conf"
}

# The overlay states the image and the lease once (anchors), and its generated monitoring part
# is current with the chart's rules and dashboard.
official_overlay_once() {
  local file=examples/official-nats-chart-values.yaml count
  for pattern in 'mesh-reconciler:[0-9]' 'MESH_RECONCILER_LEASE'; do
    count="$(grep -v '^ *#' "$file" | grep -c -- "$pattern")"
    [[ "$count" == 1 ]] || { echo "$file states '$pattern' $count times, expected once"; return 1; }
  done
  node tests/charts/overlay-monitoring.mjs --check
}

run_test "official NATS chart overlay: valid, documented keys, stand-in render, nats-server -t" official_overlay
run_test "official NATS chart overlay: image and lease stated once; rules and dashboard current" official_overlay_once

# The same overlay through the official chart itself (the vendored release 1.3.16, rendered by
# helm): the pod and nats.conf it produces are checked as the stand-in's are, and nats-server
# -t accepts that nats.conf beside the mesh's account file.
official_chart() {
  local dir="$work/official-chart" users out="$work/official-chart.yaml"
  "$helm" template nats tests/charts/vendor/nats-1.3.16 --namespace mesh-test \
    -f examples/official-nats-chart-values.yaml -f tests/charts/official-own-account.yaml >"$out" || return 1
  node tests/charts/official.mjs examples/official-nats-chart-values.yaml --root "$dir" \
    --values tests/charts/official-own-account.yaml --rendered "$out" || return 1
  users="$dir/etc/nats-users/mesh-account.conf"
  if [[ -n "${MESH_BINARY:-}" ]]; then
    MESH_RECONCILER_PASSWORD="$kPassword" "$MESH_BINARY" render-users "$kRecords" --users-scope account \
      --lease --bcrypt-cost 4 --out "$users" || return 1
  else
    # shellcheck disable=SC2016  # a literal bcrypt hash
    printf 'MESH: { jetstream: enabled, users: [ {user: stub, password: "%s"} ] }\n' \
      '$2a$11$PWIFAL8RsWyGI3jVZtO9Nu8.6jOxzxfZo7c/W0eLk017hjgUKWrhy' >"$users"
  fi
  # The chart's nats.conf names the server from the pod's environment.
  SERVER_NAME=nats-0 "$nats_server" -t -c "$dir/etc/nats-config/nats.conf" || return 1
  # Its monitoring (extraResources): the PodMonitor sets the job the rules select and bus (the
  # release "nats"); the rules and the dashboard are the chart's.
  node tests/charts/assert.mjs "$out" official-monitoring nats
}

run_test "official NATS chart 1.3.16 itself (vendored) renders the overlay: same wiring, nats-server -t, its PodMonitor/rules/dashboard" official_chart
run_test "helm lint --strict: default values" lint
run_test "helm lint --strict: 3-member cluster" lint --set replicas=3
run_test "helm lint --strict: monitoring enabled" lint --set monitoring.enabled=true
run_test "render: default values" render_and_check default "pod;cluster 1;monitoring none"
run_test "render: 3-member cluster" render_and_check cluster "pod;cluster 3;monitoring none" --set replicas=3
run_test "render: 3-member cluster, routes.authorization false (open routes)" render_and_check open \
  "pod;cluster 3 open" --set replicas=3 --set routes.authorization=false
run_test "render: monitoring with a PodMonitor and the Grafana dashboard" render_and_check podmonitor \
  "pod;monitoring PodMonitor" --set monitoring.enabled=true --set monitoring.dashboard.enabled=true
run_test "render: monitoring with a ServiceMonitor and a runbook base URL" render_and_check servicemonitor \
  "pod;monitoring ServiceMonitor https://git.example.com/mesh/mesh-reconciler/-/blob/main" \
  --set monitoring.enabled=true --set monitoring.scrape=ServiceMonitor \
  --set monitoring.rules.runbookBaseUrl=https://git.example.com/mesh/mesh-reconciler/-/blob/main
run_test "render: TLS, 5 members, prune, scheduling values, records from the values" render_and_check tls \
  "pod;cluster 5" --set tls.enabled=true --set tls.existingSecret=mesh-tls --set replicas=5 \
  --set reconciler.prune=true --set podAntiAffinity=hard --set nodeSelector.disk=ssd \
  --set 'tolerations[0].key=dedicated' --set 'tolerations[0].operator=Equal' \
  --set 'tolerations[0].value=mesh' --set 'tolerations[0].effect=NoSchedule' \
  --set priorityClassName=mesh-critical --set nats.storage.storageClassName=fast \
  --set podLabels.team=mesh --set podAnnotations.note=x "${with_secrets[@]}"
run_test "render: no pod anti-affinity" render_and_check noaffinity "pod" --set podAntiAffinity=none
run_test "render: pull secrets, ServiceAccount, extra containers, volumes, env, nats.conf merge, the official chart's extension points (ports, Service, scheduling, patches, helm test)" \
  render_and_check extras "pod;extras" -f tests/charts/extras-values.yaml
run_test "render: JetStream only (usersFile none), 3 members with the lease" render_and_check jsonly \
  "jetstream-only;cluster 3" -f tests/charts/jetstream-only-values.yaml --set replicas=3
run_test "values: typos are refused by values.schema.json" typos_refused
run_test "values: contradictions are refused" contradictions_refused
run_test "values: a JSON patch naming what is not there is refused, naming the value" patches_checked
run_test "render: the helm test Pod (plan against the client Service), with TLS; none when disabled" helm_test_rendered
run_test "secrets: fake password, token and records passwords appear in Secrets only" secrets_confined
run_test "secrets: existing Secrets are used instead of the chart's" existing_secrets_used
run_test "secrets: the route password is generated with 3 replicas only, unless given" route_password_generated
run_test "nats-server -t accepts nats.conf: standalone" nats_config_valid standalone --
run_test "nats-server -t accepts nats.conf: 3-member cluster" nats_config_valid cluster -- --set replicas=3
run_test "nats-server -t accepts nats.conf: TLS" tls_config_valid
run_test "nats-server -t accepts nats.conf: 3 members, routes with TLS" route_tls_config_valid
run_test "nats-server -t accepts nats.conf: extension points (nats.extraConfig)" nats_config_valid extras \
  tests/charts/extras-manifests.yaml -- \
  -f tests/charts/extras-values.yaml
run_test "nats-server -t accepts nats.conf: JetStream only, the operator's accounts" nats_config_valid jsonly -- \
  -f tests/charts/jetstream-only-values.yaml
run_test "NOTES.txt names the on-call commands, as typed in the sidecar (its env names its daemon)" notes_name_the_oncall_commands

# --- runtime: the chart's own commands ---------------------------------------------------

rt="$work/runtime"
nats_request="${MESH_BUILD_DIR:-$(dirname "${MESH_BINARY:-.}")}/mesh-nats-request"
client_port=""
metrics_url=""
monitor_url=""

free_ports() {  # N distinct free loopback ports, below the kernel's ephemeral range (32768 up),
  # so that no outgoing connection of a test running alongside can be given one before it is bound
  node -e '
    const net = require("net");
    const servers = [];
    const next = () => {
      if (servers.length === Number(process.argv[1])) {
        console.log(servers.map((s) => s.address().port).join(" "));
        servers.forEach((s) => s.close());
        return;
      }
      const s = net.createServer();
      s.once("error", next);  // taken: try another
      s.listen(10000 + Math.floor(Math.random() * 22000), "127.0.0.1", () => {
        servers.push(s);
        next();
      });
    };
    next();' "$1"
}

http_ok() { curl -fsS -o /dev/null --max-time 2 "$1"; }

metric_is() {  # NAME VALUE: a sample of NAME (any labels) has VALUE
  local body  # the whole body first: `curl | grep -q` fails under pipefail when grep exits early
  body="$(curl -fsS --max-time 2 "$metrics_url/metrics")" || return 1
  grep -Eq "^$1(\{[^}]*\})? $2(\.0+)?( |$)" <<<"$body"
}

rt_layout() {
  local ports
  read -ra ports <<<"$(free_ports 4)" || return 1
  client_port="${ports[0]}"
  monitor_url="http://127.0.0.1:${ports[1]}"
  metrics_url="http://127.0.0.1:${ports[3]}"
  render "$rt.yaml" "${with_secrets[@]}" --set "nats.ports.client=${ports[0]}" \
    --set "nats.ports.monitor=${ports[1]}" --set "nats.ports.cluster=${ports[2]}" \
    --set "reconciler.port=${ports[3]}" --set reconciler.interval=1s || return 1
  render_notes "$rt.notes" --set "reconciler.port=${ports[3]}" || return 1
  node tests/charts/pod.mjs "$rt.yaml" --root "$rt" --bin "mesh-reconciler=$MESH_BINARY" \
    --bin "nats-server=$nats_server"
}

rt_init() {
  "$rt/run/render-users.sh" || { echo "render-users exited $?"; return 1; }
  local users="$rt/etc/nats-users/users.conf"
  [[ -s "$users" ]] || { echo "render-users wrote no $users"; return 1; }
  local mode
  mode="$(stat -c %a "$users")"
  [[ "$mode" == 600 ]] || { echo "users file mode $mode, expected 600"; return 1; }
  local secret
  for secret in "$kPassword" "${record_passwords[@]}"; do
    if grep -qF -- "$secret" "$users"; then echo "a plain password is in the users file"; return 1; fi
  done
  sha256sum "$users" | cut -d' ' -f1 >"$rt/users.sha256"
  echo "users file rendered ($(wc -c <"$users") bytes)"
}

rt_nats() {
  "$rt/run/nats.sh" >"$rt/nats.log" 2>&1 &
  local pid=$!
  pids+=("$pid")
  echo "$pid" >"$rt/nats.pid.started"
  wait_for 30 http_ok "$monitor_url/healthz" || { echo "nats-server not healthy"; tail -20 "$rt/nats.log"; return 1; }
  local pid_file="$rt/var/run/nats/nats.pid"
  wait_for 10 test -s "$pid_file" || { echo "no pid file $pid_file"; return 1; }
  [[ "$(cat "$pid_file")" == "$pid" ]] || { echo "pid file holds $(cat "$pid_file"), nats-server is $pid"; return 1; }
  echo "nats-server $pid healthy, pid file shared"
}

rt_sidecar() {
  "$rt/run/mesh-reconciler.sh" >"$rt/sidecar.log" 2>&1 &
  local pid=$!
  pids+=("$pid")
  echo "$pid" >"$rt/sidecar.pid.started"
  wait_for 30 http_ok "$metrics_url/healthz" || { echo "/healthz not 200"; tail -20 "$rt/sidecar.log"; return 1; }
  wait_for 60 http_ok "$metrics_url/readyz" || {
    echo "/readyz not 200: $(curl -sS --max-time 2 "$metrics_url/readyz")"; tail -20 "$rt/sidecar.log"; return 1; }
  echo "sidecar healthy and ready"
}

plan_converged() { "$rt/run/mesh-reconciler.sh" plan >"$rt/plan.out" 2>&1; }

rt_converges() {
  if ! wait_for 90 plan_converged; then
    echo "plan did not exit 0 within 90s; last output:"
    cat "$rt/plan.out"
    tail -20 "$rt/sidecar.log"
    return 1
  fi
  http_ok "$metrics_url/drift" || { echo "GET /drift failed"; return 1; }
  local now
  now="$(sha256sum "$rt/etc/nats-users/users.conf" | cut -d' ' -f1)"
  [[ "$now" == "$(cat "$rt/users.sha256")" ]] ||
    { echo "the sidecar rewrote the users file the init container rendered from the same records"; return 1; }
  echo "converged: plan exits 0; users file unchanged since the init container"
}

# The `helm test` Pod, laid out with the client Service's name mapped to the pod's client port.
rt_helm_test_layout() {
  local client="$client_port"
  node tests/charts/pod.mjs "$rt.yaml" --root "$rt-test" --pod mesh-mesh-reconciler-test-plan \
    --host "mesh-mesh-reconciler.mesh-test.svc.cluster.local:$client=127.0.0.1:$client" \
    --bin "mesh-reconciler=$MESH_BINARY" >/dev/null
}

# helm test: 0 on the converged bus; 2 (naming the stream) while the sidecar is held and a
# stream is deleted; then released, the sidecar repairs it.
# shellcheck disable=SC2016  # the subjects are literal, $JS included
rt_helm_test() {
  rt_helm_test_layout || return 1
  "$rt-test/run/plan.sh" >"$rt-test.out" 2>&1 || { echo "helm test exited $? on a converged bus:"; cat "$rt-test.out"; return 1; }
  "$rt/run/mesh-reconciler.sh" hold >/dev/null 2>&1 || { echo "hold failed"; return 1; }
  wait_for 10 metric_is mesh_reconciler_held 1 || { echo "not held"; return 1; }
  [[ -x "$nats_request" ]] || { echo "no $nats_request: build the mesh-nats-request target"; return 1; }
  MESH_RECONCILER_PASSWORD="$kPassword" "$nats_request" --bus "nats://127.0.0.1:$client_port" \
    '$JS.API.STREAM.DELETE.EVENTS' | grep -q '"success":true' || { echo "could not delete EVENTS"; return 1; }
  "$rt-test/run/plan.sh" >"$rt-test.out" 2>&1
  local status=$?
  "$rt/run/mesh-reconciler.sh" release >/dev/null 2>&1 || { echo "release failed"; return 1; }
  [[ $status -eq 2 ]] || { echo "helm test exited $status with EVENTS deleted, expected 2:"; cat "$rt-test.out"; return 1; }
  grep -q 'EVENTS' "$rt-test.out" || { echo "the drift output does not name EVENTS:"; cat "$rt-test.out"; return 1; }
  wait_for 60 "$rt-test/run/plan.sh" || { echo "helm test still fails 60 s after the release"; return 1; }
  echo "helm test: 0 converged; 2 naming EVENTS while it was deleted and the sidecar held; 0 after the repair"
}

rt_metrics() {
  local name
  for name in "mesh_reconciler_bus_connected 1" "mesh_reconciler_records_valid 1" "mesh_reconciler_held 0"; do
    # shellcheck disable=SC2086
    metric_is $name || { echo "metric not as expected: $name"; return 1; }
  done
  # The whole body first: `curl | grep -q` fails under pipefail when grep stops reading early.
  local body
  body="$(curl -fsS --max-time 2 "$metrics_url/metrics")" || { echo "GET /metrics failed"; return 1; }
  grep -q '^mesh_reconciler_build_info{' <<<"$body" || { echo "no mesh_reconciler_build_info"; return 1; }
  echo "metrics: connected, records valid, not held"
}

rt_oncall() {
  local code
  code="$(curl -sS -o /dev/null -w '%{http_code}' -X POST --max-time 5 "$metrics_url/reconcile")"
  [[ "$code" == 401 ]] || { echo "POST /reconcile without the token: $code, expected 401"; return 1; }
  # The kubectl exec lines of NOTES.txt, run in the container they name (paths mapped).
  local container sub args seen=""
  while read -r container sub args; do
    # As a shell reads the line: `--reason "$USER: why"` is one argument (split on blanks, its
    # second word was a stray argument, which the CLI refuses since issue 37).
    USER="${USER:-chart_test}" eval "\"\$rt/run/\$container.sh\" \"\$sub\" $args" \
      >"$rt/oncall-$sub.out" 2>&1 ||
      { echo "NOTES command '$sub $args' exited $?:"; cat "$rt/oncall-$sub.out"; return 1; }
    case "$sub" in
      hold) wait_for 10 metric_is mesh_reconciler_held 1 || { echo "mesh_reconciler_held is not 1 after hold"; return 1; } ;;
      release) wait_for 10 metric_is mesh_reconciler_held 0 || { echo "mesh_reconciler_held is not 0 after release"; return 1; } ;;
    esac
    seen+="$sub "
  done < <(notes_commands "$rt.notes")
  [[ "$seen" == "plan reconcile hold release " ]] || { echo "ran '$seen', expected plan reconcile hold release"; return 1; }
  echo "NOTES.txt commands work: $seen"
}

rt_sigterm() {
  local pid
  pid="$(cat "$rt/sidecar.pid.started")"
  kill -TERM "$pid"
  local deadline=$((SECONDS + 15))
  while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.1; done
  if kill -0 "$pid" 2>/dev/null; then echo "the sidecar ignores SIGTERM"; return 1; fi
  wait "$pid"
  local status=$?
  [[ $status -eq 0 ]] || { echo "the sidecar exited $status on SIGTERM, expected 0"; return 1; }
  echo "the sidecar stops on SIGTERM with status 0"
}

# shellcheck disable=SC2034  # read through run_steps' nameref
runtime_steps=(
  "rt_layout:runtime: lay out the rendered pod (free ports, records and secrets from the manifests)"
  "rt_init:runtime: init container render-users writes the users file (mode 600, hashes only)"
  "rt_nats:runtime: container nats starts with the rendered nats.conf and writes the shared pid file"
  "rt_sidecar:runtime: container mesh-reconciler (run) answers /healthz and /readyz"
  "rt_converges:runtime: the sidecar reconciles its server (plan exits 0)"
  "rt_helm_test:runtime: the helm test Pod's plan exits 0 on the converged bus, 2 on drift"
  "rt_metrics:runtime: /metrics reports the bus connected and the records valid"
  "rt_oncall:runtime: on-call commands of NOTES.txt (reconcile, hold, release; token required)"
  "rt_sigterm:runtime: the sidecar stops cleanly on SIGTERM"
)

# Runs a chain of steps, each "FUNCTION:NAME", in order: after the first failure the rest are
# skipped, the work folder is kept and the tails of LOGS (patterns, expanded then) are shown.
run_steps() {  # run_steps STEPS_ARRAY_NAME LOG_PATTERN...
  local -n steps="$1"
  shift
  local entry name broken="" before pattern log
  if [[ -z "${MESH_BINARY:-}" ]]; then
    for entry in "${steps[@]}"; do skip_test "${entry#*:}" "MESH_BINARY is not set"; done
    return
  fi
  if [[ ! -x "$MESH_BINARY" ]]; then
    for entry in "${steps[@]}"; do
      failed=$((failed + 1))
      echo "not ok - ${entry#*:}"
    done
    echo "    MESH_BINARY=$MESH_BINARY is not an executable: build the mesh-reconciler target"
    return
  fi
  for entry in "${steps[@]}"; do
    name="${entry#*:}"
    if [[ -n "$broken" ]]; then
      skip_test "$name" "needs: $broken"
      continue
    fi
    before=$failed
    run_test "$name" "${entry%%:*}"
    if ((failed > before)); then
      broken="$name"
      keep_work=1
      for pattern in "$@"; do
        # shellcheck disable=SC2086  # a pattern, expanded here
        for log in $pattern; do
          [[ -s "$log" ]] && { echo "    --- tail of $log"; tail -15 "$log" | sed 's/^/    /'; }
        done
      done
    fi
  done
}

run_steps runtime_steps "$rt/nats.log" "$rt/sidecar.log"

# --- runtime: three replicas on a 3-node cluster, one writer ------------------------------
# Each pod is rendered with ports of its own (on loopback they share one address) and laid out
# with its ordinal; the cluster routes' pod DNS names are mapped to the other pods' ports.

rt3="$work/runtime3"
rt3_pods=(0 1 2)
rt3_client=() rt3_monitor=() rt3_cluster=() rt3_metrics=()
kSts="mesh-mesh-reconciler"
kRouteHost="mesh-mesh-reconciler-headless.mesh-test.svc.cluster.local"

rt3_layout() {
  local ports i j
  read -ra ports <<<"$(free_ports 12)" || return 1
  for i in "${rt3_pods[@]}"; do
    rt3_client[i]="${ports[4 * i]}" rt3_monitor[i]="${ports[4 * i + 1]}"
    rt3_cluster[i]="${ports[4 * i + 2]}" rt3_metrics[i]="${ports[4 * i + 3]}"
  done
  for i in "${rt3_pods[@]}"; do
    render "$rt3-$i.yaml" "${with_secrets[@]}" --set replicas=3 \
      --set "nats.ports.client=${rt3_client[i]}" --set "nats.ports.monitor=${rt3_monitor[i]}" \
      --set "nats.ports.cluster=${rt3_cluster[i]}" --set "reconciler.port=${rt3_metrics[i]}" \
      --set reconciler.interval=1s || return 1
    local hosts=()
    for j in "${rt3_pods[@]}"; do
      hosts+=(--host "$kSts-$j.$kRouteHost:${rt3_cluster[i]}=127.0.0.1:${rt3_cluster[j]}")
    done
    node tests/charts/pod.mjs "$rt3-$i.yaml" --root "$rt3/pod-$i" --ordinal "$i" "${hosts[@]}" \
      --bin "mesh-reconciler=$MESH_BINARY" --bin "nats-server=$nats_server" || return 1
    grep -q "MESH_RECONCILER_LEASE='1'" "$rt3/pod-$i/run/mesh-reconciler.sh" ||
      { echo "pod $i: the sidecar does not run with the lease"; return 1; }
  done
  [[ -x "$nats_request" ]] || { echo "no $nats_request: build the mesh-nats-request target"; return 1; }
}

rt3_cluster_up() {
  local i
  for i in "${rt3_pods[@]}"; do
    "$rt3/pod-$i/run/render-users.sh" >"$rt3/init-$i.log" 2>&1 ||
      { echo "pod $i: render-users exited $?"; cat "$rt3/init-$i.log"; return 1; }
  done
  rt3_start_all nats nats 90 rt3_monitor || return 1
  rt3_start_all mesh-reconciler sidecar 30 rt3_metrics || return 1
  echo "3 nats-servers healthy, 3 sidecars alive"
}

# Starts CONTAINER in every pod (its output in LOG-<pod>.log), then waits up to SECONDS for
# each pod's /healthz on its port in the array named PORTS.
rt3_start_all() {  # CONTAINER LOG SECONDS PORTS
  local container="$1" log="$2" seconds="$3" i
  local -n port_of="$4"
  for i in "${rt3_pods[@]}"; do
    "$rt3/pod-$i/run/$container.sh" >"$rt3/$log-$i.log" 2>&1 &
    pids+=("$!")
  done
  for i in "${rt3_pods[@]}"; do
    wait_for "$seconds" http_ok "http://127.0.0.1:${port_of[i]}/healthz" ||
      { echo "pod $i: $container /healthz not 200"; tail -20 "$rt3/$log-$i.log"; return 1; }
  done
}

# 2.10.27 sometimes leaves one member outside the meta group at formation (docs/faults.md): the
# leader never adds it, and every 3-replica create (the lease's KV bucket among them) fails for
# as long as anyone waits. Not the chart's to fix; as the C++ fixture does (RequireFormed), a
# member still outside 10 s after the cluster is healthy is restarted once, and named.
rt3_left_out() {  # prints the pods the meta leader does not count; fails while no leader knows
  local ports=() i
  for i in "${rt3_pods[@]}"; do ports+=("${rt3_monitor[i]}"); done
  # shellcheck disable=SC2016  # JavaScript, not shell
  node -e '
    const ports = process.argv.slice(1);
    const get = async (port, path) => (await fetch(`http://127.0.0.1:${port}${path}`)).json();
    (async () => {
      const names = await Promise.all(ports.map(async (p) => (await get(p, "/varz")).server_name));
      for (const port of ports) {
        const meta = (await get(port, "/jsz")).meta_cluster ?? {};
        const index = names.indexOf(meta.leader);
        if (index < 0 || ports[index] !== port || !Array.isArray(meta.replicas)) continue;
        const counted = new Set([meta.leader, ...meta.replicas.map((r) => r.name)]);
        console.log(names.map((n, i) => (counted.has(n) ? null : i)).filter((i) => i !== null).join(" "));
        return;
      }
      process.exit(1);
    })().catch(() => process.exit(1));' "${ports[@]}"
}

rt3_all_in() { local out; out="$(rt3_left_out)" && [[ -z "$out" ]]; }

rt3_formed() {
  wait_for 30 rt3_left_out || { echo "no meta leader answers for the cluster"; return 1; }
  if wait_for 10 rt3_all_in; then echo "every member is in the meta group"; return 0; fi
  local out i pid
  out="$(rt3_left_out)" || { echo "no meta leader answers for the cluster"; return 1; }
  for i in $out; do
    echo "pod $i is outside the meta group 10 s after the cluster was healthy: restarting its nats-server once" >&2
    pid="$(cat "$(find "$rt3/pod-$i" -name '*.pid' | head -1)")" || return 1
    kill "$pid" && while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
    "$rt3/pod-$i/run/nats.sh" >>"$rt3/nats-$i.log" 2>&1 &
    pids+=("$!")
    wait_for 60 http_ok "http://127.0.0.1:${rt3_monitor[i]}/healthz" || { echo "pod $i: not healthy after its restart"; return 1; }
  done
  wait_for 20 rt3_all_in || { echo "still outside the meta group: $(rt3_left_out)"; return 1; }
  echo "every member is in the meta group (after restarting pod $out)"
}

rt3_holders() {  # prints how many sidecars report mesh_reconciler_lease_holder 1
  local i body n=0
  for i in "${rt3_pods[@]}"; do
    body="$(curl -fsS --max-time 2 "http://127.0.0.1:${rt3_metrics[i]}/metrics")" || return 1
    grep -Eq '^mesh_reconciler_lease_holder 1(\.0+)?$' <<<"$body" && n=$((n + 1))
  done
  echo "$n"
}
one_holder_converged() {
  [[ "$(rt3_holders)" == 1 ]] && "$rt3/pod-0/run/mesh-reconciler.sh" plan >"$rt3/plan.out" 2>&1
}

rt3_one_writer() {
  if ! wait_for 120 one_holder_converged; then
    echo "not one holder and converged within 120 s: holders $(rt3_holders); plan said:"
    cat "$rt3/plan.out"
    local i
    for i in "${rt3_pods[@]}"; do echo "--- sidecar $i"; tail -8 "$rt3/sidecar-$i.log"; done
    return 1
  fi
  echo "one lease holder of three; plan (pod 0, which is not necessarily the holder) exits 0"
}

# shellcheck disable=SC2016  # the subjects are literal, $JS included
stream_back() {
  MESH_RECONCILER_PASSWORD="$kPassword" "$nats_request" --bus "nats://127.0.0.1:${rt3_client[2]}" \
    '$JS.API.STREAM.INFO.EVENTS' | grep -q '"config"'
}

# shellcheck disable=SC2016  # the subjects are literal, $JS included
rt3_deletion() {
  local i before=() after=()
  for i in "${rt3_pods[@]}"; do
    before[i]="$(grep -c 'action=create_stream name=EVENTS outcome=done' "$rt3/sidecar-$i.log")"
  done
  # Count creation advisories from before the deletion to well after the repair (10 s: ten
  # intervals of every sidecar).
  MESH_RECONCILER_PASSWORD="$kPassword" "$nats_request" --bus "nats://127.0.0.1:${rt3_client[1]}" \
    --count-for 10 '$JS.EVENT.ADVISORY.STREAM.CREATED.>' >"$rt3/advisories.out" 2>&1 &
  local counter=$!
  pids+=("$counter")
  wait_for 10 grep -q '^subscribed$' "$rt3/advisories.out" || { echo "the counter did not subscribe"; cat "$rt3/advisories.out"; return 1; }
  MESH_RECONCILER_PASSWORD="$kPassword" "$nats_request" --bus "nats://127.0.0.1:${rt3_client[0]}" \
    '$JS.API.STREAM.DELETE.EVENTS' | grep -q '"success":true' || { echo "could not delete EVENTS"; return 1; }
  wait_for 30 stream_back || { echo "EVENTS was not recreated within 30 s"; return 1; }
  wait "$counter"
  local created
  created="$(grep -c '^\$JS.EVENT.ADVISORY.STREAM.CREATED.EVENTS$' "$rt3/advisories.out")"
  local creators=0
  for i in "${rt3_pods[@]}"; do
    after[i]="$(grep -c 'action=create_stream name=EVENTS outcome=done' "$rt3/sidecar-$i.log")"
    ((after[i] > before[i])) && creators=$((creators + 1))
  done
  echo "creation advisories for EVENTS: $created; sidecars that created it: $creators"
  [[ "$created" == 1 && "$creators" == 1 ]] || { cat "$rt3/advisories.out"; return 1; }
}

# shellcheck disable=SC2034  # read through run_steps' nameref
runtime3_steps=(
  "rt3_layout:runtime, 3 replicas: lay out three pods (own ports, routes mapped), each sidecar with the lease"
  "rt3_cluster_up:runtime, 3 replicas: init containers, a 3-node nats cluster, three sidecars"
  "rt3_formed:runtime, 3 replicas: every member is in the meta group (restarted once if 2.10.27 left it out)"
  "rt3_one_writer:runtime, 3 replicas: exactly one sidecar holds the lease, and the bus converges"
  "rt3_deletion:runtime, 3 replicas: a deleted stream is recreated once (one advisory, one creator)"
)

run_steps runtime3_steps "$rt3/nats-*.log" "$rt3/sidecar-*.log"

# --- runtime: closed routes on real nats-servers --------------------------------------------
# The nats containers of three pods, as rendered (nats.conf from the ConfigMap, the route
# credential from the Secret through the container's environment; only ports and paths mapped),
# form a cluster; a server rendered without the credential, or with another password, routing
# to them is refused and never becomes a member. No mesh-reconciler runs here (a stub users
# file), so these need no MESH_BINARY.

rc="$work/routes"

# routes_ids PORT...: per monitor port, "SERVER_ID REMOTE_ID..." (the routes that completed
# their handshake); fails while a server does not answer.
routes_ids() {
  # shellcheck disable=SC2016  # JavaScript, not shell
  node -e '
    (async () => {
      for (const port of process.argv.slice(1)) {
        const get = async (path) => (await fetch(`http://127.0.0.1:${port}${path}`)).json();
        const varz = await get("/varz");
        const routez = await get("/routez");
        const remotes = [...new Set((routez.routes ?? []).map((r) => r.remote_id).filter(Boolean))];
        console.log([varz.server_id, ...remotes].join(" "));
      }
    })().catch(() => process.exit(1));' "$@"
}

# routes_layout NAME FULLNAME PORTS_VAR PEERS [helm args...]: renders one release with three
# members, lays out pod I (0..2) under $rc/NAME-I with the ports in PORTS_VAR (client, monitor,
# cluster per pod), its route hosts mapped to the cluster ports PEERS ("p0 p1 p2").
routes_layout() {
  local name="$1" fullname="$2" peers="$4" i j
  local -n ports_of="$3"
  shift 4
  local peer_ports
  read -ra peer_ports <<<"$peers"
  local count=$((${#ports_of[@]} / 3))
  for ((i = 0; i < count; i++)); do
    local out="$rc/$name-$i.yaml" dir="$rc/$name-$i"
    render "$out" "${with_secrets[@]}" --set replicas=3 --set "fullnameOverride=$fullname" \
      --set "nats.ports.client=${ports_of[3 * i]}" --set "nats.ports.monitor=${ports_of[3 * i + 1]}" \
      --set "nats.ports.cluster=${ports_of[3 * i + 2]}" "$@" || return 1
    local hosts=()
    for j in 0 1 2; do
      hosts+=(--host "$fullname-$j.$fullname-headless.mesh-test.svc.cluster.local:${ports_of[3 * i + 2]}=127.0.0.1:${peer_ports[j]}")
    done
    node tests/charts/pod.mjs "$out" --root "$dir" --ordinal "$i" "${hosts[@]}" --extra "$work/tls-secret.yaml" \
      --bin mesh-reconciler=/bin/false --bin "nats-server=$nats_server" >/dev/null || return 1
    # shellcheck disable=SC2016  # a literal bcrypt hash
    printf 'accounts { MESH { jetstream: enabled, users: [ {user: stub, password: "%s"} ] } }\n' \
      '$2a$11$PWIFAL8RsWyGI3jVZtO9Nu8.6jOxzxfZo7c/W0eLk017hjgUKWrhy' >"$dir/etc/nats-users/users.conf"
    "$dir/run/nats.sh" >"$dir.log" 2>&1 &
    pids+=("$!")
    echo "$!" >"$dir.pid"
  done
}

# Every member's completed routes name the other two members (by server id).
routes_formed() {  # MONITOR_PORT...
  local lines ids=() line
  mapfile -t lines < <(routes_ids "$@") || return 1
  ((${#lines[@]} == $#)) || return 1
  for line in "${lines[@]}"; do ids+=("${line%% *}"); done
  for line in "${lines[@]}"; do
    local id
    for id in "${ids[@]}"; do
      [[ "$id" == "${line%% *}" ]] && continue
      [[ " $line " == *" $id "* ]] || return 1
    done
  done
}

routes_stop() {  # NAME COUNT
  local i
  for ((i = 0; i < $2; i++)); do [[ -s "$rc/$1-$i.pid" ]] && stop_pid "$(cat "$rc/$1-$i.pid")"; done
  return 0
}

routes_members=()
routes_monitors=()
# routes_cluster NAME [helm args...]: three members formed with the credential.
routes_cluster() {
  local name="$1"
  shift
  mkdir -p "$rc"
  [[ -s "$work/tls-secret.yaml" ]] || make_tls_secret "$work/tls-secret.yaml" || return 1
  read -ra routes_members <<<"$(free_ports 9)" || return 1
  routes_monitors=("${routes_members[1]}" "${routes_members[4]}" "${routes_members[7]}")
  routes_layout "$name" mesh-closed routes_members \
    "${routes_members[2]} ${routes_members[5]} ${routes_members[8]}" "$@" || return 1
  if ! wait_for 60 routes_formed "${routes_monitors[@]}"; then
    echo "the three members did not route to each other within 60 s:"
    routes_ids "${routes_monitors[@]}"
    tail -5 "$rc/$name"-*.log
    return 1
  fi
  grep -q "MESH_ROUTES=" "$rc/$name-0/run/nats.sh" || { echo "the route credential is not in the environment"; return 1; }
  echo "3 members routed to each other (each /routez names the other two): $(routes_ids "${routes_monitors[@]}" | tr '\n' ';')"
}

# The intruder has been refused by every member's cluster port.
refused_by_all() {  # LOG
  local port
  for port in "${routes_members[2]}" "${routes_members[5]}" "${routes_members[8]}"; do
    grep -q "127.0.0.1:$port - rid:[0-9]* - Route Error 'Authorization Violation'" "$1" || return 1
  done
}

# routes_intruder NAME [helm args...]: one more server, rendered with the given values, routing
# to the three members: refused by each, and in no member's routes.
routes_intruder() {
  local name="$1"
  shift
  local ports
  read -ra ports <<<"$(free_ports 3)" || return 1
  routes_layout "$name" mesh-intruder ports \
    "${routes_members[2]} ${routes_members[5]} ${routes_members[8]}" "$@" || return 1
  local log="$rc/$name-0.log"
  if ! wait_for 30 refused_by_all "$log"; then
    echo "the intruder was not refused by all three members within 30 s:"
    tail -20 "$log"
    return 1
  fi
  # Only the members' view is evidence. The intruder keeps re-soliciting its routes: each attempt
  # reads the member's INFO (and so its server id) before the member refuses the CONNECT, so a
  # snapshot of the intruder's own /routez may name a member for the length of one attempt (seen
  # under load with TLS). A member adds a route only after the CONNECT authenticates.
  local intruder line
  intruder="$(routes_ids "${ports[1]}")" || { echo "the intruder's monitor does not answer"; return 1; }
  intruder="${intruder%% *}"
  while read -r line; do
    [[ " $line " != *" $intruder "* ]] || { echo "a member routes to the intruder: $line"; return 1; }
  done < <(routes_ids "${routes_monitors[@]}")
  routes_formed "${routes_monitors[@]}" || { echo "the members lost each other"; return 1; }
  routes_stop "$name" 1
  echo "refused by the three members (Authorization Violation), in no member's routes"
}

routes_closed() {
  routes_cluster closed || return 1
  routes_intruder open --set routes.authorization=false || return 1
  routes_intruder wrong --set routePassword.value=not-the-route-password
}

routes_closed_tls() {
  routes_cluster tls --set routes.tls.enabled=true --set routes.tls.secretName=mesh-tls || return 1
  routes_intruder tls-open --set routes.authorization=false --set routes.tls.enabled=true \
    --set routes.tls.secretName=mesh-tls
}

run_test "runtime, closed routes: 3 members form the cluster with the route credential; a server without it (open routes, another password) is refused" \
  routes_closed
routes_stop closed 3
run_test "runtime, closed routes with TLS: 3 members form the cluster; a server with the CA but without the credential is refused" \
  routes_closed_tls
routes_stop tls 3

echo "chart_test: $passed passed, $failed failed, $skipped skipped"
[[ $failed -eq 0 ]]
