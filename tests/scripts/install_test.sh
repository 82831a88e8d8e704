#!/usr/bin/env bash
# `cmake --install` of the build into a DESTDIR puts exactly the binary, the man page and the
# bash completion where Debian expects them (bin/, share/man/man1/,
# share/bash-completion/completions/ under the prefix), and each works from there.
# Run by CTest (MESH_BUILD_DIR is set); standalone: MESH_BUILD_DIR=build bash tests/scripts/...
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=tests/scripts/lib.sh
source "$root/tests/scripts/lib.sh"
test_lib_init install_test
build="${MESH_BUILD_DIR:?MESH_BUILD_DIR: the CMake build folder}"
dest="$work/dest"

install_into_destdir() {
  DESTDIR="$dest" cmake --install "$build" --prefix /usr
}

exact_layout() {
  local want got
  want="$(printf '%s\n' /usr/bin/mesh-reconciler \
    /usr/share/bash-completion/completions/mesh-reconciler \
    /usr/share/man/man1/mesh-reconciler.1)"
  got="$(cd "$dest" && find . -type f | sed 's/^\.//' | sort)"
  echo "installed:"
  echo "$got"
  [[ "$got" == "$want" ]]
}

installed_binary_runs() {
  [[ -x "$dest/usr/bin/mesh-reconciler" ]] || return 1
  "$dest/usr/bin/mesh-reconciler" --version | tee /dev/stderr | grep -q '^mesh-reconciler '
}

man_page_is_the_binarys() {
  local page="$dest/usr/share/man/man1/mesh-reconciler.1"
  head -n 5 "$page"
  grep -q '^\.TH MESH-RECONCILER "1"' "$page" || return 1
  # help2man wrote it from this binary's --help: a subcommand of the help is in it.
  grep -q 'render\\-users' "$page"
}

completion_completes() {
  local file="$dest/usr/share/bash-completion/completions/mesh-reconciler"
  # bash-completion loads it by the command's name and expects `complete` for that name.
  bash -c "source '$file' && complete -p mesh-reconciler" || return 1
  # The commands it offers are the binary's.
  bash -c "source '$file'
    COMP_WORDS=(mesh-reconciler ren); COMP_CWORD=1; COMPREPLY=()
    fn=\$(complete -p mesh-reconciler | sed -n 's/.*-F \\([^ ]*\\).*/\\1/p')
    \"\$fn\" mesh-reconciler ren mesh-reconciler
    printf '%s\n' \"\${COMPREPLY[@]}\"" | tee /dev/stderr | grep -qx render-users
}

run_test "cmake --install into a DESTDIR succeeds" install_into_destdir
run_test "it installs exactly bin/, man1/ and bash-completion/completions/ files" exact_layout
run_test "the installed binary runs (--version)" installed_binary_runs
run_test "the man page is in section 1 and documents the binary's commands" man_page_is_the_binarys
run_test "the bash completion registers and completes a command" completion_completes
test_lib_finish
