// src/groups/group_registry.h — what happens to a group between make_group() and its end.
//
// A group counts its tasks in flight plus one "open" reference (group_table). It is closed
// exactly once: by a wait (the caller blocks until the count reaches zero), by a continuation
// (when_done: spawned when it does), or by detach (nobody waits; exceptions go to the unhandled
// list). The last leave completes it: complete() wakes the waiter or hands back the
// continuation for the caller to route, and releases the slot unless a waiter still reads it.
// Cancellation marks the slot; workers drop its tasks before running them.
//
//   group g = groups.open();
//   groups.table().join(g);                 // a task spawned into g
//   if (groups.table().leave(g)) {          // a task of g done: the last one completes g
//     if (task* c = groups.complete(g)) route(c);
//   }
//   groups.close_for_wait(g); leave...; groups.wait_closed(g);   // runtime::wait
//
// Thread-safety: every member may be called from any thread. A slot's closing state is guarded
// by the slot's mutex; its count is one atomic (release by each leaver, acquire by the
// completer: the completer, and a waiter after it, sees every task's writes).
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <mutex>
#include <vector>

#include "groups/group_table.h"
#include "tessera/group.h"
#include "tessera/task.h"
#include "util/mutex.h"

namespace tessera::detail {

class group_registry {
 public:
  explicit group_registry(bool report_unhandled) : m_report_unhandled(report_unhandled) {}
  /// Says on stderr how many groups were never closed, and the first exception they hold.
  ~group_registry();

  group_table& table() noexcept { return m_table; }
  group open() { return m_table.open(); }

  /// runtime::wait, first half: checks `g` and closes it (throws std::logic_error for group{},
  /// a stale group, or a second close). The caller then drops the open reference (leave) and
  /// calls wait_closed.
  void close_for_wait(group g);
  /// Blocks until `g`, closed by close_for_wait and left, completes; releases its slot and
  /// rethrows the first exception its tasks threw.
  void wait_closed(group g);
  /// context::when_done: checks `g` and the continuation's group (`joins`: its own annotation,
  /// or the registering task's group), sets the continuation's group and epoch slot, joins that
  /// group and closes `g` with the continuation. Throws std::logic_error, with nothing changed,
  /// if any check fails. The caller counts the continuation as spawned, then leaves `g`.
  void close_with_continuation(group g, task* continuation, group joins, std::uint8_t slot);
  /// runtime::detach: closes `g` with nobody waiting. The caller then leaves `g`.
  void close_detached(group g);

  /// `g`'s count reached zero. Returns its continuation for the caller to route (counted as
  /// spawned when it was registered), or nullptr (a waiter was woken, or `g` was detached).
  task* complete(group g) noexcept;

  /// Marks `g` cancelled; false if it is completed, stale, or cancelled already. The caller
  /// tells the workers (they read cancelled() of each task's group while cancellations() != 0).
  bool cancel(group g);
  /// Groups cancelled and not completed yet. Relaxed: a worker reads it after the acquire of
  /// its attention word, which the canceller sets after the increment.
  std::uint32_t cancellations() const noexcept {
    return m_cancellations.load(std::memory_order_relaxed);
  }
  /// Whether `g` (a group with a task in flight, so its slot is its own) is cancelled.
  bool cancelled(group g) noexcept {
    return g.valid() && m_table.slot(g).cancelled.load(std::memory_order_relaxed);
  }
  /// The flag cancelled() reads, for a loop that holds `g` (valid) to check per piece.
  const std::atomic<bool>* cancel_flag(group g) noexcept { return &m_table.slot(g).cancelled; }

  /// `e`, thrown by a task of `g`, goes to `g`'s waiter (the first one only), or to the
  /// unhandled list for a task in no group.
  void record_exception(group g, std::exception_ptr e);
  /// `e`, thrown by a task nobody waits for (`whose`, for the message), goes to the unhandled
  /// list; the first one is said on stderr if reporting is on.
  void record_unhandled(std::exception_ptr e, const char* whose);
  std::vector<std::exception_ptr> take_unhandled();

 private:
  group_table m_table;
  const bool m_report_unhandled;
  std::atomic<std::uint32_t> m_cancellations{0};
  mutex m_unhandled_mutex;
  std::vector<std::exception_ptr> m_unhandled GUARDED_BY(m_unhandled_mutex);
  std::atomic<bool> m_unhandled_reported{false};
};

}  // namespace tessera::detail
