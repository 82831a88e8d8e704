#!/usr/bin/env bash
# The include graph follows the layers of docs/architecture.md ("Layers"): every `#include "…"`
# in model/, observers/ and reconciler/ names a folder the including folder may depend on, no
# layer reaches into tests/ or bench/, the pure core includes no I/O library, and the CLI's own
# header is included by the CLI alone. A failure names the file, the line and the rule.
# Standalone: bash tests/scripts/include_graph_test.sh
set -uo pipefail

root="${MESH_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
cd "$root" || exit 1
source "$root/tests/scripts/lib.sh"
test_lib_init include_graph_test

# The declared graph: a folder of ours -> the other folders of ours it may include.
declare -A may_include=(
  [model]=""
  [observers]="model"
  [reconciler]="model observers"
)
# Libraries a folder must not include (prefixes of <…> paths): the pure core does no I/O and
# reads no bus; metrics belong to the daemon, not to what observes.
declare -A must_not_include=(
  [model]="nats/ boost/ prometheus/ sys/socket.h netinet/ openssl/ssl.h"
  [observers]="prometheus/"
)
# The CLI's header: its commands are the top of the graph, nothing else calls them.
cli_header="reconciler/commands.h"
cli_files_regex='^reconciler/(main\.cc|cmd_[a-z_]+\.cc)$'

# "path:line:target" for every quoted include in the layer folders.
quoted_includes() {
  git ls-files -- 'model/*' 'observers/*' 'reconciler/*' |
    grep -E '\.(h|cc)$' |
    xargs grep -n -H -E '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' |
    sed -E 's/^([^:]+):([0-9]+):[^"]*"([^"]+)".*/\1:\2:\3/'
}

system_includes() {
  git ls-files -- 'model/*' 'observers/*' 'reconciler/*' |
    grep -E '\.(h|cc)$' |
    xargs grep -n -H -E '^[[:space:]]*#[[:space:]]*include[[:space:]]*<' |
    sed -E 's/^([^:]+):([0-9]+):[^<]*<([^>]+)>.*/\1:\2:\3/'
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

cli_included_by_the_cli_only() {
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

run_test "model -> observers -> reconciler: every include goes down the graph" folders_follow_the_graph
run_test "the pure core includes no I/O library, observers no metrics library" no_forbidden_library
run_test "only the CLI includes $cli_header" cli_included_by_the_cli_only
test_lib_finish
