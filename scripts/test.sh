#!/usr/bin/env bash
# The README's test command: installs what the tests need, builds, and runs every test.
# Exits non-zero when any step or any test fails.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root="$PWD"
jobs="${MESH_JOBS:-2}"

bash scripts/install-deps.sh build test
bash scripts/install-test-tools.sh

echo "== build (RelWithDebInfo, -Werror)"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$jobs"

echo "== tests"
export PATH="$root/.tools/bin:$PATH"
ctest --test-dir build --output-on-failure -j"$jobs" --timeout 900
