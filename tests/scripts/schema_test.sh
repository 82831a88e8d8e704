#!/usr/bin/env bash
# The JSON contract, on the real binary (MESH_BINARY) and a private nats-server: every command
# that prints a report prints it under --json with its "schema", and the document validates
# against docs/schemas/<kind>.v1.schema.json (Ajv, tests/schemas/validate.mjs):
#   validate (valid and invalid records), desired, plan, reconcile --once, the daemon's /drift
#   (free and held), hold, status, release, reconcile --remote, show-stream, show-consumer; the log lines of --log-format json
#   (log/v1), with counts as JSON numbers and flags as booleans;
# commands whose output is no report (render-users, run) refuse --json with exit 64; and the
# validator refuses a document that breaks its schema (so a pass here means something).
set -uo pipefail

root="${MESH_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
cd "$root" || exit 1
bin="${MESH_BINARY:?MESH_BINARY: the mesh-reconciler binary (CTest sets it)}"
source "$root/tests/scripts/lib.sh"
test_lib_init schema_test
bash scripts/install-test-tools.sh >/dev/null 2>&1 || { echo "schema_test: cannot install the test tools"; exit 1; }

# shellcheck source=scripts/private-bus.sh
source "$root/scripts/private-bus.sh"  # private_bus_*, free_port, wait_for
private_bus_init "$work" schema
settings+=(--log-format json)

stop_all() {
  private_bus_stop
  rm -rf "$work"
}
trap stop_all EXIT

# Runs "$@" with stdout to $work/$name.json; expects exit code $code; validates it as $kind.
json_of() {
  local name="$1" code="$2" kind="$3"; shift 3
  "$@" >"$work/$name.json" 2>"$work/$name.err"
  local got=$?
  [[ $got -eq $code ]] || { echo "$* exited $got, expected $code"; cat "$work/$name.err"; return 1; }
  node tests/schemas/validate.mjs "$kind" "$work/$name.json"
}

refuses_json() {
  local out code
  out="$("$bin" "$@" --json 2>&1)"
  code=$?
  [[ $code -eq 64 ]] || { echo "$1 --json exited $code, expected 64: $out"; return 1; }
  [[ "$out" == *"--json"* ]] || { echo "$1 --json does not say why: $out"; return 1; }
}

invalid_records() {
  echo '{"mesh": "x", "nodes": [{"name": 7}]}' >"$work/bad.json"
  json_of validation-bad 1 validation/v1 "$bin" validate "$work/bad.json" --json || return 1
  node -e 'const d = JSON.parse(require("fs").readFileSync(process.argv[1])); if (d.valid || d.errors.length === 0) process.exit(1)' \
    "$work/validation-bad.json"
}

# The validator is not a rubber stamp: the report with a status code as people read it
# ("invalid argument", the pre-contract spelling) and with a member missing are refused.
validator_refuses() {
  node -e '
    const fs = require("fs");
    const d = JSON.parse(fs.readFileSync(process.argv[1]));
    fs.writeFileSync(process.argv[2], JSON.stringify({...d, status: {...d.status, code: "invalid argument"}}));
    const e = {...d}; delete e.converged; fs.writeFileSync(process.argv[3], JSON.stringify(e));' \
    "$work/plan.json" "$work/bad-code.json" "$work/bad-missing.json" || return 1
  local f
  for f in bad-code bad-missing; do
    if node tests/schemas/validate.mjs report/v1 "$work/$f.json"; then echo "$f passed"; return 1; fi
  done
}

# Every line the commands and the daemon logged is log/v1, and a "pass finished" line carries
# its counts as numbers and "converged" as a boolean (the schema types them; this shows they
# are there to type).
log_lines_typed() {
  node tests/schemas/validate.mjs --lines log/v1 "$work/plan.err" "$work/once.err" "$work/daemon.log" || return 1
  node -e '
    const lines = require("fs").readFileSync(process.argv[1], "utf8").split("\n").filter(Boolean).map(JSON.parse);
    const done = lines.filter((l) => l.msg === "pass finished");
    const held = lines.filter((l) => l.msg === "held: passes observe only");
    if (done.length === 0 || held.length !== 1) { console.log("missing lines"); process.exit(1); }
    for (const l of done) {
      if (typeof l.pass !== "number" || typeof l.drift !== "number" || typeof l.converged !== "boolean" ||
          typeof l.duration_seconds !== "number") { console.log(JSON.stringify(l)); process.exit(1); }
    }
    if (typeof held[0].for_ms !== "number" || held[0].reason !== "schema test") { console.log(JSON.stringify(held[0])); process.exit(1); }' \
    "$work/daemon.log" || return 1
  # and a line with a count as text is refused
  echo '{"ts":"2026-12-01T22:00:00.000Z","level":"info","msg":"pass finished","drift":"0"}' >"$work/bad.log"
  if node tests/schemas/validate.mjs --lines log/v1 "$work/bad.log"; then echo "a string count passed"; return 1; fi
}

start_bus() {
  private_bus_start "$bin"
}

start_daemon() {
  private_daemon_start "$bin" "$work/daemon.log" --interval 30s
}

drift_is() {
  local name="$1" held="$2"
  curl -fsS "http://$listen/drift" >"$work/$name.json" || return 1
  node tests/schemas/validate.mjs drift/v1 "$work/$name.json" || return 1
  node -e 'const d = JSON.parse(require("fs").readFileSync(process.argv[1]));
           if (String(d.hold.held) !== process.argv[2]) { console.log(JSON.stringify(d.hold)); process.exit(1); }' \
    "$work/$name.json" "$held"
}

run_test "validate --json, valid records: validation/v1" \
  json_of validation 0 validation/v1 "$bin" validate "$records" --json
run_test "validate --json, invalid records: validation/v1 with the errors, exit 1" invalid_records
run_test "desired: desired/v1" json_of desired 0 desired/v1 "$bin" desired "$records"
run_test "desired --json: the same desired/v1" json_of desired-json 0 desired/v1 "$bin" desired "$records" --json
run_test "render-users refuses --json" refuses_json render-users "$records"
run_test "run refuses --json" refuses_json run
run_test "a private nats-server starts" start_bus
run_test "plan --json on a fresh bus: report/v1, exit 2" json_of plan 2 report/v1 "$bin" plan "${settings[@]}" --json
run_test "the validator refuses a report that breaks report/v1" validator_refuses
run_test "reconcile --once --json: report/v1" json_of once 0 report/v1 "$bin" reconcile --once "${settings[@]}" --json
run_test "show-stream --json: stream/v1" json_of show-stream 0 stream/v1 "$bin" show-stream DECL "${settings[@]}" --json
run_test "show-consumer --json: consumer/v1" \
  json_of show-consumer 0 consumer/v1 "$bin" show-consumer DECL decl_node-a "${settings[@]}" --json
run_test "delete-stream refuses --json" refuses_json delete-stream DECL --yes
run_test "the daemon starts" start_daemon
run_test "GET /drift: drift/v1, not held" drift_is drift-free false
run_test "hold --json: hold/v1" json_of hold 0 hold/v1 "$bin" hold "${remote[@]}" --for 10m --reason "schema test" --json
run_test "GET /drift while held: drift/v1 with the hold" drift_is drift-held true
run_test "status --json while held: status/v1, no token" \
  json_of status-held 0 status/v1 "$bin" status --remote "http://$listen" --json
run_test "status -o json, the same status/v1" \
  json_of status-held-o 0 status/v1 "$bin" status --remote "http://$listen" -o json
run_test "release --json: release/v1" json_of release 0 release/v1 "$bin" release "${remote[@]}" --reason "done" --json
run_test "reconcile --remote --json: report/v1" json_of remote 0 report/v1 "$bin" reconcile "${remote[@]}" --json
run_test "--log-format json: every line log/v1, counts as numbers, flags as booleans" log_lines_typed

test_lib_finish
