#!/usr/bin/env bash
# Tests of the alert rules (charts/mesh-reconciler/files/alert-rules.yaml, the one source):
#   - promtool check rules;
#   - docs/alerts/mesh-reconciler-rules.yaml is a byte-identical copy;
#   - promtool test rules tests/alerts/*.yaml passes;
#   - every metric the rules and their tests name is one the daemon registers, and none is a
#     deprecated 0.1.0 name (kRenamedMetrics, reconciler/daemon/metrics.h; tests/scripts/lib.sh);
#   - every alert has, in tests/alerts, an evaluation where it fires and one where it does not;
#   - every alert has a severity, a summary and a runbook_url to its own section of
#     docs/runbook.md (a heading named after the alert).
# Standalone: bash tests/scripts/alerts_test.sh (needs promtool: the Debian package prometheus).
set -uo pipefail

root="${MESH_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
cd "$root" || exit 1

readonly kRules="charts/mesh-reconciler/files/alert-rules.yaml"
readonly kDocsCopy="docs/alerts/mesh-reconciler-rules.yaml"
readonly kRunbook="docs/runbook.md"
source "$root/tests/scripts/lib.sh"
test_lib_init alerts_test

mapfile -t alerts < <(sed -n 's/^ *- alert: *\([A-Za-z0-9_]*\) *$/\1/p' "$kRules")

docs_copy_identical() {
  cmp "$kRules" "$kDocsCopy" && return 0
  echo "$kDocsCopy differs from $kRules; run: cp $kRules $kDocsCopy"
  return 1
}

each_alert_fires_and_stays_quiet() {
  ((${#alerts[@]} > 0)) || { echo "no alert found in $kRules"; return 1; }
  # For each alert_rule_test entry: "fires NAME" (non-empty exp_alerts) or "quiet NAME".
  awk '/^ *(- )?alertname:/ { sub(/.*alertname: */, ""); name = $0 }
       /^ *exp_alerts: *\[\] *$/ { print "quiet", name }
       /^ *exp_alerts: *$/ { print "fires", name }' tests/alerts/*.yaml | sort -u >"$work/coverage"
  local alert ok=0
  for alert in "${alerts[@]}"; do
    grep -qx "fires $alert" "$work/coverage" || { echo "$alert: no test where it fires"; ok=1; }
    grep -qx "quiet $alert" "$work/coverage" || { echo "$alert: no test where it stays quiet"; ok=1; }
  done
  [[ $ok -eq 0 ]] && echo "${#alerts[@]} alerts, each tested firing and quiet"
  return $ok
}

each_alert_has_runbook_section() {
  local alert anchor ok=0
  local count
  count="$(grep -c '^ *runbook_url:' "$kRules")"
  [[ "$count" -eq ${#alerts[@]} ]] || { echo "$count runbook_url for ${#alerts[@]} alerts"; ok=1; }
  [[ "$(grep -c '^ *severity: \(critical\|warning\)$' "$kRules")" -eq ${#alerts[@]} ]] ||
    { echo "not every alert has severity critical or warning"; ok=1; }
  [[ "$(grep -c '^ *summary: ' "$kRules")" -eq ${#alerts[@]} ]] || { echo "not every alert has a summary"; ok=1; }
  for alert in "${alerts[@]}"; do
    anchor="$(tr '[:upper:]' '[:lower:]' <<<"$alert")"
    grep -q "^ *runbook_url: docs/runbook.md#$anchor\$" "$kRules" ||
      { echo "$alert: no runbook_url docs/runbook.md#$anchor"; ok=1; }
    # GitHub's anchor of "## <Alert>" is the lower-cased alert name.
    grep -q "^#\{2,3\} $alert *\$" "$kRunbook" || { echo "$alert: no section '## $alert' in $kRunbook"; ok=1; }
  done
  [[ $ok -eq 0 ]] && echo "every alert links to its section of $kRunbook"
  return $ok
}

run_test "promtool check rules $kRules" promtool check rules "$kRules"
run_test "$kDocsCopy is identical to $kRules" docs_copy_identical
run_test "promtool test rules tests/alerts/*.yaml" promtool test rules tests/alerts/*.yaml
run_test "the rules name only registered metrics, none deprecated" check_metrics_named_in "$kRules"
run_test "the rules' tests name only registered metrics, none deprecated" \
  check_metrics_named_in tests/alerts/*.yaml
run_test "every alert is tested firing and quiet" each_alert_fires_and_stays_quiet
run_test "every alert has a severity, a summary and a runbook section" each_alert_has_runbook_section

test_lib_finish
