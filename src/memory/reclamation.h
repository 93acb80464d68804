// src/memory/reclamation.h — epoch-based reclamation of retired resources.
//
// Every task carries the epoch slot of the operation it belongs to, and every worker counts the
// tasks it spawned and completed per slot (memory/epoch.h). The global epoch E advances to E+1
// only once slot (E+1) mod K is balanced, i.e. no task of the operation epoch E+1-K is left;
// a resource retired at epoch r is freed once the global epoch reached r+K, when every task that
// could still hold a pointer to it (its operation started at or before r) has finished
// (MxTasks §4.4, docs/references.md). Freeing is done by a task of the runtime's own, spawned by
// the worker that holds the retired list.
//
//   epoch_clock clock;  clock.attach(worker_counters);      // one per worker, before they start
//   clock.try_advance(now_ns, period_ns);                     // any worker, now and then
//   retired_list mine;  mine.push(h, clock.global());          // a worker retires h
//   if (resource_header* old = mine.take_expired(clock.global())) spawn(reclaim_task(old));
//
// Memory ordering: stated on each member; the Dekker pairs (a task counting itself in a slot
// against an advance; the reclamation task's spawn against stop()) are all seq_cst, without
// fences, which ThreadSanitizer does not model.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <vector>

#include "memory/epoch.h"
#include "runtime/test_hooks.h"
#include "tessera/detail/resource_header.h"
#include "util/mutex.h"

namespace tessera::detail {

/// The global epoch, its advance, and the counts of tasks started from outside the workers.
class epoch_clock {
 public:
  /// Adds a worker's counters (before the workers start; never removed).
  void attach(epoch_counters& c) { m_workers.push_back(&c); }

  /// acquire: a reader then sees what was retired before the advance it reads.
  std::uint64_t global() const noexcept { return m_global.load(std::memory_order_acquire); }
  /// The epoch slot of an operation that starts now (a task spawned from outside any task).
  std::uint8_t current_slot() const noexcept {
    return static_cast<std::uint8_t>(global() % epoch_slots);
  }
  /// Advances the global epoch if `period_ns` passed since the last advance and the slot it
  /// would reuse is drained. Any thread.
  void try_advance(std::uint64_t now_ns, std::uint64_t period_ns) noexcept;
  /// No task of slot `slot` is queued or running (the counts read: completions first, acquire).
  bool slot_balanced(unsigned slot) const noexcept;
  /// No task at all is queued or running.
  bool quiescent() const noexcept;

  /// Counts a task that starts an operation in the current epoch's slot (`count(slot, +1)`,
  /// seq_cst) and returns the slot. If the epoch moved in between (this thread preempted), the
  /// count may have landed in a slot that an advance had just found balanced, and that the next
  /// epoch reuses: the task would pass for one of that later epoch, and a resource retired
  /// before the move could be freed while the task still reads it. Then the count is taken
  /// back and made again. All seq_cst, with try_advance's loads and its CAS: a count made while
  /// the epoch read twice is E is seen by every advance that reads E+1 or later.
  template <class Count>
  std::uint8_t count_in_current_slot(Count count) noexcept;
  /// The count of a task spawned from outside the workers (seq_cst: see count_in_current_slot).
  void count_external(unsigned slot, int d) noexcept {
    m_external[slot].fetch_add(static_cast<std::uint64_t>(static_cast<std::int64_t>(d)),
                               std::memory_order_seq_cst);
  }
  std::uint64_t external_spawned() const noexcept;

 private:
  std::vector<epoch_counters*> m_workers;
  alignas(64) std::atomic<std::uint64_t> m_global{0};
  std::atomic<std::uint64_t> m_last_advance_ns{0};
  alignas(64) std::array<std::atomic<std::uint64_t>, epoch_slots> m_external{};
};

template <class Count>
inline std::uint8_t epoch_clock::count_in_current_slot(Count count) noexcept {
  for (;;) {
    const std::uint64_t e = m_global.load(std::memory_order_seq_cst);
    const auto slot = static_cast<std::uint8_t>(e % epoch_slots);
#if defined(TESSERA_DEBUG_CHECKS)
    if (auto* hook = test_hooks::epoch_read_for_count.load(std::memory_order_acquire)) hook(e);
#endif
    count(slot, +1);
    if (m_global.load(std::memory_order_seq_cst) == e) return slot;
    count(slot, -1);  // the task is not visible to anyone yet
  }
}

/// One worker's retired resources, oldest first (owner-only). A retire is stamped with the
/// global epoch when it happens, which never decreases, so the list is ordered by epoch: pushes
/// go to the tail, expired resources come off the head, and take_expired costs the entries it
/// takes, not those still too young. (Newest first, each call walked every young entry: with
/// operations queued behind thousands of others the epoch moves slowly, the young part holds
/// everything retired meanwhile, and a write-heavy server spent 92% of its time in that walk.)
class retired_list {
 public:
  void push(resource_header* h, std::uint64_t epoch) noexcept {
    h->retired_epoch = epoch;
    h->retired_next = nullptr;
    if (m_tail != nullptr) {
      m_tail->retired_next = h;
    } else {
      m_head = h;
    }
    m_tail = h;
  }
  bool empty() const noexcept { return m_head == nullptr; }
  /// Detaches the resources that may be freed at global epoch `global` (retired at least
  /// epoch_slots epochs before), as a list linked through retired_next, or nullptr.
  resource_header* take_expired(std::uint64_t global) noexcept {
    resource_header* last = nullptr;
    for (resource_header* h = m_head; h != nullptr && h->retired_epoch + epoch_slots <= global;
         h = h->retired_next) {
      last = h;
    }
    if (last == nullptr) return nullptr;
    resource_header* old = m_head;
    m_head = last->retired_next;
    last->retired_next = nullptr;
    if (m_head == nullptr) m_tail = nullptr;
    return old;
  }
  /// Detaches everything.
  resource_header* take_all() noexcept {
    resource_header* all = m_head;
    m_head = nullptr;
    m_tail = nullptr;
    return all;
  }

 private:
  resource_header* m_head = nullptr;
  resource_header* m_tail = nullptr;
};

/// Resources retired by threads that are not workers of the runtime (and by a worker being
/// deactivated), until an active worker adopts them into its retired_list. Any thread.
class retire_inbox {
 public:
  /// Queues `h`; false once closed (the runtime stopped: the caller frees it at once).
  bool put(resource_header* h) EXCLUDES(m_mutex);
  /// Takes everything queued. The mutex orders the retiring threads' writes before ours.
  std::vector<resource_header*> take() EXCLUDES(m_mutex);
  /// Something may be queued. Relaxed: a stale false only leaves the resources for a later look.
  bool maybe_nonempty() const noexcept { return m_nonempty.load(std::memory_order_relaxed); }
  /// Takes what is queued, or, if nothing is, closes the inbox (from then on put() refuses) and
  /// returns nothing. For stop(): freeing a resource may retire others, so the caller repeats
  /// until it gets nothing.
  std::vector<resource_header*> take_or_close() EXCLUDES(m_mutex);

 private:
  std::vector<resource_header*> take_locked() REQUIRES(m_mutex);

  mutable mutex m_mutex;
  std::vector<resource_header*> m_items GUARDED_BY(m_mutex);
  bool m_closed GUARDED_BY(m_mutex) = false;
  std::atomic<bool> m_nonempty{false};  // written under m_mutex
};

/// Frees every resource of a list linked through retired_next.
void free_resource_list(resource_header* list) noexcept;

}  // namespace tessera::detail
