#!/usr/bin/env bash
# The README's main command, non-interactively: fresh bus -> plan shows drift -> one pass ->
# empty plan -> daemon up -> a stream deleted out of band comes back and the repair is counted.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
export MESH_DEMO_DIR="$(mktemp -d)/demo"
trap 'rm -rf "$(dirname "$MESH_DEMO_DIR")"' EXIT
: "${MESH_BINARY:?MESH_BINARY must point at the built mesh-reconciler}"
bash scripts/demo.sh --check
