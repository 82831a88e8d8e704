# shellcheck shell=bash
# Shared by the script tests (sourced, not run): a work folder removed at exit, and run_test.
#   source "$root/tests/scripts/lib.sh"; test_lib_init NAME
#   run_test "what it checks" FUNCTION ARGS...   # output shown only when it fails
#   test_lib_finish                              # "NAME: N passed, N failed"; exit status
# Not named *_test.sh: CTest registers only those.

test_lib_init() {
  test_lib_name="$1"
  work="$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX")"
  trap 'rm -rf "$work"' EXIT
  passed=0
  failed=0
}

run_test() {
  local name="$1"
  shift
  if "$@" >"$work/test.log" 2>&1; then
    passed=$((passed + 1))
    echo "ok - $name"
  else
    failed=$((failed + 1))
    echo "not ok - $name"
    sed 's/^/    /' "$work/test.log"
  fi
}

test_lib_finish() {
  echo "$test_lib_name: $passed passed, $failed failed"
  [[ $failed -eq 0 ]]
}

# The end of a check that scanned the tree: "N WHAT checked", and failure when N is 0 (the
# scan's pattern no longer matches anything) or STATUS is not 0.
#   finish_scan COUNT WHAT STATUS
finish_scan() {
  echo "$1 $2 checked"
  (($1 > 0)) || { echo "no $2 found: the pattern is broken"; return 1; }
  return "$3"
}

# The metric names, read from the sources (run from the repository's root).

# The metrics renamed to the mesh_reconciler_ prefix, "OLD NEW" a line: the kRenamedMetrics
# table of reconciler/daemon/metrics.h. The daemon exports OLD beside NEW until 0.2.0 (deprecated).
renamed_metrics() {
  sed -n '/kRenamedMetrics = {{/,/^}};/p' reconciler/daemon/metrics.h | tr -d '\n' |
    grep -oE '\{"mesh_[a-z0-9_]+", *"mesh_[a-z0-9_]+"\}' |
    sed -E 's/^\{"([a-z0-9_]+)", *"([a-z0-9_]+)"\}$/\1 \2/'
}

# The metric families the daemon registers under their current names: .Name("...") after a
# prometheus::Build* call in reconciler/*/*.cc, and the new names of kRenamedMetrics (registered
# by Metrics::RegisterRenamed; tests/reconciler/daemon/metrics_test.cc checks each is exported).
registered_metrics() {
  {
    grep -h -A2 -E 'prometheus::Build(Counter|Gauge|Histogram|Summary)\(\)' reconciler/*/*.cc |
      sed -n 's/.*\.Name("\([a-z_:][a-z0-9_:]*\)").*/\1/p'
    renamed_metrics | cut -d' ' -f2
  } | sort -u
}

# check_metrics_named_in FILE...: every metric the text of FILEs names, as a mesh_* identifier
# or through a {__name__=~"REGEX"} matcher, is one the daemon registers (a histogram's _bucket,
# _sum and _count series included), and none is a deprecated name: a dashboard or an alert reading
# a name that 0.2.0 removes is an error. A matcher must select a registered metric and no
# deprecated one (one selecting both would count every sample twice until 0.2.0).
check_metrics_named_in() {
  local name base renamed regex ok=0
  renamed_metrics >"$work/renamed"
  registered_metrics >"$work/registered"
  [[ -s "$work/renamed" ]] || { echo "no kRenamedMetrics table found in reconciler/daemon/metrics.h"; return 1; }
  [[ -s "$work/registered" ]] || { echo "no registered metric found in reconciler/*/*.cc"; return 1; }
  # Identifiers that name a series: mesh_* (labels, functions and keywords are never mesh_*).
  sed -E 's/__name__ *=~ *"[^"]*"//g' "$@" | grep -oE '\bmesh_[a-z0-9_]+' | sort -u >"$work/used"
  grep -hoE '__name__ *=~ *"[^"]*"' "$@" | sed -E 's/^__name__ *=~ *"(.*)"$/\1/' | sort -u \
    >"$work/regexes"
  [[ -s "$work/used" || -s "$work/regexes" ]] || { echo "no metric named in $*"; return 1; }
  while IFS= read -r name; do
    base="$(sed -E 's/_(bucket|sum|count)$//' <<<"$name")"
    renamed="$(awk -v n="$name" -v b="$base" '$1 == n || $1 == b { print $2 }' "$work/renamed")"
    if [[ -n "$renamed" ]]; then
      echo "$name: deprecated, removed in 0.2.0 (renamed to $renamed${name#"$base"})"
      ok=1
      continue
    fi
    grep -qx "$name" "$work/registered" && continue
    [[ "$base" != "$name" ]] && grep -qx "$base" "$work/registered" && continue
    echo "$name: not a metric the daemon registers"
    ok=1
  done <"$work/used"
  while IFS= read -r regex; do
    # Every name a scrape may hold, suffixed as a histogram's series are.
    awk '{ print; print $0 "_bucket"; print $0 "_sum"; print $0 "_count" }' "$work/registered" |
      grep -xE "$regex" >"$work/selected"
    [[ -s "$work/selected" ]] || { echo "__name__=~\"$regex\": selects no registered metric"; ok=1; }
    awk '{ print; print $1 "_bucket"; print $1 "_sum"; print $1 "_count" }' "$work/renamed" |
      cut -d' ' -f1 | grep -xE "$regex" >"$work/selected"
    if [[ -s "$work/selected" ]]; then
      echo "__name__=~\"$regex\": selects deprecated $(paste -sd, "$work/selected")"
      ok=1
    fi
  done <"$work/regexes"
  [[ $ok -eq 0 ]] &&
    echo "$(wc -l <"$work/used") metrics and $(wc -l <"$work/regexes") name matchers, all registered by the daemon, none deprecated"
  return $ok
}
