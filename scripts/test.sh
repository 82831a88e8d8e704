#!/usr/bin/env bash
# The README's test command: installs what the tests need, builds, and runs every test:
#   1. main:  the whole suite (unit, integration against real nats-server / Prometheus,
#             chart, alert rules, demo) on a RelWithDebInfo build with -Werror (MESH_WERROR),
#             against Debian 12's nats-server 2.9.10; then the tests that run a server (CTest
#             label "server") once more against Debian 13's 2.10.27
#             (scripts/fetch-nats-server.sh);
#   2. image: the Dockerfile as shipped, built with podman (Release, -Werror: the one Release
#             build of the command, where an optimisation-only warning shows) on a debian:12
#             base made from Debian's archive (tests/containers/base.sh, cached in .cache/), and
#             the stand-in nats image; then the images are checked (tests/containers/image_test.sh);
#   3. pods:  the chart's pods under `podman kube play` (tests/containers/pod_test.sh): one
#             pod, the overlay on the vendored official chart, and three pods of replicas: 3;
#   4. asan:  the CTest suite again under AddressSanitizer + UndefinedBehaviorSanitizer, but for
#             the checks of the sources (label "static": format, include graph...), which
#             no build changes;
#   5. tsan:  the same under ThreadSanitizer;
#   6. fuzz:  every layer built with clang, whose -Wthread-safety checks the lock annotations
#             (model/thread_safety.h), then each libFuzzer target for a bounded time, starting
#             from tests/fuzz/corpus.
# Exits non-zero when any step or any test fails. MESH_TEST_STAGES="main" runs a subset (the
# default is "main image pods asan tsan fuzz"; "pods" needs the images of "image", built by an
# earlier run at least). Without "image", "main" builds the binary in Release (-Werror)
# itself.
# MESH_FUZZ_SECONDS sets each fuzzer's time (default 60).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root="$PWD"
jobs="${MESH_JOBS:-2}"
stages="${MESH_TEST_STAGES:-main image pods asan tsan fuzz}"
fuzz_seconds="${MESH_FUZZ_SECONDS:-60}"

stage() { echo; echo "======== $* ($(date -u +%H:%M:%S))"; }
has_stage() { [[ " $stages " == *" $1 "* ]]; }

lists=(build test)
# podman, runc, debootstrap... (scripts/packages-image.txt)
if has_stage image || has_stage pods; then lists+=(image); fi
bash scripts/install-deps.sh "${lists[@]}"
bash scripts/install-test-tools.sh
export PATH="$root/.tools/bin:$PATH"
# The second server of the matrix (and of the stand-in nats image), fetched first so that a
# failing download fails at once.
if has_stage main || has_stage image; then
  nats_server_2_10="$(bash scripts/fetch-nats-server.sh)"
fi

# Configures and builds the whole project in DIR with the extra CMake arguments, then runs the
# CTest suite there, less the tests labelled LABEL_EXCLUDE ("" for none). Sanitizer options
# reach the tests through the caller's environment.
build_and_test() {
  local name="$1" dir="$2" label_exclude="$3"
  shift 3
  stage "$name: build"
  # -g1 (line tables: sanitizer and crash stacks still name file and line) instead of -g: a
  # quarter less compile time on the Beast-heavy files, and half the object size.
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" -DMESH_WERROR=ON "$@" >/dev/null
  cmake --build "$dir" -j"$jobs"
  stage "$name: tests"
  ctest --test-dir "$dir" --output-on-failure -j"$jobs" --timeout 900 \
    ${label_exclude:+--label-exclude "$label_exclude"}
}

if has_stage main; then
  build_and_test "main (RelWithDebInfo, -Werror)" build ""
  # The tests that run a server (tagged [server]; tests/support/nats_server.h refuses an
  # untagged one), again: each takes its binary from MESH_NATS_SERVER.
  stage "main: the server tests again, against $("$nats_server_2_10" --version)"
  MESH_NATS_SERVER="$nats_server_2_10" \
    ctest --test-dir build -L server --output-on-failure -j"$jobs" --timeout 900
  if ! has_stage image; then
    # The command's one Release build (the image stage's Dockerfile build is it otherwise):
    # some warnings (g++ 12's -Wrestrict, -Wmaybe-uninitialized...) only show when optimising
    # for it. The binary alone: the tests already ran on the RelWithDebInfo build.
    stage "main: Release build of the binary, -Werror"
    cmake -S . -B build-release -G Ninja -DCMAKE_BUILD_TYPE=Release -DMESH_WERROR=ON \
      -DMESH_BUILD_TESTS=OFF >/dev/null
    cmake --build build-release -j"$jobs" --target mesh-reconciler
  fi
fi

if has_stage image; then
  stage "image: the Dockerfile (Release, -Werror) and the stand-in nats image, with podman"
  MESH_IMAGE_BUILD_ARGS="--build-arg MESH_WERROR=ON" \
    bash tests/containers/image_test.sh "$nats_server_2_10"
fi

if has_stage pods; then
  stage "pods: the chart's pods under podman kube play"
  bash tests/containers/pod_test.sh
fi

if has_stage asan; then
  # -O1, as AddressSanitizer's documentation advises: UBSan's checks at -O2 made the two
  # Beast-heavy files take four minutes each (a third less at -O1), the stage's longest poles.
  ASAN_OPTIONS="detect_leaks=1:abort_on_error=1" UBSAN_OPTIONS="print_stacktrace=1" \
    build_and_test "asan (AddressSanitizer + UndefinedBehaviorSanitizer)" build-asan static \
    -DMESH_SANITIZE="address;undefined" -DMESH_BUILD_BENCH=OFF \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG"
fi

if has_stage tsan; then
  # tests/sanitizers/tsan.supp says what it suppresses (OpenSSL's own calls) and why.
  TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$root/tests/sanitizers/tsan.supp" \
    build_and_test "tsan (ThreadSanitizer)" build-tsan static \
    -DMESH_SANITIZE="thread" -DMESH_BUILD_BENCH=OFF
fi

if has_stage fuzz; then
  stage "fuzz: libFuzzer targets, ${fuzz_seconds}s each"
  CXX=clang++ CC=clang cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DMESH_BUILD_FUZZ=ON -DMESH_BUILD_BENCH=OFF >/dev/null
  # Every layer too, not only the fuzz targets: clang checks the thread-safety annotations
  # (-Wthread-safety, as errors) where g++ cannot.
  cmake --build build-fuzz -j"$jobs" --target fuzz_targets mesh_cli
  for target in build-fuzz/*_fuzz; do
    name="$(basename "$target")"
    corpus="$(mktemp -d)"
    short="${name%_fuzz}"
    cp -r "tests/fuzz/corpus/$short/." "$corpus/" 2>/dev/null || true
    cp -r "tests/fuzz/regressions/$short/." "$corpus/" 2>/dev/null || true
    dict=(); [ -f "tests/fuzz/$short.dict" ] && dict=(-dict="tests/fuzz/$short.dict")
    echo "-- $name"
    if ! "$target" -max_total_time="$fuzz_seconds" -print_final_stats=1 "${dict[@]}" \
      -artifact_prefix="$root/build-fuzz/$name-" "$corpus" 2>&1 | tail -n 15; then
      rm -rf "$corpus"
      echo "$name found a failing input: build-fuzz/$name-{crash,leak,timeout,oom}-*"
      echo "Copy it into tests/fuzz/regressions/$short/ and fix the code (tests/fuzz/README.md)."
      exit 1
    fi
    rm -rf "$corpus"
  done
fi
stage "all stages passed: $stages"
