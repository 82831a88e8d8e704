#!/usr/bin/env bash
# The include graph follows the layers of docs/architecture.md ("Layers"). The declared graph is
# CMakeLists.txt's `mesh_layer(NAME FOLDER DEPENDENCIES...)` lines, which also link each layer's
# library to the libraries of its dependencies: so the links and the includes follow one graph.
# Every source file of model/, observers/ and reconciler/ lies in a declared folder; every
# `#include "…"` names a folder the including folder may depend on (so nothing includes the
# CLI, and no layer reaches into tests/ or bench/); the pure layers include no I/O library; the
# HTTP handler builds without cnats; and the CLI's own header is included by its commands alone.
# A failure names the file, the line and the rule.
# Standalone: bash tests/scripts/include_graph_test.sh
set -uo pipefail

root="${MESH_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
cd "$root" || exit 1
source "$root/tests/scripts/lib.sh"
test_lib_init include_graph_test

# The declared graph, read from CMakeLists.txt: folder -> the folders it may include.
declare -A folder_of=()    # layer name -> folder
declare -A may_include=()  # folder -> folders
read_layers() {
  local name folder dependencies dependency lines
  lines=$(sed -n -E 's/^mesh_layer\(([a-z_]+)[[:space:]]+([a-z_/]+)[[:space:]]*([a-z_ ]*)\)[[:space:]]*$/\1 \2 \3/p' CMakeLists.txt)
  while read -r name folder dependencies; do
    folder_of[$name]="$folder"
  done <<<"$lines"
  # Dependencies are named by layer; a second reading, once every layer's folder is known.
  while read -r name folder dependencies; do
    may_include[$folder]=""
    for dependency in $dependencies; do
      may_include[$folder]+="${folder_of[$dependency]:-?$dependency} "
    done
  done <<<"$lines"
}
read_layers

# Libraries a folder must not include (prefixes of <…> paths): the pure core and the planner
# do no I/O and read no bus; metrics belong to the daemon, not to what observes or serves.
declare -A must_not_include=(
  [model]="nats/ boost/ prometheus/ sys/socket.h netinet/ openssl/ssl.h"
  [observers]="prometheus/"
  [reconciler/base]="nats/ boost/ prometheus/"
  [reconciler/plan]="nats/ boost/ prometheus/ sys/socket.h netinet/"
  [reconciler/http]="nats/ prometheus/"
)
# The pure HTTP handler: nothing it includes, however deep, is cnats.
handler="reconciler/http/http_handler.cc"
# The CLI's header: its commands are the top of the graph, nothing else calls them (but the
# help, man page and completion generators, which read the command table).
cli_header="reconciler/cli/commands.h"
cli_files_regex='^reconciler/cli/(main\.cc|cmd_[a-z_]+\.cc|help\.cc|completion\.(h|cc))$'

layer_files() {
  git ls-files -- 'model/*' 'observers/*' 'reconciler/*' | grep -E '\.(h|cc)$'
}

# "path:line:target" for every quoted include in the layer folders.
quoted_includes() {
  layer_files | xargs grep -n -H -E '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' |
    sed -E 's/^([^:]+):([0-9]+):[^"]*"([^"]+)".*/\1:\2:\3/'
}

system_includes() {
  layer_files | xargs grep -n -H -E '^[[:space:]]*#[[:space:]]*include[[:space:]]*<' |
    sed -E 's/^([^:]+):([0-9]+):[^<]*<([^>]+)>.*/\1:\2:\3/'
}

graph_is_declared() {
  local status=0 name
  [ "${#folder_of[@]}" -ge 9 ] || {
    echo "CMakeLists.txt declares ${#folder_of[@]} layers (mesh_layer lines); expected 9 or more"
    status=1
  }
  for name in "${!folder_of[@]}"; do
    [ -d "${folder_of[$name]}" ] || { echo "layer $name: no folder ${folder_of[$name]}"; status=1; }
  done
  if [[ " ${may_include[*]} " == *"?"* ]]; then
    echo "a mesh_layer line names a dependency that is not a layer: ${may_include[*]}"
    status=1
  fi
  return "$status"
}

every_file_in_a_layer() {
  local file status=0 count=0
  while read -r file; do
    count=$((count + 1))
    if [[ -z "${may_include[${file%/*}]+set}" ]]; then
      echo "$file: folder ${file%/*} is not a declared layer (CMakeLists.txt, mesh_layer)"
      status=1
    fi
  done < <(layer_files)
  finish_scan "$count" files "$status"
}

folders_follow_the_graph() {
  local file line target from to status=0 count=0
  while IFS=: read -r file line target; do
    count=$((count + 1))
    from="${file%/*}"
    to="${target%/*}"
    [ "$to" != "$target" ] || {
      echo "$file:$line: \"$target\" is not a path from the source root"
      status=1
      continue
    }
    [ "$to" = "$from" ] && continue
    if [[ -z "${may_include[$from]+set}" ]]; then
      echo "$file:$line: folder $from is not in the declared graph"
      status=1
    elif [[ " ${may_include[$from]} " != *" $to "* ]]; then
      echo "$file:$line: $from may not include $to (\"$target\")"
      status=1
    fi
  done < <(quoted_includes)
  finish_scan "$count" includes "$status"
}

# No library of ours is linked to another outside its mesh_layer line.
links_only_through_layers() {
  local status=0 hits layers
  layers=$(printf '%s|' "${!folder_of[@]}")
  layers="${layers%|}"
  hits=$(grep -n -E "^[[:space:]]*target_link_libraries\\(mesh_($layers)[[:space:]].*[[:space:]]mesh_($layers)([[:space:]]|\\))" CMakeLists.txt)
  if [ -n "$hits" ]; then
    echo "CMakeLists.txt links layers outside mesh_layer:"
    echo "$hits"
    status=1
  fi
  return "$status"
}

no_forbidden_library() {
  local file line target from prefix status=0
  while IFS=: read -r file line target; do
    from="${file%/*}"
    for prefix in ${must_not_include[$from]:-}; do
      if [[ "$target" == "$prefix"* ]]; then
        echo "$file:$line: $from may not include <$target>"
        status=1
      fi
    done
  done < <(system_includes)
  return "$status"
}

# Follows quoted includes from the handler; every system include met on the way is checked.
handler_builds_without_cnats() {
  local -A seen=()
  local queue=("$handler") file target status=0 count=0
  [ -f "$handler" ] || { echo "$handler: missing"; return 1; }
  while [ "${#queue[@]}" -gt 0 ]; do
    file="${queue[0]}"
    queue=("${queue[@]:1}")
    [ -n "${seen[$file]+set}" ] && continue
    seen[$file]=1
    count=$((count + 1))
    while read -r target; do
      [ -f "$target" ] && queue+=("$target")
    done < <(sed -n -E 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"([^"]+)".*/\1/p' "$file")
    while read -r target; do
      if [[ "$target" == nats/* ]]; then
        echo "$file includes <$target>, and $handler includes $file"
        status=1
      fi
    done < <(sed -n -E 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*<([^>]+)>.*/\1/p' "$file")
  done
  [ "$count" -ge 3 ] || { echo "only $count files followed from $handler"; status=1; }
  return "$status"
}

cli_header_included_by_the_commands_only() {
  local file line target status=0
  while IFS=: read -r file line target; do
    [ "$target" = "$cli_header" ] || continue
    if ! [[ "$file" =~ $cli_files_regex ]]; then
      echo "$file:$line: includes the CLI's $cli_header"
      status=1
    fi
  done < <(quoted_includes)
  return "$status"
}

run_test "CMakeLists.txt declares the layers, each with its folder" graph_is_declared
run_test "every source file lies in a declared layer" every_file_in_a_layer
run_test "every include goes down the declared graph" folders_follow_the_graph
run_test "layers are linked only along the declared graph" links_only_through_layers
run_test "the pure layers include no I/O library, observers and http no metrics library" no_forbidden_library
run_test "the HTTP handler includes nothing of cnats, however deep" handler_builds_without_cnats
run_test "only main, the commands and the help and completion generators include $cli_header" cli_header_included_by_the_commands_only
test_lib_finish
