// tessera/coupled_write.h, with the latches of sync/latch.h.
#include "tessera/coupled_write.h"

#include <atomic>
#include <cstdint>

#include "sync/latch.h"
#include "tessera/detail/resource_header.h"
#include "tessera/resource.h"

namespace tessera {
namespace {

/// The exclusive side of the reader/writer latch word, as write_lock takes it, without waiting
/// (a waiting writer's bit is taken over as write_lock does).
bool try_write_lock(detail::resource_header& h) noexcept {
  std::uint32_t x = h.latch.load(std::memory_order_relaxed);
  if ((x & ~detail::rw_waiting) != 0) return false;
  // acquire: see the previous holders' changes.
  return h.latch.compare_exchange_strong(x, detail::rw_writer, std::memory_order_acquire,
                                         std::memory_order_relaxed);
}

}  // namespace

bool coupled_write_begin(void* object) noexcept {
  detail::resource_header& h = *detail::resource_header::of(object);
  switch (h.applied) {
    case primitive::none: return true;
    case primitive::spinlock:
      // acquire: the previous holder's writes are visible once we own the latch.
      return h.latch.load(std::memory_order_relaxed) == 0 &&
             h.latch.exchange(1, std::memory_order_acquire) == 0;
    case primitive::rwlatch: return try_write_lock(h);
    case primitive::optimistic_latch:
      if (!try_write_lock(h)) return false;
      (void)detail::begin_write(h);  // odd; end_write's even value is read back in end
      return true;
    default: return false;  // scheduling, optimistic_scheduled: serialized by the pool
  }
}

void coupled_write_end(void* object) noexcept {
  detail::resource_header& h = *detail::resource_header::of(object);
  switch (h.applied) {
    case primitive::spinlock: detail::spin_unlock(h); return;
    case primitive::rwlatch: detail::write_unlock(h); return;
    case primitive::optimistic_latch: {
      // Relaxed: only the holder of the latch writes the version.
      const std::uint64_t odd = h.version.load(std::memory_order_relaxed);
      detail::end_write(h, odd - 1);
      detail::write_unlock(h);
      return;
    }
    default: return;
  }
}

}  // namespace tessera
