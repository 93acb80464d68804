// tessera/detail/latch_word.h — the non-waiting operations on a resource's latch word and
// version (tessera/detail/resource_header.h): releasing a latch, trying the writers' side once,
// and the writer's side of the version protocol. Internal: shared by the runtime's latches
// (src/sync/latch.h, which adds the waiting ones) and by coupled writes
// (tessera/coupled_write.h), which run inline in the caller's code.
//
// The latch word: spinlock 0 free, 1 held; reader/writer latch bit 31 a writer holds it, bit 30
// a writer waits (new readers stay out, so writers are not starved), low bits count readers.
// The version (a seqlock, Boehm 2012): writers make it odd before writing and even after.
//
// Memory ordering: unlock (release) of a latch synchronizes-with the next lock (acquire), so a
// holder sees everything the previous holder wrote. begin_write's release fence orders the odd
// version before the data writes that follow; end_write's release store of the even version
// pairs with a reader's acquire load of it: a reader that validates saw only completed writes.
#pragma once

#include <atomic>
#include <cstdint>

#include "tessera/detail/resource_header.h"
#include "tessera/detail/version_fence.h"

namespace tessera::detail {

inline constexpr std::uint32_t rw_writer = 1u << 31;
inline constexpr std::uint32_t rw_waiting = 1u << 30;

/// The spinlock, if free (one try: no waiting).
inline bool spin_try_lock(resource_header& h) noexcept {
  // acquire: the previous holder's writes are visible once we own the latch.
  return h.latch.load(std::memory_order_relaxed) == 0 &&
         h.latch.exchange(1, std::memory_order_acquire) == 0;
}
inline void spin_unlock(resource_header& h) noexcept {
  h.latch.store(0, std::memory_order_release);  // release: publish our writes to the next holder
}

/// The exclusive side of the reader/writer latch, if no reader or writer holds it (one try: a
/// waiting writer's bit is taken over, as the waiting write lock does). Always inline: it is the
/// fast path of src/sync/latch.h's write_lock and of coupled_write_begin.
[[gnu::always_inline]] inline bool try_write_lock(resource_header& h) noexcept {
  std::uint32_t x = h.latch.load(std::memory_order_relaxed);
  if ((x & ~rw_waiting) != 0) return false;
  // acquire: see the previous holders' changes.
  return h.latch.compare_exchange_strong(x, rw_writer, std::memory_order_acquire,
                                         std::memory_order_relaxed);
}
inline void write_unlock(resource_header& h) noexcept {
  h.latch.store(0, std::memory_order_release);  // release: publish our writes
}

/// Writer side of the version protocol; the caller already excludes other writers.
inline std::uint64_t begin_write(resource_header& h) noexcept {
  const std::uint64_t v = h.version.load(std::memory_order_relaxed);
  h.version.store(v + 1, std::memory_order_relaxed);
  // release fence: the odd version is ordered before every data write that follows.
  version_release_fence();
  return v;
}
inline void end_write(resource_header& h, std::uint64_t v) noexcept {
  h.version.store(v + 2, std::memory_order_release);  // release: data writes before even version
}

}  // namespace tessera::detail
