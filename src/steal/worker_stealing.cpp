// The worker's side of work stealing (steal/stealing.h): asking a victim, answering a thief, and
// handing pools over (a thief's home pool, a resource pool, or every pool of a worker being
// deactivated).
#include <algorithm>
#include <array>
#include <utility>

#include "runtime/scheduler.h"
#include "runtime/test_hooks.h"
#include "runtime/worker.h"

namespace tessera::detail {

bool worker::request_steal(int thief) noexcept {
  if (!m_mailbox.post(thief)) return false;
#if defined(TESSERA_DEBUG_CHECKS)
  if (auto* hook = test_hooks::steal_requested.load(std::memory_order_acquire)) {
    hook(*this, static_cast<unsigned>(thief));
  }
#endif
  notify(attention_steal);
  return true;
}

void worker::adopt_incoming() {
  std::vector<pool*> in;
  {
    // The mutex orders everything the giver did to these pools before our first access.
    lock hold(m_incoming_mutex);
    in.swap(m_incoming);
  }
  bump(m_stats.pools_stolen, in.size());
  for (pool* p : in) {
    m_pools.push_back(p);
    p->held_by.store(m_index, std::memory_order_relaxed);
    for (unsigned pr = 0; pr < priority_count; ++pr) m_local_count[pr] += p->local[pr].size();
  }
  m_holds_home = owns(m_home);
  // Pushers may have posted the mail for these pools to their previous owner.
  if (!in.empty()) m_mail.store(1, std::memory_order_relaxed);
}

void worker::give_pool(pool* p, worker& to) {
  before_tasks_leave();
  // Tasks of p already taken into the window go back to the front of p, in order.
  std::array<window_entry, window_slots> keep{};
  unsigned kept = 0;
  for (unsigned i = m_wsize; i-- > 0;) {
    window_entry e = m_window[(m_wbegin + i) & (window_slots - 1)];
    if (e.p == p) {
      p->local[hdr(e.t).m_priority].push_front(e.t);
      ++m_local_count[hdr(e.t).m_priority];
    } else {
      keep[kept++] = e;
    }
  }
  m_wbegin = 0;
  m_wsize = kept;
  for (unsigned i = 0; i < kept; ++i) m_window[i] = keep[kept - 1 - i];

  m_pools.erase(std::find(m_pools.begin(), m_pools.end(), p));
  p->held_by.store(pool::none, std::memory_order_relaxed);  // ordered before the hand-over mutex
  m_holds_home = owns(m_home);
  for (unsigned pr = 0; pr < priority_count; ++pr) m_local_count[pr] -= p->local[pr].size();
  m_rr = 0;
  m_batch = 0;
  {
    lock hold(to.m_incoming_mutex);
    // seq_cst: a spawner that pushes after this reads the new owner (see scheduler::push).
    p->owner.store(to.m_index, std::memory_order_seq_cst);
    to.m_incoming.push_back(p);
  }
  to.notify(attention_incoming);
  if (m_trace != nullptr) [[unlikely]] {
    trace_instant(trace_kind::pool_handed, 1, static_cast<std::uint16_t>(to.m_index));
  }
}

void worker::give_everything() {
  const unsigned active = std::max(1u, m_sched.active_workers());
  unsigned k = m_index;
  while (!m_pools.empty()) {
    pool* p = m_pools.back();
    // k % active is us only if the count grew since we read our flag: we then adopt the pool
    // again when we handle attention_incoming, and nothing is lost.
    give_pool(p, m_sched.worker_at(k++ % active));
  }
  m_queued.store(0, std::memory_order_relaxed);
  // An inactive worker reclaims nothing: what it retired goes to the active ones. They stamp it
  // with a later epoch, which frees it later, never too early.
  for (resource_header* h = m_retired.take_all(); h != nullptr;) {
    resource_header* next = h->retired_next;
    m_sched.retire_for_workers(h);
    h = next;
  }
}

void worker::answer_steal_request() {
  const int thief = m_mailbox.take();
  if (thief == no_thief || thief == m_index) return;
  worker& to = m_sched.worker_at(static_cast<unsigned>(thief));
  if (!to.m_active.load(std::memory_order_acquire)) {  // it would only hand them back
    bump(m_stats.steal_answers_empty);
    return;
  }
  before_tasks_leave();  // tasks may leave below
  // 1. The thief's own home pool goes back to it.
  for (pool* p : m_pools) {
    if (p->is_home && p->home_of == thief) {
      give_pool(p, to);
      return;
    }
  }
  // 2. A whole resource pool with work, if another pool of ours has work too.
  drain_inboxes(1024);
  unsigned with_work = 0;
  pool* candidate = nullptr;
  for (pool* p : m_pools) {
    if (p->queued() == 0) continue;
    ++with_work;
    if (!p->is_home) candidate = p;
  }
  if (with_work >= 2 && candidate != nullptr) {
    give_pool(candidate, to);
    return;
  }
  // 3. Half of the home pool's tasks that have no placement target, as one chain
  //    (split_for_thief). With one pool per worker, resources live in home pools: their
  //    serialized tasks stay. The walk is paid for first (steal_pacing).
  const std::uint64_t done = tasks_done();
  if (!m_pacing.may_walk(done)) {
    remember_refused(thief);
    bump(m_stats.steal_answers_empty);
    return;
  }
#if defined(TESSERA_DEBUG_CHECKS)
  if (auto* hook = test_hooks::steal_answering.load(std::memory_order_acquire)) {
    hook(*this, static_cast<unsigned>(thief));
  }
#endif
  std::size_t moved = 0;
  std::size_t steps = 0;
  // Not movable either: a reader of an optimistic_scheduled resource whose pool this is (with
  // one pool per worker, resources live in home pools). A read forwarded here after its torn
  // runs (guarded_executor::read_pessimistically) must run here, beside no writer: taken by a
  // thief it would read beside the writers again and could bounce between thieves and this
  // pool. Nothing marks a forwarded read apart from one spawned here, so the rule keeps both.
  const std::uint32_t home_index = m_home->index;
  auto movable = [home_index](const task* t) {
    return hdr(t).m_target_kind == task_header::target_none && !serialized_by_pool(t) &&
           !scheduled_reader_of(t, home_index);
  };
  for (unsigned pr = 0; pr < priority_count; ++pr) {
    local_queue& q = m_home->local[pr];
    if (!m_holds_home || q.size() < 2) continue;
    const stolen_chain c = split_for_thief(q, movable);
    steps += c.steps;
    if (c.first == nullptr) continue;
    moved += c.moved;
    m_local_count[pr] = 0;
    for (pool* p : m_pools) m_local_count[pr] += p->local[pr].size();
    // To the pool's owner, which is no longer `to` if `to` was deactivated since the check
    // above and gave its pools away: told, `to` would only go back to sleep, and the new
    // owner, parked, would find the tasks at its park timeout.
    m_sched.push_inbox(*to.home(), pr, c.first, c.last);
  }
  // Nothing moved because nothing was queued (fewer than two): the thief is marked blind, and
  // the next periodic() with more queued (ours or another worker's) wakes it at once (marked
  // after the walk, in program order before our next periodic()). With two or more queued that
  // may not move, it is woken once this walk is paid for (remember_refused), not at once:
  // tasks that may not move would otherwise wake it for nothing again and again.
  if (moved == 0) {
    if (local_total() < 2) {
      m_sched.mark_blind(to);
    } else {
      remember_refused(thief);
    }
  }
  m_pacing.walked(steps, moved, done);
  bump(m_stats.steal_walk_steps, steps);
  if (moved > 0) {
    bump(m_stats.tasks_stolen, moved);
    if (m_trace != nullptr) [[unlikely]] {
      trace_instant(trace_kind::tasks_stolen, static_cast<std::uint32_t>(moved),
                    static_cast<std::uint16_t>(thief));
    }
  } else {
    bump(m_stats.steal_answers_empty);
  }
}

void worker::remember_refused(int thief) noexcept {
  if (const int earlier = m_pacing.remember_refused(thief); earlier != no_thief) {
    m_sched.mark_blind(m_sched.worker_at(static_cast<unsigned>(earlier)));
  }
}

void worker::try_steal() {
  if (m_pending_victim >= 0) {
    // Still waiting for the victim to answer?
    if (m_sched.worker_at(static_cast<unsigned>(m_pending_victim))
            .steal_requested_by() == m_index) {
      return;
    }
    m_pending_victim = -1;
  }
  int victim;
  if (!m_holds_home) {
    victim = static_cast<int>(m_home->owner.load(std::memory_order_acquire));
    if (victim == m_index) return;
  } else {
    victim = m_sched.choose_victim(m_index);
  }
  if (victim < 0) return;
  if (m_sched.worker_at(static_cast<unsigned>(victim)).request_steal(m_index)) {
    m_pending_victim = victim;
    m_sched.clear_blind(*this);  // the answer brings work, or marks us again
    bump(m_stats.steal_requests);
  }
}

}  // namespace tessera::detail
