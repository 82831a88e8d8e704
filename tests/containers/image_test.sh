#!/usr/bin/env bash
# The images, as users get them (scripts/test.sh, stage "image"):
#   - the debian:12 base, made from Debian's archive (tests/containers/base.sh; cached);
#   - the Dockerfile AS SHIPPED, built with podman (layers cached by podman: the packages'
#     layers are reused while the base is; the compile runs when the sources change), with
#     MESH_COMMIT set to this checkout's commit; extra `podman build` arguments from
#     MESH_IMAGE_BUILD_ARGS (the test command passes --build-arg MESH_WERROR=ON);
#   - the stand-in nats image (tests/containers/nats.Containerfile) from Debian's 2.10.27.
# Then checks that the reconciler image names its commit, runs as 10001, holds no compiler, and
# that --version and --help work in it; and that the nats stand-in has the official image's
# paths, entrypoint and command.
# Usage: image_test.sh NATS_SERVER_2_10_27_BINARY   (scripts/fetch-nats-server.sh prints it)
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root" || exit 1
# shellcheck source=tests/scripts/lib.sh
source "$root/tests/scripts/lib.sh"
# shellcheck source=tests/containers/podman.sh
source "$root/tests/containers/podman.sh"
nats_binary="${1:-$(bash scripts/fetch-nats-server.sh)}"
test_lib_init image_test

commit="$(git -C "$root" rev-parse --short=12 HEAD)"
# A commit with uncommitted changes is still named by its commit (as a local build's
# --version); the build's context is the work tree.

build_base() { bash tests/containers/base.sh; }

build_reconciler_image() {
  local started=$SECONDS
  # shellcheck disable=SC2086  # MESH_IMAGE_BUILD_ARGS: words on purpose
  podman build --network host --build-arg MESH_COMMIT="$commit" ${MESH_IMAGE_BUILD_ARGS:-} \
    -t "$kReconcilerImage" -f Dockerfile . || return 1
  # The build stage's layers stay in podman's cache: the next build reuses them (the packages
  # while the base is the same; the compile while model/, observers/, reconciler/ and
  # CMakeLists.txt are; a new commit alone recompiles build_info.cc).
  echo "built $kReconcilerImage in $((SECONDS - started)) s"
}

build_nats_image() { bash tests/containers/nats-image.sh "$nats_binary"; }

# podman run, removed after, no network.
run() { podman run --rm --network none "$@"; }

version_names_the_commit() {
  local out
  out="$(run "$kReconcilerImage" --version)" || return 1
  echo "$out"
  [[ "$out" == *"$commit"* ]] || return 1
  [[ "$(podman image inspect -f '{{index .Labels "org.opencontainers.image.revision"}}' \
    "$kReconcilerImage")" == "$commit" ]]
}

help_works() {
  local out
  out="$(run "$kReconcilerImage" --help)" || return 1
  grep -q 'render-users' <<<"$out" || return 1
  # The image's CMD is --help: running it bare shows the help too (read whole: under pipefail a
  # `| grep -q` that stops early fails the pipeline when the writer is still writing).
  out="$(run "$kReconcilerImage")" || return 1
  grep -q 'render-users' <<<"$out"
}

runs_as_10001() {
  [[ "$(podman image inspect -f '{{.Config.User}}' "$kReconcilerImage")" == "10001:10001" ]] ||
    return 1
  local ids
  ids="$(run --entrypoint id "$kReconcilerImage")" || return 1
  echo "$ids"
  [[ "$ids" == "uid=10001(mesh) gid=10001(mesh)"* ]]
}

holds_no_compiler() {
  # No compiler binary on disk, and no compiler package installed.
  if run --entrypoint sh "$kReconcilerImage" -c \
    'ls /usr/bin/*gcc* /usr/bin/*g++* /usr/bin/c++ /usr/bin/cc /usr/bin/clang* \
        /usr/lib/gcc 2>/dev/null | grep .'; then
    return 1
  fi
  ! run --entrypoint dpkg-query "$kReconcilerImage" -W -f '${Package}\n' |
    grep -E '^(gcc|g\+\+|cpp|clang|cmake|build-essential)(-[0-9]+)?$'
}

nats_stand_in_matches_the_official_layout() {
  local entry cmd
  entry="$(podman image inspect -f '{{json .Config.Entrypoint}}' "$kNatsImage")"
  cmd="$(podman image inspect -f '{{json .Config.Cmd}}' "$kNatsImage")"
  echo "entrypoint $entry cmd $cmd"
  [[ "$entry" == '["docker-entrypoint.sh"]' ]] || return 1
  [[ "$cmd" == '["nats-server","--config","/etc/nats/nats-server.conf"]' ]] || return 1
  run --entrypoint sh "$kNatsImage" -c \
    'test "$(command -v nats-server)" = /usr/local/bin/nats-server &&
     test -f /etc/nats/nats-server.conf' || return 1
  # As upstream's entrypoint: flags first are nats-server's; the chart's command runs as is.
  run "$kNatsImage" --version | grep 'v2\.10\.27' || return 1
  run "$kNatsImage" nats-server --version | grep 'v2\.10\.27' || return 1
  # The default command's configuration is valid.
  run "$kNatsImage" nats-server -t --config /etc/nats/nats-server.conf
}

run_test "the debian:12 base, from Debian's archive (or the cache)" build_base
if [[ $failed -eq 0 ]]; then
  run_test "the Dockerfile as shipped builds (podman)" build_reconciler_image
  run_test "the stand-in nats image builds" build_nats_image
fi
if [[ $failed -eq 0 ]]; then
  run_test "--version names the commit $commit (and the image's revision label)" \
    version_names_the_commit
  run_test "--help works (and is the image's default command)" help_works
  run_test "the image runs as 10001:10001" runs_as_10001
  run_test "the image holds no compiler" holds_no_compiler
  run_test "the nats stand-in has the official image's paths, entrypoint and command" \
    nats_stand_in_matches_the_official_layout
fi
test_lib_finish
