// A worker without a task: offering its queue to parked peers, spinning, parking and waking.
#include <chrono>
#include <utility>

#include "runtime/futex.h"
#include "runtime/scheduler.h"
#include "runtime/test_hooks.h"
#include "runtime/worker.h"
#include "sync/latch.h"

namespace tessera::detail {

void worker::offer_queued() {
  // The stack's depth is not counted (no counter on its hot path): up to two of it, enough for
  // the "more than one queued" decisions below and for thieves choosing a victim.
  const std::size_t stacked =
      m_stack_top == nullptr ? 0
                             : 1 + (hdr(m_stack_top).m_next.load(std::memory_order_relaxed) != nullptr);
  const std::size_t queued = local_total() + stacked;
  // Work queued here that a parked worker could take: wake one. A parked worker is woken by
  // spawns into its own pools only, so without this a worker that parked before a recursion
  // started on another worker would sleep through it (until the park timeout). At most one
  // wake-up per peer_wake_interval_ns, unless a worker is marked blind (it parked without seeing
  // a queue of more than one, so it has not seen this one; scheduler::mark_blind): queued tasks a
  // thief may not take (worker targets, serialized pools) would otherwise wake a peer for
  // nothing every 50 tasks. A peer that parked after asking this worker for work, or after
  // seeing its queue, is not blind: tasks that may not move wake it at most once per interval.
  if (queued > 1) {
    // seq_cst store, then the seq_cst loads of the parked count and of the count of marks (Dekker
    // with park(), which counts itself parked, reads every m_queued in choose_victim, and if it
    // found no victim marks itself blind and reads them again): either this worker sees the
    // parker, blind or not, and wakes one, or the parker sees this queue and asks it for work.
    m_queued.store(static_cast<std::uint32_t>(queued), std::memory_order_seq_cst);
    if (m_sched.parked_workers() != 0) wake_a_peer();
  } else {
    // relaxed: nothing for a thief (choose_victim needs more than one)
    m_queued.store(static_cast<std::uint32_t>(queued), std::memory_order_relaxed);
  }
}

void worker::offer_queued_after_spawns() {
  // Out of reach until the next periodic() or idle(): one offer per interval is enough for a
  // recursion of small tasks (periodic() offers too), and the first one is what a long task that
  // splits its work needs.
  m_spawns_until_offer = ~std::uint32_t{0};
  if (m_sched.worker_count() > 1) offer_queued();
}

void worker::wake_a_peer() {
  // A thief answered with nothing while tasks were queued here (remember_refused) is marked
  // blind once the last walk is paid for, so that it wakes and asks again.
  if (const int refused = m_pacing.refused_once_paid(tasks_done()); refused != no_thief) {
    m_sched.mark_blind(m_sched.worker_at(static_cast<unsigned>(refused)));
  }
  // A worker marked blind has not seen this queue: wake it now, whatever the limit. The mark is
  // claimed, so each one is a single wake-up, of the worker that needs it.
  if (m_sched.blind_workers() != 0 && m_sched.wake_a_blind_worker(m_index)) {
    bump(m_stats.peers_woken);
    return;
  }
  const std::uint64_t now = m_sched.now_ns();
  bool limit_passed = now >= m_next_peer_wake_ns;
#if defined(TESSERA_DEBUG_CHECKS)
  if (test_hooks::peer_wake_limited.load(std::memory_order_relaxed)) limit_passed = false;
#endif
  if (limit_passed && m_sched.wake_a_parked_worker(m_index)) {
    m_next_peer_wake_ns = now + peer_wake_interval_ns;
    bump(m_stats.peers_woken);
  }
}

bool worker::has_work_for_park() const noexcept {
  if (local_total() != 0 || m_wsize != 0 || m_stack_top != nullptr) return true;
  if (m_attention.load(std::memory_order_seq_cst) != 0) return true;
  for (const pool* p : m_pools) {
    if (p->inbox_maybe_nonempty()) return true;
  }
  return false;
}

void worker::idle() {
  // Spin below only if the last sleep did not end by the safety timeout with nothing found since:
  // a worker that wakes every 50 ms with nothing to do would otherwise spin 200 µs each time
  // (~0.4 % of a core per idle worker), and anything the timeout rescues is in its inboxes.
  const bool after_timeout = std::exchange(m_slept_through, false);
  flush_group();  // first: a waiter of the group learns of its last completion without delay
  // Then the epoch counts, before the quick poll: a task it finds may run for a long time (a
  // blocking one, or one held by a test), and completions left unpublished meanwhile would keep
  // their slots unbalanced, so the global epoch could not pass the oldest of them + 3, and what
  // was retired since would wait for that task's end, though every operation that could see it
  // has ended (task_tree_race stalled so under load, 1 run in ~20). A few stores to this worker's
  // own lines; no clock read.
  m_epoch.publish();
#if defined(TESSERA_DEBUG_CHECKS)
  if (auto* hook = test_hooks::idle_polling.load(std::memory_order_acquire)) hook(*this);
#endif
  // A quick poll before the rest of going idle: a task handed over by another worker (a
  // round-robin, a serialized resource's pool, a reply) often arrives within a few hundred ns,
  // and the bookkeeping below (a clock read, the epoch advance) would otherwise stand between its
  // arrival and its start (measured in docs/performance-notes.md, "Idle workers").
  for (unsigned i = 0; i < quick_polls; ++i) {
    if (drain_inboxes(256) != 0 || m_attention.load(std::memory_order_relaxed) != 0) return;
    cpu_relax();
  }
  m_queued.store(0, std::memory_order_relaxed);
  m_spawns_until_offer = 2;
  refresh_distance(m_sched.prefetch_distance());
  const std::uint64_t start = m_sched.now_ns();  // one clock read: a hand-over comes through here
  advance_epoch(start);
  maybe_reclaim();
  if (local_total() != 0) {
    // The reclamation task, this worker's own: nothing was found, so the next idle() (once the
    // task ran) still skips the spin if the last sleep ended by its timeout.
    m_slept_through = after_timeout;
    return;
  }
  // After the publish (wait_idle() reads the published counts) and after the reclamation task:
  // notified first, a waiter could read the statistics while that task ran (a TSan run of
  // statistics_reclaim caught one executed task too few).
  m_sched.notify_if_idle();
  const std::uint64_t spin = after_timeout ? 0 : m_sched.spin_before_park_ns();
#if defined(TESSERA_DEBUG_CHECKS)
  if (auto* hook = test_hooks::idle_spinning.load(std::memory_order_acquire)) hook(*this, spin);
#endif
  // Poll the inboxes after every pause: the time a hand-over from another worker waits here is
  // up to one round. The clock (a vDSO call, as long as a poll) is read every 8th round and a
  // steal is asked for every 256th (~5 µs).
  const idle_hook* hook = m_active_local ? idle_hook_or_null() : nullptr;
  for (unsigned round = 1;; ++round) {
    if (drain_inboxes(256) != 0 || m_attention.load(std::memory_order_relaxed) != 0) break;
    if ((round & 255) == 1) {
      if (m_sched.worker_count() > 1) try_steal();
      // The application's events (idle_hook.h), polled as often as a steal is asked for; what
      // its poll spawned went to this worker's own pools.
      if (hook != nullptr && spin != 0) {
        hook->wait(worker_id{m_index}, std::chrono::nanoseconds{0});
        if (local_total() != 0 || m_stack_top != nullptr) break;
      }
    }
    if ((round & 7) == 0) {
      const std::uint64_t now = m_sched.now_ns();
      if (now - start >= spin) {
#if defined(TESSERA_STATISTICS)
        bump(m_stats.idle_ns, now - start);
#endif
        m_slept_through = park();
        return;
      }
    }
    cpu_relax();
  }
#if defined(TESSERA_STATISTICS)
  bump(m_stats.idle_ns, m_sched.now_ns() - start);
#endif
}

bool worker::park() {
#if defined(TESSERA_DEBUG_CHECKS)
  if (auto* hook = test_hooks::parking.load(std::memory_order_acquire)) hook(*this);
#endif
  flush_group();
  m_epoch.publish();
  // Also here: an inactive worker parks without going through idle() (otherwise wait_idle()
  // waits for its safety timeout when the last task ends on a worker deactivated after it).
  m_sched.notify_if_idle();
  // An active worker waits in the application's idle hook, if there is one (idle_hook.h), which
  // it may decline; an inactive one parks on the futex.
  const bool active = m_active_local;
  const idle_hook* hook = active ? idle_hook_or_null() : nullptr;
  // seq_cst: either a producer sees sleeping != 0 and wakes us (the futex, or the hook's wake),
  // or we see its task below.
  m_sleeping.store(hook != nullptr ? asleep_hook : asleep_futex, std::memory_order_seq_cst);
  // An active worker is counted as parked, so that busy workers with queued work wake it
  // (periodic()). seq_cst, before the checks below and the look for a victim: see periodic().
  if (active) m_sched.count_parked();
  const bool stay_awake = active ? has_work_for_park()
                                 : m_attention.load(std::memory_order_seq_cst) != 0;
  if (stay_awake) {
    if (active) m_sched.count_unparked();
    m_sleeping.store(asleep_awake, std::memory_order_relaxed);
    return false;
  }
  // A peer that published more than one queued task before we counted ourselves parked may have
  // missed us (periodic() read the count first): ask it for work now. Its answer comes into our
  // pools (an inbox push or a pool hand-over), which wakes us; an answer of nothing does not.
  if (active) {
    try_steal();  // with one worker there is no victim: choose_victim gives -1
    if (m_pending_victim < 0) {
      // Parking blind: no peer had more than one task queued (or every such peer had been asked
      // by another thief). A peer that publishes more from now on may be within its
      // once-per-millisecond limit on wake-ups, so we mark ourselves blind (seq_cst) and read
      // the queues again: a peer that publishes after that read sees the mark and wakes us at
      // once (periodic(), wake_a_peer); one that published before it is seen here and asked.
      // Without the mark, that peer's wake-up would wait for the limit, or for our park timeout
      // if it ran a long task meanwhile. The mark names us, it is not a count: the wake-up it
      // causes comes to us, not to the first parked worker in index order.
      m_sched.mark_blind(*this);
      try_steal();  // clears the mark if it asked someone after all
    }
  }
#if defined(TESSERA_STATISTICS)
  const std::uint64_t start = m_sched.now_ns();
#endif
  // The timeout is a safety net only; every wake-up path is explicit.
  std::uint64_t timeout_ns = 50'000'000;
#if defined(TESSERA_DEBUG_CHECKS)
  if (const std::uint64_t t = test_hooks::park_timeout_ns.load(std::memory_order_relaxed)) {
    timeout_ns = t;
  }
#endif
  if (m_trace != nullptr) [[unlikely]] {
    trace_instant(trace_kind::park, 0);
  }
  bool timed_out = false;
  bool on_futex = hook == nullptr;
  if (hook != nullptr) {
    if (hook->wait(worker_id{m_index}, std::chrono::nanoseconds{timeout_ns}) == idle_wait::waited) {
      // Not woken (still asleep_hook) and nothing spawned by the hook: as a timeout, so that the
      // next idle() does not spin first. A waker that exchanged the word meanwhile calls the
      // hook's wake, late: the next wait may return for nothing, as the contract allows.
      timed_out = m_sleeping.exchange(asleep_awake, std::memory_order_relaxed) != asleep_awake &&
                  local_total() == 0 && m_stack_top == nullptr;
    } else {
      // Declined: park on the futex instead, unless a waker took the word meanwhile (then its
      // wake went to the hook, for nothing, and we are awake).
      std::uint32_t expected = asleep_hook;
      on_futex = m_sleeping.compare_exchange_strong(expected, asleep_futex,
                                                    std::memory_order_seq_cst);
    }
  }
  if (on_futex) {
    futex_wait_for(m_sleeping, asleep_futex, timeout_ns);
    // Still asleep_futex: nobody woke us (a waker exchanges it before its futex wake); the
    // timeout, or a spurious return. Relaxed: only this worker's own next idle() depends on it.
    timed_out = m_sleeping.load(std::memory_order_relaxed) != asleep_awake;
  }
  if (m_trace != nullptr) [[unlikely]] {
    trace_instant(trace_kind::wake, timed_out ? 1 : 0);
  }
  // relaxed: a peer that still counts us only tries a wake-up that finds no sleeper
  if (active) m_sched.count_unparked();
  m_sched.clear_blind(*this);  // awake: we look for work ourselves
  m_sleeping.store(asleep_awake, std::memory_order_relaxed);
#if defined(TESSERA_STATISTICS)
  bump(m_stats.parked_ns, m_sched.now_ns() - start);
#endif
  return timed_out;
}

}  // namespace tessera::detail
