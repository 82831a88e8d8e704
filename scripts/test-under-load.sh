#!/usr/bin/env bash
# The suite under load: the README's test command run RUNS times in a row (default 3), each in
# a fresh clone of this checkout's HEAD, with two CPU-bound processes beside it the whole time
# (on 2 cores that leaves the suite about a third of the CPU it has alone). Stops at the first
# failed run and says which; the CPU-bound processes are stopped by PID however it ends.
#
#   bash scripts/test-under-load.sh [RUNS]
#
# MESH_TEST_STAGES is passed through (e.g. "main" for the first stage only). Each run's output
# goes to <clone>/test.log; the clones are kept under $TMPDIR for a failure's logs and removed
# after a passing run.
set -uo pipefail

runs="${1:-3}"
case "$runs" in
  '' | *[!0-9]*) echo "usage: $0 [RUNS]" >&2; exit 64 ;;
esac
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

burners=()
stop_burners() {
  for pid in "${burners[@]}"; do kill "$pid" 2>/dev/null; done
  for pid in "${burners[@]}"; do wait "$pid" 2>/dev/null; done
}
trap stop_burners EXIT
for _ in 1 2; do
  sh -c 'while :; do :; done' &
  burners+=("$!")
done
echo "two CPU-bound processes: ${burners[*]}"

for ((run = 1; run <= runs; run++)); do
  clone="$(mktemp -d "${TMPDIR:-/tmp}/mesh-under-load-XXXXXX")"
  git clone -q "$root" "$clone/main" || exit 1
  started=$(date +%s)
  echo "run $run of $runs in $clone/main (started $(date -u +%H:%M:%SZ))"
  if ! (cd "$clone/main" && bash .ci/run >test.log 2>&1); then
    echo "run $run FAILED after $(( $(date +%s) - started )) s: $clone/main/test.log" >&2
    tail -n 40 "$clone/main/test.log" >&2
    exit 1
  fi
  echo "run $run passed in $(( $(date +%s) - started )) s"
  rm -rf "$clone"
done
echo "all $runs runs passed under load"
