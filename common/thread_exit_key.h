// ThreadExitKey: a pthread key whose destructor runs for a thread's value when the thread exits. glibc runs
// key destructors after the thread's C++ thread_local destructors, and a value set while they run (a memcoord
// call made from another key's destructor) is destroyed in a further pass: what a thread_local's destructor
// cannot promise for state made that late (a thread_local first constructed in that phase registers a
// destructor that never runs). The key is deleted when the library unloads, so that no thread exiting later
// calls into unmapped code. Used by the C ABI's call guard and last error and by the allocator's thread
// caches. A key is static, and a call can come after its destructor ran (at exit, from a static destroyed
// later or an atexit handler registered earlier): set() is then false and touches no key, because an index
// pthread_key_delete freed can belong to a key made since, whose destructor would get our value. Thread
// safety: set() touches only the calling thread's value.
#pragma once

#include <pthread.h>

#include <atomic>

namespace memcoord {

class ThreadExitKey {
 public:
  explicit ThreadExitKey(void (*destructor)(void*)) noexcept
      : made_(::pthread_key_create(&key_, destructor) == 0) {}
  // An atomic store, so that the compiler keeps it (a plain store to a member in a destructor is dead to
  // gcc's -flifetime-dse): a static's storage outlives it, and set() reads it there.
  ~ThreadExitKey() {
    if (made_.exchange(false, std::memory_order_acq_rel)) ::pthread_key_delete(key_);
  }
  ThreadExitKey(const ThreadExitKey&) = delete;
  ThreadExitKey& operator=(const ThreadExitKey&) = delete;

  // False when the process had no key left (PTHREAD_KEYS_MAX) or the value could not be set: then nothing
  // runs at this thread's exit.
  bool set(void* value) noexcept {
    return made_.load(std::memory_order_acquire) && ::pthread_setspecific(key_, value) == 0;
  }

 private:
  pthread_key_t key_{};
  std::atomic<bool> made_;
};

}  // namespace memcoord
