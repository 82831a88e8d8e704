#!/usr/bin/env bash
# `cmake --install` of the build into a DESTDIR puts exactly the binary, the man page and the
# bash, zsh and fish completions where Debian expects them (bin/, share/man/man1/,
# share/bash-completion/completions/, share/zsh/vendor-completions/_mesh-reconciler,
# share/fish/vendor_completions.d/mesh-reconciler.fish under the prefix), and each works from
# there.
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
    /usr/share/fish/vendor_completions.d/mesh-reconciler.fish \
    /usr/share/man/man1/mesh-reconciler.1 \
    /usr/share/zsh/vendor-completions/_mesh-reconciler)"
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
  grep -q '^\.TH MESH\\-RECONCILER 1 ' "$page" || return 1
  # The binary wrote it (`mesh-reconciler man`): a section for each command of its --help.
  grep -qx '\.SS "render\\-users"' "$page" && grep -qx '\.SS "delete\\-consumer"' "$page"
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

zsh_and_fish_completions_load() {
  local zfile="$dest/usr/share/zsh/vendor-completions/_mesh-reconciler"
  local ffile="$dest/usr/share/fish/vendor_completions.d/mesh-reconciler.fish"
  # zsh: compinit finds it in a folder of $fpath (Debian's zsh has vendor-completions there)
  # and binds it to the command by its #compdef line.
  zsh -f -c "fpath=('${zfile%/*}' \$fpath); autoload -U compinit; compinit -u -d '$work/zcompdump'
    [[ \${_comps[mesh-reconciler]} == _mesh-reconciler ]]" || return 1
  # fish: loaded by the command's name; offers the commands.
  fish -c "source '$ffile'; complete -C 'mesh-reconciler ren'" | tee /dev/stderr | grep -q '^render-users'
}

run_test "cmake --install into a DESTDIR succeeds" install_into_destdir
run_test "it installs exactly bin/, man1/ and the bash, zsh and fish completions" exact_layout
run_test "the installed binary runs (--version)" installed_binary_runs
run_test "the man page is in section 1 and documents the binary's commands" man_page_is_the_binarys
run_test "the bash completion registers and completes a command" completion_completes
run_test "the zsh and fish completions load where the shells look and complete a command" zsh_and_fish_completions_load
test_lib_finish
