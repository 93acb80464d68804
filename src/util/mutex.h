// src/util/mutex.h — std::mutex with thread-safety annotations, and its scoped lock.
//
// libstdc++'s std::mutex and std::lock_guard carry no capability attributes, so clang's
// -Wthread-safety cannot check what they protect. detail::mutex is a std::mutex that says it is
// a capability, detail::lock a lock_guard that says it holds one; both are inline calls to the
// standard ones and nothing more (same size, same code).
//
//   detail::mutex m_mutex;
//   std::vector<int> m_items GUARDED_BY(m_mutex);
//   void add(int i) EXCLUDES(m_mutex) {
//     detail::lock hold(m_mutex);
//     m_items.push_back(i);            // without `hold`: an error under the clang preset
//   }
//
// Memory ordering: as std::mutex's. Everything a thread wrote before it released the mutex is
// visible to the next thread once its acquisition of the same mutex returns.
#pragma once

#include <mutex>

#include "util/thread_annotations.h"

namespace tessera::detail {

class CAPABILITY("mutex") mutex {
 public:
  mutex() = default;
  mutex(const mutex&) = delete;
  mutex& operator=(const mutex&) = delete;

  void lock() ACQUIRE() { m_mutex.lock(); }
  void unlock() RELEASE() { m_mutex.unlock(); }
  bool try_lock() TRY_ACQUIRE(true) { return m_mutex.try_lock(); }

 private:
  std::mutex m_mutex;
};

/// Holds `m` from construction to the end of the scope (std::lock_guard).
class SCOPED_CAPABILITY lock {
 public:
  explicit lock(mutex& m) ACQUIRE(m) : m_mutex(m) { m_mutex.lock(); }
  ~lock() RELEASE() { m_mutex.unlock(); }
  lock(const lock&) = delete;
  lock& operator=(const lock&) = delete;

 private:
  mutex& m_mutex;
};

}  // namespace tessera::detail
