// src/sync/latch.h — the latches and the version protocol the worker wraps around tasks: the
// waiting operations here, the non-waiting ones (unlock, one try of the writers' side, the
// writer's version steps) in tessera/detail/latch_word.h, shared with coupled writes.
//
// All operate on a resource's header (tessera/detail/resource_header.h):
// - spinlock on `latch` (0 free, 1 held): test-and-test-and-set.
// - reader/writer latch on `latch`: bit 31 writer holds it, bit 30 a writer waits (new readers
//   stay out, so writers are not starved), low bits count readers.
// - optimistic version (seqlock, Boehm 2012): writers make `version` odd before writing and even
//   after; readers take an even version with acquire, read with relaxed atomics, issue an acquire
//   fence and compare. A match means no writer overlapped the read.
//
// Memory ordering: unlock (release) of a latch synchronizes-with the next lock (acquire), so a
// holder sees everything the previous holder wrote. end_write (release store of the even version)
// pairs with begin_read's acquire load: a reader that validates saw only completed writes.
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>

#include "tessera/detail/latch_word.h"
#include "tessera/detail/resource_header.h"
#include "tessera/detail/version_fence.h"
#include "util/compiler.h"

namespace tessera::detail {

inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

/// How a waiter for a latch or a version waits: a pause per try, and after `pauses_before_yield`
/// tries in a row it yields the CPU at each one. With more workers than CPUs the holder may have
/// been descheduled in its critical section; pure spinning then burns the waiters' whole time
/// slices before it runs again (`tessera-bench ycsb --workers 256` on 2 CPUs took up to 13 s for
/// 2000 records, 61 % of it in write_lock's pause loop). A running holder releases a latch long
/// before the first yield: critical sections are a task's work on one object.
class backoff {
 public:
  static constexpr unsigned pauses_before_yield = 1024;
  void wait() noexcept {
    if (m_pauses < pauses_before_yield) {
      ++m_pauses;
      cpu_relax();
    } else {
      std::this_thread::yield();
    }
  }

 private:
  unsigned m_pauses = 0;
};

inline void spin_lock(resource_header& h) noexcept {
  backoff b;
  for (;;) {
    // acquire: the previous holder's writes are visible once we own the latch.
    if (h.latch.exchange(1, std::memory_order_acquire) == 0) return;
    while (h.latch.load(std::memory_order_relaxed) != 0) b.wait();
  }
}

inline void read_lock(resource_header& h) noexcept {
  backoff b;
  for (;;) {
    std::uint32_t x = h.latch.load(std::memory_order_relaxed);
    if ((x & (rw_writer | rw_waiting)) == 0 &&
        // acquire: see the last writer's changes.
        h.latch.compare_exchange_weak(x, x + 1, std::memory_order_acquire,
                                      std::memory_order_relaxed)) {
      return;
    }
    b.wait();
  }
}
inline void read_unlock(resource_header& h) noexcept {
  h.latch.fetch_sub(1, std::memory_order_release);  // release: our reads happen before a writer
}
/// write_lock's waiting: tries again, with the waiting bit, until the latch is taken.
TESSERA_NOINLINE inline void write_lock_wait(resource_header& h) noexcept {
  backoff b;
  for (;;) {
    std::uint32_t x = h.latch.load(std::memory_order_relaxed);
    if ((x & ~rw_waiting) == 0) {
      // acquire: see the previous holders' changes.
      if (h.latch.compare_exchange_weak(x, rw_writer, std::memory_order_acquire,
                                        std::memory_order_relaxed)) {
        return;
      }
    } else if ((x & rw_waiting) == 0) {
      h.latch.fetch_or(rw_waiting, std::memory_order_relaxed);
    }
    b.wait();
  }
}
/// One try inline (a free latch: the common case), the waiting out of line: with its loop in the
/// same function GCC keeps the whole of it out of line, a call per writer task under rwlatch and
/// optimistic_latch (~17 instructions an operation, callgrind, tessera-bench sync --mix 0/100).
TESSERA_ALWAYS_INLINE void write_lock(resource_header& h) noexcept {
  if (try_write_lock(h)) [[likely]] return;  // acquire inside: see the previous holders' changes
  write_lock_wait(h);
}

/// Reader side: an even version to validate against later (spins while a writer is inside).
inline std::uint64_t begin_read(const resource_header& h) noexcept {
  backoff b;
  for (;;) {
    // acquire: reads that follow see at least the writes of the version we got.
    const std::uint64_t v = h.version.load(std::memory_order_acquire);
    if ((v & 1) == 0) return v;
    b.wait();
  }
}
inline bool validate_read(const resource_header& h, std::uint64_t v) noexcept {
  // acquire fence: the data reads before it are ordered before the version re-read.
  version_acquire_fence();
  return h.version.load(std::memory_order_relaxed) == v;
}

}  // namespace tessera::detail
