#!/usr/bin/env bash
# Makes the debian:12 base image (docker.io/library/debian:12, the Dockerfile's FROM) on this
# machine from Debian's archive with debootstrap: no container registry is involved. Kept
# between runs: skipped when podman has the image; else loaded from the cache
# <repo>/.cache/images/debian-12.tar (gitignored) when present; else made (about a minute) and
# saved there. The base follows the archive of the day (the 12.x point release): not pinned.
# `base.sh --rebuild` makes it again (e.g. after a point release).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=tests/containers/podman.sh
source "$root/tests/containers/podman.sh"
cache="$root/.cache/images/debian-12.tar"
log() { echo "base: $*" >&2; }

if [[ "${1:-}" == "--rebuild" ]]; then
  rm -f "$cache"
  podman image rm -f "$kBaseImage" >/dev/null 2>&1 || true
fi
if podman image exists "$kBaseImage"; then
  log "$kBaseImage present"
  exit 0
fi
if [[ -f "$cache" ]]; then
  log "loading $kBaseImage from $cache"
  podman load -q -i "$cache" >/dev/null
  podman image exists "$kBaseImage" && exit 0
  log "the cache did not hold $kBaseImage: making it again"
fi

# The mirror this machine's apt uses (deb822 sources, else the classic list).
mirror="$(sed -n 's/^URIs: *\([^ ]*\).*/\1/p' /etc/apt/sources.list.d/debian.sources 2>/dev/null |
  grep -v security | head -n 1 || true)"
mirror="${mirror:-http://deb.debian.org/debian}"
security="$(sed -n 's/^URIs: *\([^ ]*security[^ ]*\).*/\1/p' \
  /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -n 1 || true)"
security="${security:-http://deb.debian.org/debian-security}"

rootfs="$(mktemp -d /tmp/mesh-debian-12.XXXXXX)"
trap 'rm -rf "$rootfs"' EXIT
log "debootstrap bookworm from $mirror (about a minute)"
debootstrap --variant=minbase bookworm "$rootfs" "$mirror" >"$rootfs.log" 2>&1 ||
  { tail -n 20 "$rootfs.log" >&2; rm -f "$rootfs.log"; exit 1; }
rm -f "$rootfs.log"
# As the official image: deb822 sources for bookworm, -updates and -security; no lists kept.
rm -f "$rootfs/etc/apt/sources.list"
cat >"$rootfs/etc/apt/sources.list.d/debian.sources" <<SOURCES
Types: deb
URIs: $mirror
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SOURCES
rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin \
  "$rootfs"/var/cache/apt/archives/*.deb
tar --numeric-owner -C "$rootfs" -c . |
  podman import -q --change 'CMD ["bash"]' - "$kBaseImage" >/dev/null
mkdir -p "$(dirname "$cache")"
podman save -q -o "$cache.tmp" "$kBaseImage" && mv "$cache.tmp" "$cache"
log "made $kBaseImage, cached in $cache"
