#!/usr/bin/env bash
# Every C++ file git tracks is laid out as the root .clang-format says (Debian's clang-format
# 14). A failure names the files; `clang-format -i FILE` fixes one.
# Standalone: bash tests/scripts/format_test.sh
set -uo pipefail

root="${MESH_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
cd "$root" || exit 1

if ! command -v clang-format >/dev/null; then
  echo "not ok - clang-format is not installed (scripts/packages-test.txt lists it)"
  exit 1
fi
if ! git rev-parse --git-dir >/dev/null 2>&1; then
  echo "not ok - $root is not a git checkout: the tracked files cannot be listed"
  exit 1
fi

mapfile -t files < <(git ls-files '*.cc' '*.h')
bad=()
for f in "${files[@]}"; do
  clang-format --dry-run -Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if ((${#bad[@]})); then
  echo "not ok - ${#bad[@]} of ${#files[@]} files differ from .clang-format:"
  printf '  %s\n' "${bad[@]}"
  exit 1
fi
echo "ok - ${#files[@]} files match .clang-format"
