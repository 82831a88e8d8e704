#!/usr/bin/env bash
# Installs the Debian packages the project needs, idempotently (nothing is fetched when all
# are present). One package list per purpose, shared with the Dockerfile:
#   scripts/packages-build.txt    compilers and -dev libraries
#   scripts/packages-test.txt     real servers and tools the tests run (nats-server, prometheus...)
#   scripts/packages-runtime.txt  what the runtime image needs
# Usage: scripts/install-deps.sh build [test] [runtime]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
lists=("$@")
[ ${#lists[@]} -gt 0 ] || lists=(build)

wanted=()
for list in "${lists[@]}"; do
  while read -r pkg; do
    [ -n "$pkg" ] && [ "${pkg:0:1}" != "#" ] && wanted+=("$pkg")
  done < "$here/packages-$list.txt"
done
# Node.js and npm (test tools: helm from an npm package, kubernetes-models): use the machine's
# own when present, else Debian's.
if [[ " ${lists[*]} " == *" test "* ]] && ! command -v npm >/dev/null 2>&1; then
  wanted+=(nodejs npm)
fi

missing=()
for pkg in "${wanted[@]}"; do
  status="$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)"
  [ "$status" = "install ok installed" ] || missing+=("$pkg")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#wanted[@]} packages present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
