#!/usr/bin/env bash
# Builds a stand-in nats image (tests/containers/nats.Containerfile says what it is and is not)
# from a nats-server binary, named as the official image of its version:
# docker.io/library/nats:<version>-alpine. With Debian 13's 2.10.27 that is the chart's default
# nats image; with Debian 12's 2.9.10 (/usr/sbin/nats-server) it is the image of the pod test's
# --store-dir case. Skipped when the image exists and holds the same binary. Needs the
# debian:12 base (tests/containers/base.sh). Prints the image's name.
# Usage: nats-image.sh NATS_SERVER_BINARY   (scripts/fetch-nats-server.sh prints 2.10.27's)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=tests/containers/podman.sh
source "$root/tests/containers/podman.sh"
binary="${1:?usage: nats-image.sh NATS_SERVER_BINARY}"
version="$("$binary" --version | grep -o 'v[0-9][0-9.]*' | head -n 1)"
[[ -n "$version" ]] || { echo "nats-image: $binary reports no version" >&2; exit 1; }
image="docker.io/library/nats:${version#v}-alpine"
sum="$(sha256sum "$binary" | cut -d' ' -f1)"
if podman image exists "$image" &&
  [[ "$(podman image inspect -f '{{index .Labels "mesh.nats-server.sha256"}}' "$image")" == "$sum" ]]; then
  echo "nats-image: $image present" >&2
  echo "$image"
  exit 0
fi
context="$(mktemp -d /tmp/mesh-nats-image.XXXXXX)"
trap 'rm -rf "$context"' EXIT
cp "$binary" "$context/nats-server"
cp "$root/tests/containers/nats.Containerfile" "$context/Containerfile"
# The official image's default configuration: client, monitoring and cluster ports.
cat >"$context/nats-server.conf" <<'CONF'
port: 4222
monitor_port: 8222
cluster {
  name: "my_cluster"
  port: 6222
}
CONF
# The official entrypoint's rule: arguments starting with a flag are nats-server's.
cat >"$context/docker-entrypoint.sh" <<'SH'
#!/bin/sh
set -e
if [ "$#" -eq 0 ] || [ "${1#-}" != "$1" ]; then
  set -- nats-server "$@"
fi
exec "$@"
SH
chmod 0755 "$context/docker-entrypoint.sh" "$context/nats-server"
podman build -q --network none --label "mesh.nats-server.sha256=$sum" -t "$image" \
  -f "$context/Containerfile" "$context" >/dev/null
echo "nats-image: built $image (stand-in; tests/containers/nats.Containerfile)" >&2
echo "$image"
