#!/usr/bin/env bash
# docs/conventions.md's numbered headings are unique and in order, and every reference to a
# section of it in a tracked file ("conventions 7.2", "docs/conventions.md section 6.1",
# "[docs/conventions.md](docs/conventions.md) 7.2") names a heading that exists. References to
# the shared contract (mesh-conventions.md) are another document and are not checked here.
# Standalone: bash tests/scripts/conventions_refs_test.sh
set -uo pipefail

root="${MESH_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
cd "$root" || exit 1
source "$root/tests/scripts/lib.sh"
test_lib_init conventions_refs_test

doc=docs/conventions.md

# "7" for "## 7. Drift", "7.2" for "### 7.2 ...", one per line, in document order.
headings() {
  sed -n -E 's/^## ([0-9]+)\. .*/\1/p; s/^### ([0-9]+\.[0-9]+) .*/\1/p' "$doc"
}

headings_unique_and_ordered() {
  local previous_section=0 previous_sub=0 number section sub status=0
  while read -r number; do
    section="${number%%.*}"
    if [[ "$number" == *.* ]]; then
      sub="${number#*.}"
      if ((section != previous_section || sub != previous_sub + 1)); then
        echo "$doc: heading $number follows $previous_section.$previous_sub"
        status=1
      fi
      previous_sub="$sub"
    else
      if ((section != previous_section + 1)); then
        echo "$doc: heading $number follows section $previous_section"
        status=1
      fi
      previous_section="$section"
      previous_sub=0
    fi
  done < <(headings)
  return "$status"
}

# Every "path:line:number" a tracked file cites, and the document's own "(section 6.1)".
references() {
  git ls-files -z | xargs -0 grep -n -o -I -E \
    '(^|[^-[:alnum:]_])conventions(\.md)?(\]\(docs/conventions\.md\))?,? (section |§ ?)?[0-9]+(\.[0-9]+)?' 2>/dev/null |
    sed -E 's/^([^:]+:[0-9]+):.*[^0-9.]([0-9]+(\.[0-9]+)?)$/\1:\2/'
  grep -n -o -E 'section [0-9]+(\.[0-9]+)?' "$doc" | sed -E "s|^([0-9]+):section (.*)|$doc:\1:\2|"
}

references_name_headings() {
  local known ref number status=0 count=0
  known="$(headings | tr '\n' ' ')"
  while read -r ref; do
    [ -n "$ref" ] || continue
    count=$((count + 1))
    number="${ref##*:}"
    if [[ " $known " != *" $number "* ]]; then
      echo "${ref%:*}: cites conventions $number, which $doc has no heading for"
      status=1
    fi
  done < <(references)
  finish_scan "$count" references "$status"
}

run_test "$doc: numbered headings unique and in order" headings_unique_and_ordered
run_test "every reference to a section of $doc names one of its headings" references_name_headings
test_lib_finish
