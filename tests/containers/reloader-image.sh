#!/usr/bin/env bash
# Builds the stand-in of the official chart's config reloader image
# (tests/containers/reloader.Containerfile says what it is and is not) from the vendored
# upstream source (tests/containers/reloader/), named as the official image:
# docker.io/natsio/nats-server-config-reloader:0.20.1. Skipped when the image exists and was
# built from the same files. Needs the debian:12 base (tests/containers/base.sh) and Debian's
# archive (Go and fsnotify are installed in the build stage). Prints the image's name.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=tests/containers/podman.sh
source "$root/tests/containers/podman.sh"
readonly image="docker.io/natsio/nats-server-config-reloader:0.20.1"
sum="$(cd "$root/tests/containers" && cat reloader.Containerfile reloader/LICENSE \
  reloader/cmd/nats-server-config-reloader/main.go reloader/pkg/natsreloader/natsreloader.go |
  sha256sum | cut -d' ' -f1)"
if podman image exists "$image" &&
  [[ "$(podman image inspect -f '{{index .Labels "mesh.reloader.sha256"}}' "$image")" == "$sum" ]]; then
  echo "reloader-image: $image present" >&2
  echo "$image"
  exit 0
fi
context="$(mktemp -d /tmp/mesh-reloader-image.XXXXXX)"
trap 'rm -rf "$context"' EXIT
cp -r "$root/tests/containers/reloader" "$context/reloader"
cp "$root/tests/containers/reloader.Containerfile" "$context/Containerfile"
podman build -q --network host --label "mesh.reloader.sha256=$sum" -t "$image" \
  -f "$context/Containerfile" "$context" >/dev/null
echo "reloader-image: built $image (stand-in; tests/containers/reloader.Containerfile)" >&2
echo "$image"
