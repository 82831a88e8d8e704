#!/usr/bin/env bash
# The CLI a person used to kubectl and helm expects, run as the real binary (MESH_BINARY):
#   - --version names the version and the source commit; `version --bogus` is a usage error;
#   - help COMMAND prints exactly what COMMAND --help prints; an unknown one is a usage error;
#     `completion --help` is help (exit 0);
#   - each command's --help lists exactly the flags it accepts (another command's flag is
#     refused), each in its own words;
#   - -o json / --output json are --json; -o with another value is refused (64);
#   - stray or missing arguments and a flag value that looks like a flag are refused (64) by
#     every command, at once (`run` without --bus does not retry for ever);
#   - a failed plan says its error once;
#   - `completion bash|zsh|fish` are valid scripts; each command completes its own flags, the
#     words of enumerated flags, file names only after a file flag;
#   - the man page (build/mesh-reconciler.1, `mesh-reconciler man`) has every command and each
#     command's every flag, and a footer with the version and the commit.
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
  # Each command offers exactly the flags its --help lists.
  local c ok=0
  for c in "${commands[@]}"; do
    cmp -s <(complete_words mesh-reconciler "$c" -- | sort -u) <(help_flags "$c") ||
      { echo "$c: completion offers $(complete_words mesh-reconciler "$c" -- | tr '\n' ' '), --help lists $(help_flags "$c" | tr '\n' ' ')"; ok=1; }
  done
  # Values, not file names, after an enumerated flag; nothing after a URL; files for a file.
  [[ "$(complete_words mesh-reconciler plan --users-scope "" | tr '\n' ' ')" == "server account " ]] ||
    { echo "--users-scope -> $(complete_words mesh-reconciler plan --users-scope "")"; ok=1; }
  [[ "$(complete_words mesh-reconciler plan -o "")" == json ]] || { echo "-o"; ok=1; }
  [[ -z "$(complete_words mesh-reconciler plan --bus "$work/")" ]] || { echo "file names after --bus"; ok=1; }
  [[ -z "$(complete_words mesh-reconciler show-stream "$work/")" ]] || { echo "file names as a stream's name"; ok=1; }
  [[ "$(complete_words mesh-reconciler validate "$work/records-for")" == "$work/records-for-completion.json" ]] ||
    { echo "no file name as validate's RECORDS"; ok=1; }
  [[ "$(complete_words mesh-reconciler completion z)" == zsh ]] || { echo "completion z"; ok=1; }
  return $ok
}

# Every flag a command's --help lists: the "--name" at the start of its Flags lines.
help_flags() {
  "$bin" "$1" --help | sed -n '/^Flags/,$p' | grep -o -E '^  (-[a-z], )?--[a-z][a-z-]*' |
    grep -o -E -- '--[a-z-]+' | sort -u
}

every_flag() {
  local c
  for c in "${commands[@]}"; do help_flags "$c"; done | sort -u
}

each_help_lists_its_own_flags() {
  local c flag ok=0 all listed out code
  all="$(every_flag)"
  for c in "${commands[@]}"; do
    listed="$(help_flags "$c")"
    [[ -n "$listed" ]] || { echo "$c --help lists no flags"; ok=1; continue; }
    for flag in $all; do
      [[ $flag == --help ]] && continue
      out="$(env -i "$bin" "$c" "$flag" 2>&1 </dev/null)"
      code=$?
      if grep -qx -- "$flag" <<<"$listed"; then
        if grep -q "is not a flag of this command" <<<"$out"; then
          echo "$c lists $flag but refuses it"
          ok=1
        fi
      elif [[ $code -ne 64 ]] || ! grep -q -- "$flag is not a flag of this command" <<<"$out"; then
        echo "$c does not list $flag but did not refuse it (exit $code): $out"
        ok=1
      fi
    done
  done
  # The issue's two: run refuses --json, so its help must not list it; show-stream's --records
  # is not delete-stream's.
  if help_flags run | grep -qx -- --json; then echo "run --help lists --json"; ok=1; fi
  if "$bin" show-stream --help | grep -A1 -- '--records' | grep -q -i 'delete'; then
    echo "show-stream --help describes --records with the delete command's words"
    ok=1
  fi
  "$bin" delete-stream --help | grep -A1 -- '--records' | grep -q 'deleted' ||
    { echo "delete-stream --help: --records lacks its own words"; ok=1; }
  return $ok
}

output_json_is_json() {
  local records="$root/examples/records.json" ok=0 form code
  "$bin" validate "$records" --json >"$work/json.txt" || return 1
  for form in "-o json" "-ojson" "-o=json" "--output json" "--output=json"; do
    # shellcheck disable=SC2086
    "$bin" validate "$records" $form >"$work/o.txt" || { echo "validate $form failed"; ok=1; }
    cmp -s "$work/json.txt" "$work/o.txt" || { echo "validate $form is not --json"; ok=1; }
  done
  for form in "-o yaml" "-o table" "--output wide" "-o"; do
    # shellcheck disable=SC2086
    "$bin" validate "$records" $form >/dev/null 2>&1
    code=$?
    [[ $code -eq 64 ]] || { echo "validate $form exited $code, not 64"; ok=1; }
  done
  "$bin" run -o json >/dev/null 2>&1
  code=$?
  [[ $code -eq 64 ]] || { echo "run -o json exited $code, not 64"; ok=1; }
  return $ok
}

# Each line: the arguments (shell words) of a call that must exit 64 at once (within the
# timeout: `run` without --bus retried for ever).
usage_errors_are_64() {
  local ok=0 args code records="$root/examples/records.json"
  while read -r args; do
    [[ -z "$args" ]] && continue
    # shellcheck disable=SC2086
    env -i PATH="$PATH" timeout 20 "$bin" $args >"$work/usage.txt" 2>&1 </dev/null
    code=$?
    [[ $code -eq 64 ]] || { echo "mesh-reconciler $args exited $code, not 64: $(head -3 "$work/usage.txt")"; ok=1; }
  done <<ARGS
version --bogus
version extra
--version --bogus
man extra
completion
completion tcsh
completion bash extra
help plan extra
run extra --records $records --bus nats://127.0.0.1:4222
run --records --bus nats://127.0.0.1:4222
run --records $records
run --bus nats://127.0.0.1:4222
run --json --records $records --bus nats://127.0.0.1:4222
plan $records extra --bus nats://127.0.0.1:4222
plan --records $records --bus
plan --records $records --bus --json
reconcile --once $records extra --bus nats://127.0.0.1:4222
validate
validate $records extra
validate -x $records
desired
desired $records extra
render-users $records extra
hold extra --remote http://127.0.0.1:9
release extra --remote http://127.0.0.1:9
show-stream --bus nats://127.0.0.1:4222
show-stream A B --bus nats://127.0.0.1:4222
show-consumer A --bus nats://127.0.0.1:4222
show-consumer A B C --bus nats://127.0.0.1:4222
delete-stream --yes --bus nats://127.0.0.1:4222
delete-stream A B --yes --bus nats://127.0.0.1:4222
delete-consumer A --yes --bus nats://127.0.0.1:4222
ARGS
  # Help still answers.
  "$bin" completion --help | grep -q 'completion bash|zsh|fish' || { echo "completion --help"; ok=1; }
  "$bin" version --help >/dev/null || { echo "version --help"; ok=1; }
  return $ok
}

# `plan` against a bus that is not there printed its error three times (the report, the pass's
# log line, stderr).
error_said_once() {
  local port out n
  port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
  out="$(env -i PATH="$PATH" MESH_RECONCILER_PASSWORD=x "$bin" plan --records "$root/examples/records.json" \
    --bus "nats://127.0.0.1:$port" 2>&1)"
  echo "$out"
  n="$(grep -c "connect to nats://127.0.0.1:$port" <<<"$out")"
  [[ $n -eq 1 ]] || { echo "the error is said $n times"; return 1; }
}

zsh_and_fish_complete() {
  local ok=0
  "$bin" completion zsh >"$work/_mesh-reconciler" || return 1
  "$bin" completion fish >"$work/mesh-reconciler.fish" || return 1
  head -1 "$work/_mesh-reconciler" | grep -qx '#compdef mesh-reconciler' || { echo "no #compdef line"; ok=1; }
  zsh -n "$work/_mesh-reconciler" || { echo "zsh: not valid"; ok=1; }
  # Autoloaded from $fpath by compinit, it is bound to the command.
  zsh -f -c "fpath=('$work' \$fpath); autoload -U compinit; compinit -u -d '$work/zcompdump';
    [[ \${_comps[mesh-reconciler]} == _mesh-reconciler ]]" || { echo "zsh: compinit does not bind it"; ok=1; }
  # Each command's flags are in its own _arguments, with the values of enumerated flags.
  sed -n '/^    plan)/,/;;$/p' "$work/_mesh-reconciler" | grep -q -- "--users-scope=\[.*:SCOPE:(server account)" ||
    { echo "zsh: plan's --users-scope lacks its words"; ok=1; }
  if sed -n '/^    run)/,/;;$/p' "$work/_mesh-reconciler" | grep -q -- "'--json"; then
    echo "zsh: run offers --json"
    ok=1
  fi
  fish -n "$work/mesh-reconciler.fish" || { echo "fish: not valid"; ok=1; }
  fc() { fish -c "source '$work/mesh-reconciler.fish'; complete -C '$1'" | cut -f1; }
  [[ "$(fc 'mesh-reconciler pl')" == plan ]] || { echo "fish: pl -> $(fc 'mesh-reconciler pl')"; ok=1; }
  [[ "$(fc 'mesh-reconciler plan --users-scope ' | sort | tr '\n' ' ')" == "account server " ]] ||
    { echo "fish: --users-scope -> $(fc 'mesh-reconciler plan --users-scope ')"; ok=1; }
  [[ "$(fc 'mesh-reconciler plan --js')" == --json ]] || { echo "fish: plan --js"; ok=1; }
  [[ -z "$(fc 'mesh-reconciler run --js')" ]] || { echo "fish: run offers --json"; ok=1; }
  [[ "$(fc 'mesh-reconciler completion ' | sort | tr '\n' ' ')" == "bash fish zsh " ]] || { echo "fish: completion"; ok=1; }
  touch "$work/records-for-fish.json"
  [[ "$(fc "mesh-reconciler plan --records $work/records-for-f")" == "$work/records-for-fish.json" ]] ||
    { echo "fish: no file name after --records"; ok=1; }
  [[ -z "$(fc "mesh-reconciler plan --users-scope $work/records-for-f")" ]] ||
    { echo "fish: file names after --users-scope"; ok=1; }
  return $ok
}

man_page_names_everything() {
  local page="$build/mesh-reconciler.1"
  [[ -s "$page" ]] || { echo "no $page (the build's man target)"; return 1; }
  cmp -s "$page" <("$bin" man) || { echo "$page is not \`mesh-reconciler man\`"; return 1; }
  local c ok=0 version flag
  sed 's/\\-/-/g' "$page" >"$work/page.txt"
  # A section per command, and in it each flag its --help lists.
  for c in "${commands[@]}"; do
    grep -qx ".SS \"$c\"" "$work/page.txt" || { echo "the man page has no section for $c"; ok=1; continue; }
    awk -v c=".SS \"$c\"" '$0 == c {on=1; next} /^\.S[SH] / {on=0} on' "$work/page.txt" >"$work/section.txt"
    for flag in $(help_flags "$c"); do
      grep -q -- "^\.B .*$flag\b" "$work/section.txt" || { echo "the man page's $c lacks $flag"; ok=1; }
    done
  done
  # The footer: version and commit, as --version says them, not run together with a date.
  grep -qF ".TH MESH-RECONCILER 1 \"\" \"$("$bin" --version)\"" "$work/page.txt" ||
    { echo "the .TH line: $(grep '^\.TH' "$work/page.txt")"; ok=1; }
  LC_ALL=C.UTF-8 MANWIDTH=100 man --warnings -l "$page" 2>"$work/man-warnings.txt" >/dev/null
  [[ ! -s "$work/man-warnings.txt" ]] || { cat "$work/man-warnings.txt"; ok=1; }
  version="$("$bin" --version | awk '{print $2}')"
  grep -q "$version" "$work/page.txt" || { echo "the man page lacks version $version"; ok=1; }
  grep -q MESH_RECONCILER_PASSWORD "$work/page.txt" || { echo "the man page lacks the environment section"; ok=1; }
  return $ok
}

run_test "--version names the version and the commit" version_names_commit
run_test "help COMMAND is COMMAND --help; an unknown command is a usage error" help_command_is_command_help
run_test "completion bash: commands, each command's own flags, files and values" completion_completes
run_test "each command's --help lists exactly the flags it accepts, in its own words" each_help_lists_its_own_flags
run_test "-o json and --output json are --json; another -o is refused" output_json_is_json
run_test "stray or missing arguments, flag-like values and unknown flags exit 64 at once" usage_errors_are_64
run_test "a failed plan says its error once" error_said_once
run_test "completion zsh and fish: valid, per command, values for enumerated flags" zsh_and_fish_complete
run_test "the man page: every command, each one's flags, the version and the environment" man_page_names_everything

test_lib_finish
