#!/usr/bin/env bash
# Every Catch2 test case is registered with CTest on its own. catch_discover_tests splits test
# names on ';' and chokes on '[' or ']': a case named with one of them silently merges with
# others into one entry, or vanishes, and CTest never runs it alone. This compares, for each
# test binary, the cases Catch2 lists with the entries CTest knows. A name that starts with '-'
# is registered, but CTest's command line then gives it to Catch2 as an option ("Unrecognised
# token"), so the case never runs: such names are refused too.
# Run by CTest (MESH_BUILD_DIR is set); standalone: MESH_BUILD_DIR=build bash tests/scripts/...
set -uo pipefail

build="${MESH_BUILD_DIR:?MESH_BUILD_DIR: the CMake build folder}"
status=0
# The folders of CMakeLists.txt's MESH_TEST_FOLDERS, one binary each.
folders="$(sed -n '/^set(MESH_TEST_FOLDERS/,/)/p' "${MESH_SOURCE_DIR:-.}/CMakeLists.txt" |
  sed 's/set(MESH_TEST_FOLDERS//; s/)//' | tr -s ' \n' '\n' | grep .)"
[ -n "$folders" ] || { echo "not ok - no MESH_TEST_FOLDERS in CMakeLists.txt"; exit 1; }
for folder in $folders; do
  binary="$build/${folder//\//_}_tests"
  if [ ! -x "$binary" ]; then
    echo "not ok - $binary is not built"
    status=1
    continue
  fi
  listed="$("$binary" --list-test-names-only | grep -c .)"
  dashed="$("$binary" --list-test-names-only | grep -- '^-')"
  if [ -n "$dashed" ]; then
    echo "not ok - $folder: test case names that Catch2 reads as options when CTest runs them:"
    echo "$dashed" | sed 's/^/  /'
    status=1
  fi
  registered="$(ctest --test-dir "$build" -N -R "^${folder}/" | grep -c 'Test *#')"
  if [ "$listed" -eq "$registered" ]; then
    echo "ok - $folder: $listed test cases, each registered with CTest"
  else
    echo "not ok - $folder: Catch2 lists $listed test cases, CTest registers $registered"
    echo "  (a test case name with ';', '[' or ']' is the usual cause)"
    status=1
  fi
done
exit "$status"
