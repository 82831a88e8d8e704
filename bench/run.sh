#!/usr/bin/env bash
# The benchmark suite in one command:
#
#   bash bench/run.sh              build and run every bench/*_bench.cc
#   bash bench/run.sh plan_bench   only the named ones
#
# Builds the benchmarks optimised (Release) in build-bench/ (MESH_BENCH_BUILD_DIR), with
# MESH_JOBS parallel jobs (default 2), runs each program that was built, and prints ONE table of
# every figure:
#
#   | benchmark | measurement | value | goal / notes |
#
# - Google Benchmark programs (BENCHMARK_MAIN) run with --benchmark_format=csv: one row per
#   benchmark, its wall time, and its counters as notes. MESH_BENCH_ARGS adds flags to them
#   (e.g. "--benchmark_min_time=0.1 --benchmark_repetitions=3").
# - Programs with their own main() print each figure as a markdown row
#   "| measurement | value | goal |" (a header row and its |---| line are skipped); whatever
#   else they print is kept verbatim under the table.
#
# The table is also written to <build>/bench-results/summary.md, and every program's full
# stdout/stderr to <build>/bench-results/<name>.{out,err}. Exit status 1 when a benchmark failed
# to build or to run (the table still holds everything else).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build="${MESH_BENCH_BUILD_DIR:-build-bench}"
jobs="${MESH_JOBS:-2}"
results="$build/bench-results"

if [ $# -gt 0 ]; then
  names=("$@")
else
  names=()
  for src in bench/*_bench.cc; do names+=("$(basename "$src" .cc)"); done
fi
[ ${#names[@]} -gt 0 ] || { echo "bench/run.sh: no bench/*_bench.cc" >&2; exit 1; }
for name in "${names[@]}"; do
  [ -f "bench/$name.cc" ] || { echo "bench/run.sh: no bench/$name.cc" >&2; exit 64; }
done

bash scripts/install-deps.sh build test || exit 1
echo "== configure ($build, Release)"
# Release as the image ships it. GCC 12 at -O3 reports false -Wrestrict errors on short
# std::string concatenations (GCC bug 105329) in the test support the benchmarks link: keep
# the warning, not the error.
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMESH_BUILD_BENCH=ON \
  -DCMAKE_CXX_FLAGS="-Wno-error=restrict" >/dev/null || exit 1
mkdir -p "$results"
# The daemon benchmark runs the real binary.
echo "== build mesh-reconciler"
cmake --build "$build" --target mesh-reconciler -j"$jobs" >"$results/build.log" 2>&1 || {
  tail -n 30 "$results/build.log" >&2
  exit 1
}

failed=0
rows="$results/rows.md"
notes="$results/notes.md"
: >"$rows"
: >"$notes"
row() { printf '| %s | %s | %s | %s |\n' "$1" "$2" "$3" "$4" >>"$rows"; }

# Google Benchmark CSV -> rows: name, wall time with its unit, counters as notes.
csv_rows() {
  awk -F, -v bench="$1" '
    function unquote(s) { gsub(/^"|"$/, "", s); return s }
    NR == 1 || $1 == "name" { for (i = 1; i <= NF; ++i) col[i] = unquote($i); next }
    {
      name = unquote($1)
      for (i = 1; i <= NF; ++i) {
        if (col[i] == "real_time") t = $i
        if (col[i] == "time_unit") unit = unquote($i)
        if (col[i] == "error_occurred") err = unquote($i)
        if (col[i] == "error_message") msg = unquote($i)
      }
      extra = ""
      for (i = 11; i <= NF; ++i) {
        if ($i != "") extra = extra (extra == "" ? "" : ", ") col[i] "=" sprintf("%.6g", $i)
      }
      if (err == "true") printf "| %s | %s | error | %s |\n", bench, name, msg
      else printf "| %s | %s | %.3f %s | %s |\n", bench, name, t, unit, extra
    }'
}

# Markdown rows of a plain program -> rows prefixed with the program; the rest -> notes.
plain_rows() {
  awk -v bench="$1" -v notes="$2" '
    function flush() { if (held != "") print held; held = "" }
    /^\|[-:| ]+\|[[:space:]]*$/ { held = ""; next }   # separator: the held row was a header
    /^\|/ {
      flush()
      line = $0
      sub(/^\|[[:space:]]*/, "", line); sub(/[[:space:]]*\|[[:space:]]*$/, "", line)
      n = split(line, cell, /[[:space:]]*\|[[:space:]]*/)
      rest = ""
      for (i = 3; i <= n; ++i) rest = rest (rest == "" ? "" : "; ") cell[i]
      held = sprintf("| %s | %s | %s | %s |", bench, cell[1], (n >= 2 ? cell[2] : ""), rest)
      next
    }
    { flush(); print >> notes }
    END { flush() }'
}

for name in "${names[@]}"; do
  echo "== build $name"
  if ! cmake --build "$build" --target "$name" -j"$jobs" >>"$results/build.log" 2>&1; then
    echo "   build failed (see $results/build.log)"
    row "$name" "(build)" "failed" "see $results/build.log"
    failed=1
    continue
  fi
  echo "== run $name"
  out="$results/$name.out"
  err="$results/$name.err"
  if grep -q 'BENCHMARK_MAIN' "bench/$name.cc"; then
    # shellcheck disable=SC2086  # MESH_BENCH_ARGS is a list of flags
    "$build/$name" --benchmark_format=csv ${MESH_BENCH_ARGS:-} >"$out" 2>"$err"
    status=$?
    csv_rows "$name" <"$out" >>"$rows"
  else
    "$build/$name" >"$out" 2>"$err"
    status=$?
    extra="$results/$name.notes"
    : >"$extra"
    plain_rows "$name" "$extra" <"$out" >>"$rows"
    if grep -q '[^[:space:]]' "$extra"; then
      printf '\n### %s\n\n```\n' "$name" >>"$notes"
      cat "$extra" >>"$notes"
      printf '```\n' >>"$notes"
    fi
  fi
  if [ $status -ne 0 ]; then
    row "$name" "(run)" "exit $status" "$(tail -n 3 "$err" | tr '\n|' '  ')"
    failed=1
  fi
done

{
  echo "# Benchmarks ($(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, $(uname -m))"
  echo
  echo "| benchmark | measurement | value | goal / notes |"
  echo "|---|---|---|---|"
  cat "$rows"
  if [ -s "$notes" ]; then
    echo
    echo "## Other output"
    cat "$notes"
  fi
} >"$results/summary.md"
cat "$results/summary.md"
echo
echo "(table: $results/summary.md; raw outputs: $results/)"
exit $failed
