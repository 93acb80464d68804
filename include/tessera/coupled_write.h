// tessera/coupled_write.h — writing a resource the running task is not annotated with, where its
// primitive lets a task take the writers' side without waiting: the write counterpart of
// coupled_read.h, for a structure whose small, hot objects are cheaper to change in the run that
// reached them than through a task of their own (a tree's leaf within the last-level cache).
//
//   // inside execute (or a submit called from a task), `leaf` reached through a validated read:
//   if (tessera::coupled_write_begin(leaf)) {
//     change(*leaf);                       // readers and writers of `leaf` are kept out or told
//     tessera::coupled_write_end(leaf);
//   } else {
//     ctx.spawn(task_annotated_as_writer_of(leaf));   // the ordinary way
//   }
//
// What begin takes, by the primitive the workers apply to the object (resource_header::applied):
//   spinlock           the latch, if free
//   rwlatch            the latch exclusively, if no reader or writer holds it
//   optimistic_latch   the latch as a writer takes it, if free, then the version made odd (the
//                      writers' protocol of the runtime's own runs: optimistic readers that
//                      overlap the write fail their validation)
//   none               nothing (as applied in a runtime of one worker nothing overlaps the running
//                      task; a resource made with primitive::none or isolation::none was declared
//                      to need no synchronization)
//   scheduling, optimistic_scheduled: refused — their writers are serialized through the
//                      object's pool, and a task outside that pool cannot join the order.
// Begin never waits: it returns false (having changed nothing) where the primitive refuses or the
// latch is held, and the caller takes the ordinary way. A true begin must be followed by end on
// the same thread, with no wait for another task in between (the holder of a latch that another
// worker spins on).
// Memory ordering: begin takes the latch with acquire (the previous holders' writes are visible);
// under optimistic_latch the odd version is ordered before the writes that follow by the release
// fence of the runtime's writers (tessera/detail/version_fence.h). end stores the even version
// (release; optimistic readers that see it see the writes) and releases the latch (release).
//
// The object must be a resource (runtime::make_resource) that stays allocated while it is written
// (reached through a validated pointer in a task's run: a retired resource is freed only after
// every task that could see it ended). Writes between the two calls may be read concurrently by
// optimistic readers: make them with racy_store or atomics as the object's tasks do.
#pragma once

#include <atomic>
#include <cstdint>

#include "tessera/detail/latch_word.h"
#include "tessera/detail/resource_header.h"
#include "tessera/resource.h"

namespace tessera {

/// Takes the writers' side of `object`'s primitive without waiting (see above): true if the
/// caller may now write it, until coupled_write_end; false where the primitive refuses or another
/// holds it, having changed nothing. Inline (as the end), so that a caller's fast path does not
/// depend on link-time optimization; `none` (a runtime of one worker) is tested first.
[[nodiscard]] inline bool coupled_write_begin(void* object) noexcept {
  detail::resource_header& h = *detail::resource_header::of(object);
  const primitive applied = h.applied;
  if (applied == primitive::none) [[likely]]
    return true;
  switch (applied) {
    case primitive::optimistic_latch:
      if (!detail::try_write_lock(h)) return false;
      (void)detail::begin_write(h);  // odd; end_write's even value is read back in end
      return true;
    case primitive::spinlock: return detail::spin_try_lock(h);
    case primitive::rwlatch: return detail::try_write_lock(h);
    default: return false;  // scheduling, optimistic_scheduled: serialized by the pool
  }
}

/// Ends a write begun by a successful coupled_write_begin(object) on this thread.
inline void coupled_write_end(void* object) noexcept {
  detail::resource_header& h = *detail::resource_header::of(object);
  const primitive applied = h.applied;
  if (applied == primitive::none) [[likely]]
    return;
  switch (applied) {
    case primitive::optimistic_latch: {
      // Relaxed: only the holder of the latch writes the version.
      const std::uint64_t odd = h.version.load(std::memory_order_relaxed);
      detail::end_write(h, odd - 1);
      detail::write_unlock(h);
      return;
    }
    case primitive::spinlock: detail::spin_unlock(h); return;
    case primitive::rwlatch: detail::write_unlock(h); return;
    default: return;
  }
}

}  // namespace tessera
