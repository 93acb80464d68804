// src/steal/stealing.h — work stealing between workers: requests, answers, victim choice.
//
// Stealing is by request, never by reaching into another worker's queues (MxKernel, Xtask;
// docs/references.md). An idle worker (the thief) picks a victim (choose_victim: the one with
// most queued tasks that no other thief has asked) and posts its index in the victim's
// steal_mailbox, raising the victim's attention bit. The victim answers between two tasks
// (worker::answer_steal_request) by handing over, in this order: the thief's own home pool if
// it holds it, a whole resource pool with work if it has another one with work too, or half of
// the movable tasks of its home queue (split_for_thief) as one chain into the thief's inbox.
//
//   thief:   int v = choose_victim(...); if (v >= 0) mailbox_of(v).post(me);
//   victim:  int thief = my_mailbox.take(); ... split_for_thief(queue, movable) ...
//
// Two things keep idle thieves from costing busy victims or sleeping through work:
// - steal_pacing: a walk of the victim's queue that moved nothing is paid for first by as many
//   executed tasks (at most one step per task, amortized), and a thief refused while tasks were
//   queued that may not move is remembered and woken once that walk is paid for;
// - blind marks (blind_marks): a worker that parks without having seen a queue of more than one
//   task, or that a victim answered with nothing, is marked; a busy worker that publishes a
//   queue of more than one claims a mark and wakes that worker, whatever its wake-up limit.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "runtime/local_queue.h"
#include "tessera/task.h"

namespace tessera::detail {

inline constexpr int no_thief = -1;

/// One worker's shared steal state: the request waiting for its answer, and its blind mark.
class steal_mailbox {
 public:
  /// Any thread: asks this worker for work on behalf of `thief`. False if another request
  /// waits. acq_rel: nothing is published with the request itself; the answer comes through
  /// the hand-over mutex or an inbox.
  bool post(int thief) noexcept {
    int expected = no_thief;
    return m_request.compare_exchange_strong(expected, thief, std::memory_order_acq_rel);
  }
  /// The owner: takes the waiting request (no_thief if none).
  int take() noexcept { return m_request.exchange(no_thief, std::memory_order_acq_rel); }
  /// Any thread: the thief waiting for this worker's answer, or no_thief (relaxed: a snapshot).
  int requested_by() const noexcept { return m_request.load(std::memory_order_relaxed); }

 private:
  friend class blind_marks;
  std::atomic<int> m_request{no_thief};
  /// 1: marked blind, see blind_marks.
  std::atomic<std::uint32_t> m_blind{0};
};

/// The runtime-wide count of blind marks; the marks are in the workers' mailboxes.
class blind_marks {
 public:
  /// Marks `m`'s worker blind (no effect if it is already). Any thread.
  void mark(steal_mailbox& m) noexcept {
    // seq_cst both: the mark is visible to whoever sees the count (the count's increment is
    // ordered after it), and the count is one side of the Dekker pair with a busy worker's
    // publication of its queue length (worker::offer_queued, worker::park).
    if (m.m_blind.exchange(1, std::memory_order_seq_cst) == 0) {
      m_count.fetch_add(1, std::memory_order_seq_cst);
    }
  }
  /// Clears `m`'s mark; true if this call cleared it (then the caller owns that mark's wake-up).
  bool clear(steal_mailbox& m) noexcept {
    // The relaxed look first: most calls find no mark, and an exchange would take the line.
    if (m.m_blind.load(std::memory_order_relaxed) == 0) return false;
    if (m.m_blind.exchange(0, std::memory_order_seq_cst) == 0) return false;
    m_count.fetch_sub(1, std::memory_order_seq_cst);
    return true;
  }
  /// Workers marked right now. seq_cst: see mark().
  std::uint32_t count() const noexcept { return m_count.load(std::memory_order_seq_cst); }

 private:
  std::atomic<std::uint32_t> m_count{0};
};

/// A victim's pacing of its answers (owner-only).
class steal_pacing {
 public:
  /// A walk of the queue is paid for: `done` is the victim's count of executed tasks.
  bool may_walk(std::uint64_t done) const noexcept { return done - m_paid_at >= m_debt; }
  /// A walk of `steps` steps moved `moved` tasks: a moved task pays for 4 steps, the rest is
  /// paid for by executed tasks before the next walk.
  void walked(std::size_t steps, std::size_t moved, std::uint64_t done) noexcept {
    m_debt = steps > 4 * moved ? steps - 4 * moved : 0;
    m_paid_at = done;
  }
  /// `thief` was answered with nothing while tasks were queued: remembered, to be marked blind
  /// when the walk is paid for. Returns an earlier thief remembered, to mark at once, or
  /// no_thief.
  int remember_refused(int thief) noexcept {
    const int earlier = m_refused != thief ? m_refused : no_thief;
    m_refused = thief;
    return earlier;
  }
  /// The remembered thief, forgotten, once the walk is paid for; else no_thief.
  int refused_once_paid(std::uint64_t done) noexcept {
    if (m_refused == no_thief || !may_walk(done)) return no_thief;
    const int t = m_refused;
    m_refused = no_thief;
    return t;
  }

 private:
  std::uint64_t m_debt = 0;     // executed tasks owed before the next walk
  std::uint64_t m_paid_at = 0;  // the executed-task count when that debt was set
  int m_refused = no_thief;
};

/// Half of the tasks of `q` that `movable` allows, those at the back (fresh spawns queue newest
/// first, so in a recursion these are the biggest pieces of work), unlinked from `q` in order
/// and linked into one chain. `q` keeps the rest in order.
struct stolen_chain {
  task* first = nullptr;
  task* last = nullptr;
  std::size_t moved = 0;
  std::size_t steps = 0;  // queue entries walked (what the walk costs)
};
template <class Movable>
stolen_chain split_for_thief(local_queue& q, Movable&& movable) {
  stolen_chain c;
  std::size_t can_move = 0;
  for (task* t = q.front(); t != nullptr; t = local_queue::next_of(t)) can_move += movable(t);
  c.steps = q.size();
  std::size_t want = q.size() / 2 < can_move ? q.size() / 2 : can_move;
  if (want == 0) return c;
  c.steps += q.size();
  std::size_t skip = can_move - want;  // movable tasks at the front that stay
  local_queue keep;
  while (!q.empty()) {
    task* t = q.pop_front();
    if (movable(t) && skip > 0) {
      --skip;
      keep.push_back(t);
    } else if (want > 0 && movable(t)) {
      --want;
      ++c.moved;
      if (c.first == nullptr) {
        c.first = t;
      } else {
        hdr(c.last).m_next.store(t, std::memory_order_relaxed);
      }
      c.last = t;
    } else {
      keep.push_back(t);
    }
  }
  q = keep;
  return c;
}

/// The worker an idle thief should ask: the one of `n` with most queued tasks (more than one)
/// that no other thief has asked yet, or -1. `queued(i)` and `asked(i)` read worker i's
/// published queue length (seq_cst: the parking thief's side of the Dekker pair with
/// offer_queued) and whether a request waits in its mailbox (a hint: a stale answer costs one
/// refused or one skipped request). The walk starts at `start`, so thieves spread out.
template <class Queued, class Asked>
int choose_victim(unsigned thief, unsigned n, unsigned start, Queued&& queued, Asked&& asked) {
  int best = -1;
  std::uint32_t most = 1;  // a victim must have more than one queued task
  for (unsigned k = 0; k < n; ++k) {
    const unsigned i = (start + k) % n;
    if (i == thief) continue;
    const std::uint32_t q = queued(i);
    if (q > most && !asked(i)) {
      most = q;
      best = static_cast<int>(i);
    }
  }
  return best;
}

}  // namespace tessera::detail
