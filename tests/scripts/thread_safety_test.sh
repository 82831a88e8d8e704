#!/usr/bin/env bash
# The lock annotations of model/thread_safety.h are real under clang: code that keeps its
# contract compiles with -Wthread-safety -Werror, and code that reads a guarded member or calls
# a REQUIRES function without the lock is refused. Every mutex of the layers is a Mutex (so the
# analysis sees it), and every layer compiles under the analysis in the fuzz stage's clang build
# (scripts/test.sh). Needs clang++ (scripts/packages-test.txt).
# Standalone: bash tests/scripts/thread_safety_test.sh
set -uo pipefail

root="${MESH_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
cd "$root" || exit 1
source "$root/tests/scripts/lib.sh"
test_lib_init thread_safety_test

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Compiles stdin with the analysis as an error; the compiler's words in $work/out.
analyse() {
  clang++ -std=c++20 -fsyntax-only -Wthread-safety -Werror -I"$root" -x c++ - >"$work/out" 2>&1
}

snippet_head='#include <condition_variable>
#include "model/thread_safety.h"
class Counter {
 public:
  void Add() EXCLUDES(mutex_) { mesh::MutexLock lock(mutex_); ++value_; }
  int AddAndWait(std::condition_variable& cv) EXCLUDES(mutex_) {
    mesh::MutexLock lock(mutex_);
    cv.wait(lock.native(), [&]() REQUIRES(mutex_) { return value_ > 0; });
    lock.Unlock();
    lock.Lock();
    return BumpLocked();
  }
  int BumpLocked() REQUIRES(mutex_) { return ++value_; }'
snippet_tail='
 private:
  mesh::Mutex mutex_;
  int value_ GUARDED_BY(mutex_) = 0;
};'

clang_present() {
  command -v clang++ >/dev/null || { echo "clang++ not found (scripts/packages-test.txt)"; return 1; }
}

kept_contract_compiles() {
  printf '%s\n%s\n' "$snippet_head" "$snippet_tail" | analyse || { cat "$work/out"; return 1; }
}

# `line` added to the class must be refused by the analysis, in words containing `message`.
refused_with() {
  local line="$1" message="$2"
  if printf '%s\n  %s\n%s\n' "$snippet_head" "$line" "$snippet_tail" | analyse; then
    echo "compiled: $line"
    return 1
  fi
  grep -qF "$message" "$work/out" || { cat "$work/out"; return 1; }
}

unguarded_read_refused() {
  refused_with 'int Peek() { return value_; }' \
    "reading variable 'value_' requires holding mutex 'mutex_'"
}

requires_without_lock_refused() {
  refused_with 'int Bump() { return BumpLocked(); }' \
    "calling function 'BumpLocked' requires holding mutex 'mutex_'"
}

every_mutex_is_annotatable() {
  local hits
  hits=$(git ls-files -- 'model/*' 'observers/*' 'reconciler/*' | grep -E '\.(h|cc)$' |
    grep -v '^model/thread_safety\.h$' |
    xargs grep -n -E 'std::(mutex|lock_guard|unique_lock<std::mutex>|scoped_lock|shared_mutex)\b')
  [ -z "$hits" ] || { echo "a mutex the analysis cannot see (use mesh::Mutex, MutexLock):"; echo "$hits"; return 1; }
}

run_test "clang++ is there" clang_present
run_test "code that keeps its lock contract compiles under -Wthread-safety" kept_contract_compiles
run_test "reading a GUARDED_BY member without its mutex is refused" unguarded_read_refused
run_test "calling a REQUIRES function without its mutex is refused" requires_without_lock_refused
run_test "every mutex of the layers is a mesh::Mutex" every_mutex_is_annotatable
test_lib_finish
