// Thread-safety contracts the compiler checks: clang's -Wthread-safety analysis (the clang
// build of the fuzz stage, scripts/test.sh, compiles every layer with it as an error). Under
// g++ the annotations are empty.
//
//   class Queue {
//     void Push(int v) EXCLUDES(mutex_) { MutexLock lock(mutex_); items_.push_back(v); }
//     void DrainLocked() REQUIRES(mutex_);
//     mutable Mutex mutex_;
//     std::vector<int> items_ GUARDED_BY(mutex_);
//   };
//
// Mutex is std::mutex declared as a capability (libstdc++'s is not annotated); MutexLock holds
// it for a scope, like std::unique_lock, which it lends to std::condition_variable. A lambda
// that reads guarded members under the lock (a condition variable's predicate) says so with
// `[&]() REQUIRES(mutex_) { ... }`.
//
// Thread-safety: Mutex and MutexLock are what std::mutex and std::unique_lock are.
#pragma once

#include <mutex>

#if defined(__clang__)
#define MESH_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define MESH_THREAD_ANNOTATION(x)
#endif

#define CAPABILITY(x) MESH_THREAD_ANNOTATION(capability(x))
#define SCOPED_CAPABILITY MESH_THREAD_ANNOTATION(scoped_lockable)
#define GUARDED_BY(x) MESH_THREAD_ANNOTATION(guarded_by(x))
#define PT_GUARDED_BY(x) MESH_THREAD_ANNOTATION(pt_guarded_by(x))
#define REQUIRES(...) MESH_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define ACQUIRE(...) MESH_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define RELEASE(...) MESH_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define EXCLUDES(...) MESH_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define NO_THREAD_SAFETY_ANALYSIS MESH_THREAD_ANNOTATION(no_thread_safety_analysis)

namespace mesh {

class CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;
  void lock() ACQUIRE() { mutex_.lock(); }
  void unlock() RELEASE() { mutex_.unlock(); }
  // For MutexLock only (std::unique_lock over it, lent to condition variables).
  std::mutex& native() { return mutex_; }

 private:
  std::mutex mutex_;
};

class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mutex) ACQUIRE(mutex) : lock_(mutex.native()) {}
  ~MutexLock() RELEASE() = default;
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;
  // Releases early and retakes (the destructor releases only what is held).
  void Unlock() RELEASE() { lock_.unlock(); }
  void Lock() ACQUIRE() { lock_.lock(); }
  // For std::condition_variable::wait*: the wait releases and retakes the mutex, and the
  // analysis, which cannot see inside, counts it held throughout.
  std::unique_lock<std::mutex>& native() { return lock_; }

 private:
  std::unique_lock<std::mutex> lock_;
};

}  // namespace mesh
