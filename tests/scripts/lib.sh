# Shared by the script tests (sourced, not run): a work folder removed at exit, and run_test.
#   source "$root/tests/scripts/lib.sh"; test_lib_init NAME
#   run_test "what it checks" FUNCTION ARGS...   # output shown only when it fails
#   test_lib_finish                              # "NAME: N passed, N failed"; exit status
# Not named *_test.sh: CTest registers only those.

test_lib_init() {
  test_lib_name="$1"
  work="$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX")"
  trap 'rm -rf "$work"' EXIT
  passed=0
  failed=0
}

run_test() {
  local name="$1"
  shift
  if "$@" >"$work/test.log" 2>&1; then
    passed=$((passed + 1))
    echo "ok - $name"
  else
    failed=$((failed + 1))
    echo "not ok - $name"
    sed 's/^/    /' "$work/test.log"
  fi
}

test_lib_finish() {
  echo "$test_lib_name: $passed passed, $failed failed"
  [[ $failed -eq 0 ]]
}
