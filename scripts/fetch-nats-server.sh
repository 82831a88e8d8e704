#!/usr/bin/env bash
# Fetches Debian 13 (trixie)'s nats-server package (a static Go binary) and extracts it into
# <repo>/.tools/nats-server-<version>/ (gitignored), for the test matrix (scripts/test.sh runs
# the server tests a second time with MESH_NATS_SERVER pointing at it). Never installs it.
#
# apt reads only the project's own source list, scripts/apt/trixie.sources, and keeps its lists
# and cache under .tools/apt/: the system's sources, lists and dpkg database are not touched.
# Idempotent: nothing is fetched when the binary is there and reports the pinned version.
# Prints the binary's path on stdout.
#
# `fetch-nats-server.sh forky` does the same for Debian 14 (forky, testing) from
# scripts/apt-forky/, into .tools/nats-server-forky/, for a run by hand beside the matrix:
#   MESH_NATS_SERVER="$(bash scripts/fetch-nats-server.sh forky)" ctest --test-dir build -L server
# Testing moves, so its version is not pinned: it is whatever forky holds (printed on stderr),
# and an existing binary is reused.
#
# Needs: apt-get, dpkg-deb, and Debian's archive keyring (debian-archive-keyring, which holds
# the trixie keys on bookworm too).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tools="${MESH_TOOLS_DIR:-$root/.tools}"
suite="${1:-trixie}"
case "$suite" in
  trixie)
    kVersion="2.10.27"
    dest="$tools/nats-server-$kVersion"
    sources="$root/scripts/apt"
    apt_dir="$tools/apt"
    ;;
  forky)
    kVersion=""  # whatever testing holds
    dest="$tools/nats-server-forky"
    sources="$root/scripts/apt-forky"
    apt_dir="$tools/apt-forky"
    ;;
  *)
    echo "usage: fetch-nats-server.sh [trixie|forky]" >&2
    exit 64
    ;;
esac
readonly kVersion dest sources apt_dir
binary="$dest/usr/sbin/nats-server"

log() { echo "fetch-nats-server: $*" >&2; }

binary_ok() {
  [[ -x "$binary" ]] || return 1
  if [[ -z "$kVersion" ]]; then
    "$binary" --version >/dev/null 2>&1
  else
    "$binary" --version 2>/dev/null | grep -q "v$kVersion\b"
  fi
}

if binary_ok; then
  [[ -n "$kVersion" ]] || log "reusing $("$binary" --version)"
  echo "$binary"
  exit 0
fi

for tool in apt-get dpkg-deb; do
  command -v "$tool" >/dev/null || { log "missing '$tool'"; exit 1; }
done

mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial" "$apt_dir/parts" \
  "$apt_dir/preferences.d" "$apt_dir/download"
# The package's files are extracted by this user; apt's sandbox user could not write here.
apt_opts=(
  -o "Dir::Etc::SourceList=/dev/null"
  -o "Dir::Etc::SourceParts=$sources"
  -o "Dir::Etc::PreferencesParts=$apt_dir/preferences.d"
  -o "Dir::State::Lists=$apt_dir/lists"
  -o "Dir::State::status=/dev/null"
  -o "Dir::Cache=$apt_dir/cache"
  -o "APT::Sandbox::User=root"
  -o "Debug::NoLocking=1"
  -o "APT::Architecture=amd64"
  -qq
)
log "updating the $suite package list into $apt_dir"
apt-get "${apt_opts[@]}" update
# Trixie's candidate (2.10.27-1+b2 today: a rebuild may change the Debian revision, never the
# upstream version of a stable release), checked before it is extracted.
log "downloading nats-server"
(cd "$apt_dir/download" && rm -f nats-server_*.deb &&
  apt-get "${apt_opts[@]}" download nats-server)
deb="$(ls "$apt_dir"/download/nats-server_*.deb)"
package_version="$(dpkg-deb -f "$deb" Version)"
if [[ -n "$kVersion" && "$package_version" != "$kVersion"-* ]]; then
  log "trixie's nats-server is $package_version, not $kVersion-*: refusing it"
  exit 1
fi
rm -rf "$dest"
mkdir -p "$dest"
dpkg-deb -x "$deb" "$dest"
if ! binary_ok; then
  log "$binary does not report v$kVersion"
  exit 1
fi
log "ok: $("$binary" --version)"
echo "$binary"
