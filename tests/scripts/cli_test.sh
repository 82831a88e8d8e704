#!/usr/bin/env bash
# The CLI a person expects, run as the real binary (MESH_BINARY):
#   - --version names the version and the source commit;
#   - help COMMAND prints exactly what COMMAND --help prints; an unknown one is a usage error;
#   - `completion bash` is valid bash, completes commands, flags (every flag some command's
#     --help names), file names after a flag that takes one, and --log-level's words;
#   - the man page (build/mesh-reconciler.1, help2man from --help and --version) names every
#     command and the version.
set -uo pipefail

root="${MESH_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
cd "$root" || exit 1
bin="${MESH_BINARY:?MESH_BINARY: the mesh-reconciler binary (CTest sets it)}"
build="${MESH_BUILD_DIR:-$(dirname "$bin")}"
source "$root/tests/scripts/lib.sh"
test_lib_init cli_test

mapfile -t commands < <("$bin" --help | sed -n '/^Commands:/,/^$/s/^  \([a-z-]*\) .*/\1/p')

version_names_commit() {
  local out
  out="$("$bin" --version)" || return 1
  echo "$out"
  [[ "$out" =~ ^mesh-reconciler\ [0-9]+\.[0-9]+\.[0-9]+\ \(commit\ ([0-9a-f]{12}|unknown)\)$ ]]
}

help_command_is_command_help() {
  ((${#commands[@]} >= 8)) || { echo "only ${#commands[@]} commands in --help"; return 1; }
  local c
  for c in "${commands[@]}"; do
    cmp <("$bin" help "$c") <("$bin" "$c" --help) || { echo "help $c differs from $c --help"; return 1; }
  done
  "$bin" help no-such-command >/dev/null 2>&1
  local code=$?
  [[ $code -eq 64 ]] || { echo "help no-such-command exited $code, not 64"; return 1; }
  echo "${#commands[@]} commands"
}

# Completes the words "$@" (the last one is being typed) with the generated script.
complete_words() {
  bash -c 'source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1));
           _mesh_reconciler; printf "%s\n" "${COMPREPLY[@]}"' _ "$work/completion.bash" "$@"
}

completion_completes() {
  "$bin" completion bash >"$work/completion.bash" || return 1
  bash -n "$work/completion.bash" || return 1
  [[ "$(complete_words mesh-reconciler pl)" == "plan" ]] || { echo "pl -> $(complete_words mesh-reconciler pl)"; return 1; }
  [[ "$(complete_words mesh-reconciler help rel)" == "release" ]] || { echo "help rel"; return 1; }
  [[ "$(complete_words mesh-reconciler plan --reco)" == "--records" ]] || { echo "--reco"; return 1; }
  [[ "$(complete_words mesh-reconciler run --log-level w)" == "warn" ]] || { echo "--log-level w"; return 1; }
  touch "$work/records-for-completion.json"
  [[ "$(complete_words mesh-reconciler plan --records "$work/records-for")" == "$work/records-for-completion.json" ]] ||
    { echo "no file name after --records"; return 1; }
  # Every flag that some command's help names is offered.
  local c flag offered ok=0
  offered="$(complete_words mesh-reconciler plan --)"
  for c in "${commands[@]}"; do
    for flag in $("$bin" "$c" --help | grep -o -E '(^|[ ,])--[a-z][a-z-]*' | tr -d ' ,' | sort -u); do
      grep -qx -- "$flag" <<<"$offered" || { echo "$c --help names $flag, completion lacks it"; ok=1; }
    done
  done
  return $ok
}

man_page_names_everything() {
  local page="$build/mesh-reconciler.1"
  [[ -s "$page" ]] || { echo "no $page (the build's man target)"; return 1; }
  local c ok=0 version
  sed 's/\\-/-/g' "$page" >"$work/page.txt"
  for c in "${commands[@]}"; do grep -q -- "$c" "$work/page.txt" || { echo "the man page lacks $c"; ok=1; }; done
  version="$("$bin" --version | awk '{print $2}')"
  grep -q "$version" "$work/page.txt" || { echo "the man page lacks version $version"; ok=1; }
  grep -q MESH_RECONCILER_PASSWORD "$work/page.txt" || { echo "the man page lacks the environment section"; ok=1; }
  return $ok
}

run_test "--version names the version and the commit" version_names_commit
run_test "help COMMAND is COMMAND --help; an unknown command is a usage error" help_command_is_command_help
run_test "completion bash completes commands, flags, files and values" completion_completes
run_test "the man page names every command, the version and the environment" man_page_names_everything

test_lib_finish
