// src/groups/group_table.h — the slot map behind tessera::group ([GeckoDB-pool] §III-D).
//
// Slots live in chunks that are never moved or freed while the runtime runs, so the hot path
// (join/leave on spawn/completion) indexes without a lock. A slot is handed out with a generation
// and an "open" reference; the one wait (or when_done) drops that reference; when the count reaches
// zero the group is complete: a waiter is woken or the continuation is spawned, and the slot's
// generation advances so old handles are recognized as stale.
//
//   group g = table.open();
//   table.join(g);            // per task spawned into g
//   table.leave(g) -> true    // the last leave completes g
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <exception>
#include <memory>
#include <vector>

#include "tessera/group.h"
#include "tessera/task.h"
#include "util/mutex.h"

namespace tessera::detail {

struct group_slot {
  std::atomic<std::int64_t> pending{0};
  std::atomic<std::uint32_t> generation{1};
  std::atomic<std::uint32_t> done{0};  // futex word for waiters
  detail::mutex mutex;
  std::exception_ptr error GUARDED_BY(mutex);      // first exception
  task* continuation GUARDED_BY(mutex) = nullptr;  // when_done's
  bool closed GUARDED_BY(mutex) = false;           // wait, when_done or detach called
  bool detached GUARDED_BY(mutex) = false;         // detach called: nobody waits
  bool completed GUARDED_BY(mutex) = false;        // the count reached zero
  /// runtime::cancel: tasks of the group not started yet are dropped. Set under the mutex, read
  /// by workers without it (relaxed: a task that starts before its worker sees the flag runs;
  /// the slot cannot be reused while a task of the group is in flight).
  std::atomic<bool> cancelled{false};

  /// Requires: mutex held. `g` names this slot's current group, which nobody waits for yet. The
  /// generation changes under the mutex too (group_table::release), so a second wait that
  /// raced with the first cannot act on the group that reuses the slot.
  bool waitable(group g) const noexcept REQUIRES(mutex) {
    return generation.load(std::memory_order_relaxed) == g.generation && !closed;
  }
};

class group_table {
 public:
  static constexpr std::uint32_t chunk_slots = 1024;
  static constexpr std::uint32_t max_chunks = 4096;

  /// Each table's slots start at a generation of their own (spread by a large odd step per table
  /// made in the process), so that a handle of another runtime's group, same index, is not
  /// taken for one of this runtime's (wait would wait for, and close, the wrong group).
  group_table();
  ~group_table();

  group open();
  group_slot& slot(group g) noexcept {
    const std::uint32_t i = g.index - 1;
    return (*m_chunks[i / chunk_slots].load(std::memory_order_acquire))[i % chunk_slots];
  }
  /// True if `g` names the slot's current generation.
  bool current(group g) noexcept;
  /// One more task in g. Relaxed: the caller holds a reference already (its own task or the
  /// open reference), so the count cannot reach zero concurrently.
  void join(group g) noexcept { slot(g).pending.fetch_add(1, std::memory_order_relaxed); }
  /// One task of g done. Returns true when this completed the group.
  bool leave(group g) noexcept {
    // acq_rel: the completer must see every other task's writes (release from each leaver).
    return slot(g).pending.fetch_sub(1, std::memory_order_acq_rel) == 1;
  }
  void record_exception(group g, std::exception_ptr e);
  /// Returns a completed slot to the free list (generation advances).
  void release(group g);
  /// Groups made and never closed (no wait, when_done or detach), with the exceptions they
  /// hold. For the runtime's destructor: every task has run, so such a group still holds the
  /// slot and whatever its tasks threw.
  std::uint32_t never_closed(std::vector<std::exception_ptr>& errors);

 private:
  using chunk = std::array<group_slot, chunk_slots>;
  std::array<std::atomic<chunk*>, max_chunks> m_chunks{};
  detail::mutex m_mutex;
  std::vector<std::uint32_t> m_free GUARDED_BY(m_mutex);
  std::uint32_t m_used GUARDED_BY(m_mutex) = 0;
  std::uint32_t m_first_generation;   // of every slot of this table
};

}  // namespace tessera::detail
