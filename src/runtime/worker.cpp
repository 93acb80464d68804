#include "runtime/worker.h"

#include <algorithm>
#include <cstring>
#include <ctime>
#include <typeinfo>
#include <stdexcept>
#include <string_view>
#include <utility>

#include "memory/reclamation.h"
#include "memory/task_allocator.h"
#include "runtime/futex.h"
#include "runtime/task_lifetime.h"
#include "runtime/prefetch.h"
#include "runtime/scheduler.h"
#include "runtime/test_hooks.h"
#include "runtime/topology.h"
#include "sync/latch.h"

namespace tessera::detail {
namespace {

static_assert(worker::window_slots > runtime::max_prefetch_distance &&
                  (worker::window_slots & (worker::window_slots - 1)) == 0,
              "the prefetch window is a power-of-two ring holding distance + 1 tasks");

thread_local worker* tl_worker = nullptr;

}  // namespace

worker* current_worker() noexcept { return tl_worker; }

worker::worker(scheduler& s, std::uint16_t index, unsigned cpu, unsigned node)
    : m_sched(s), m_index(index), m_cpu(cpu), m_node(node), m_ctx(context_access::make(&s.rt(), this, index)),
      m_guard(m_ctx, index, s.pools()) {}

worker::~worker() { join(); }

void worker::start(pool* home, std::vector<pool*> pools) {
  m_home = home;
  m_pools = std::move(pools);
  for (pool* p : m_pools)
    p->held_by.store(m_index, std::memory_order_relaxed);  // before the thread
  m_holds_home = owns(m_home);
#if defined(TESSERA_DEBUG_CHECKS)
  if (auto* hook = test_hooks::worker_starting.load(std::memory_order_acquire)) hook(m_index);
#endif
  m_thread = std::thread([this] { run(); });
}

void worker::join() {
  if (m_thread.joinable()) m_thread.join();
}

// ---- cross-thread signalling --------------------------------------------------------------------

void worker::notify(std::uint32_t bits) noexcept {
  m_attention.fetch_or(bits, std::memory_order_seq_cst);  // seq_cst: Dekker with park()
  wake_if_sleeping();
}

bool worker::wake_if_sleeping() noexcept {
  // seq_cst: ordered after the caller's push/notify; see mpsc_queue::maybe_nonempty. The
  // exchange decides which of several wakers issues the futex wake.
  if (m_sleeping.load(std::memory_order_seq_cst) == asleep_awake) return false;
  const std::uint32_t was = m_sleeping.exchange(asleep_awake, std::memory_order_seq_cst);
  if (was == asleep_futex) {
    futex_wake(m_sleeping);
    return true;
  }
  if (was == asleep_hook) {
    // The worker waits in the application's idle hook (idle_hook.h): its wake is sticky, so a
    // wait that has not blocked yet returns at once.
    idle_hook_or_null()->wake(worker_id{m_index});
    return true;
  }
  return false;
}

const idle_hook* worker::idle_hook_or_null() const noexcept {
  const idle_hook& h = m_sched.options().idle;
  return h.wait ? &h : nullptr;
}

void worker::set_active(bool a) noexcept {
  if (m_active.exchange(a, std::memory_order_acq_rel) != a) notify(attention_active);
}

// ---- the loop -----------------------------------------------------------------------------------

void worker::run() {
  tl_worker = this;
  task_allocator::set_thread_node(m_node);
  if (m_sched.options().pin) {
    std::string why;
    if (!topology::get().pin_this_thread(m_cpu, why)) m_sched.report_pin_failure(why);
  } else {
    topology::get().unpin_this_thread();
  }
  init_step_mode();  // before the runtime's constructor returns (it waits for worker_started)
  m_sched.worker_started();  // the constructor waits for every worker's pin (see pinned())
  const unsigned interval = m_sched.options().epoch_interval_tasks;
  unsigned until_periodic = interval;  // a local: a register across the task's call
  for (;;) {
    if (m_attention.load(std::memory_order_relaxed) != 0) {
      if (!attend()) break;
    }
    // Tasks back to back, laid out so that a task that needs nothing else falls through to the
    // next one; the attention word is checked after every task. A traversal's step held to run
    // next (finish(), step_prefetched and step_direct) comes back from execute() and runs next
    // without going through the work-first stack; its run ends at the next periodic(), where
    // it goes to the back of the home pool (the bound the stack's runs have in slot_run_limit).
    for (window_entry e = next(); e.t != nullptr;) {
      task* const held = execute(e.t, e.p);
      if (--until_periodic == 0) [[unlikely]] {
        if (held != nullptr) push_local(*m_home, held, false);
        context_access::current(m_ctx) = nullptr;
        periodic();
        until_periodic = interval;
      } else if (held != nullptr && m_attention.load(std::memory_order_relaxed) == 0) [[likely]] {
        e = {held, m_home};
        continue;
      } else if (held != nullptr) {
        hold_next(held);  // attend() puts the stack back into the home pool
      }
      if (m_attention.load(std::memory_order_relaxed) != 0) [[unlikely]] {
        break;
      }
      e = next();
    }
    context_access::current(m_ctx) = nullptr;  // not between two tasks of the run above (see current_task())
    m_step_sample_ok = false;  // the interval under way has a pause in it
    if (m_trace != nullptr) [[unlikely]] {
      trace_close_span();
    }
    if (m_attention.load(std::memory_order_relaxed) == 0) idle();
  }
  flush_group();
  m_epoch.publish();
  task_allocator::flush_thread_cache();
  tl_worker = nullptr;
}

void worker::periodic() {
  if (m_trace != nullptr) [[unlikely]] {
    trace_close_span();
  }
  choose_step_mode();
  update_step_hold();  // the mode may have changed, and the window's urgent flag been cleared
  flush_group();
  m_epoch.publish();
  // Tasks from other threads wait in inboxes while the work-first stack runs (a fetch, which
  // drains them, may not come for a long while in a recursion or a chain). Only when mail says
  // so: walking every inbox of every owned pool here was 4 instructions per task, and a
  // measurable part of a recursion's time.
  take_mail();
  offer_queued();
  m_spawns_until_offer = 2;
  task_allocator::refill_ahead();  // fresh memory's first touch here, not under a task's latch
  refresh_distance(m_sched.prefetch_distance());
  // For statistics(), the sampler's distance (refresh_distance publishes a distance set):
  // relaxed, written by this worker only (a load of its own line).
  if (m_stats.distance.load(std::memory_order_relaxed) != m_distance) {
    m_stats.distance.store(m_distance, std::memory_order_relaxed);
  }
  // The epoch advances at most once per epoch_period, so the clock (a vDSO call of 20-40 ns,
  // as much as a task of the spawn benchmark) is read only about 16 times per period: every
  // m_clock_every-th call, doubled while calls come faster than that, halved when slower.
  if (--m_clock_countdown == 0) {
    const std::uint64_t now = m_sched.now_ns();
    const std::uint64_t target = m_sched.epoch_period_ns() / 16;
    const std::uint64_t elapsed = now - m_last_clock_ns;
    m_last_clock_ns = now;
    if (elapsed < target && m_clock_every < max_clock_every) {
      m_clock_every *= 2;
    } else if (elapsed > 2 * target && m_clock_every > 1) {
      m_clock_every /= 2;
    }
    m_clock_countdown = m_clock_every;
    advance_epoch(now);
  }
  if (m_trace != nullptr) [[unlikely]] {  // no clock read: placed between the span's end above
    m_trace->record(trace_event::untimed_instant(  // and the next task, both timed
        trace_kind::queue_length, static_cast<std::uint32_t>(local_total()),
        static_cast<std::uint16_t>(m_wsize)));
  }
  maybe_reclaim();
}

bool worker::attend() {
  for (;;) {
    requeue_next();  // pools may change hands, a thief may look: the stack goes back into the pool
    handle_attention(m_attention.exchange(0, std::memory_order_acquire));
    // m_exit and m_active_local change only here: an inactive worker stays in this loop.
    while (!m_exit && !m_active_local) {
      park();
      if (m_attention.load(std::memory_order_relaxed) != 0) {
        handle_attention(m_attention.exchange(0, std::memory_order_acquire));
      }
    }
    // While a group is cancelled (scheduler::cancel sets attention_cancel in every worker), the
    // tasks run here, each checked first, and run()'s own loop stays as it is.
    if (m_exit || m_sched.cancellations() == 0 || run_while_cancelled()) return !m_exit;
  }
}

void worker::handle_attention(std::uint32_t bits) {
  if (bits & attention_incoming) adopt_incoming();
  if (bits & attention_active) m_active_local = m_active.load(std::memory_order_acquire);
  // An inactive worker keeps no pools, also none that reach it after it was deactivated.
  if (!m_active_local && !m_pools.empty()) give_everything();
  if (bits & attention_steal) answer_steal_request();
  if (bits & attention_exit) m_exit = true;
}

// ---- picking the next task ----------------------------------------------------------------------

void worker::take_mail() {
  if (m_mail.load(std::memory_order_relaxed) == 0) return;
  // seq_cst, paired with post_mail: a pusher that saw the mail still up (and posted nothing) did
  // its push before this exchange in the single order of seq_cst operations, so the seq_cst
  // checks of the drain below see it. A pusher that comes later posts again.
  m_mail.exchange(0, std::memory_order_seq_cst);
  drain_inboxes(256);
  // Left over (the limit, or a push caught between its exchange and its link): ask again.
  for (const pool* p : m_pools) {
    if (p->inbox_maybe_nonempty()) {
      m_mail.store(1, std::memory_order_relaxed);
      return;
    }
  }
}

std::size_t worker::drain_inboxes(std::size_t limit) {
  std::size_t n = 0;
  for (pool* p : m_pools) {
    for (unsigned pr = 0; pr < priority_count; ++pr) {
      if (!p->inbox[pr].maybe_nonempty()) continue;  // seq_cst: see take_mail
      task* t;
      std::size_t k = 0;
      while (k < limit && p->inbox[pr].pop(t) == pop_result::item) {
        p->local[pr].push_back(t);
        ++k;
      }
      m_local_count[pr] += k;
      n += k;
    }
  }
  return n;
}

TESSERA_ALWAYS_INLINE worker::window_entry worker::take() {
  // Inboxes are drained when mail says they have tasks, which periodic() looks at every
  // epoch_interval_tasks tasks (a fetch is a task, so no count of its own here), and when nothing
  // else is at hand (an empty local queue with a non-empty window can wait: the window still
  // has work). Looking at every inbox of every owned pool every 16 fetches instead costs ~12
  // instructions per fetch in YCSB (callgrind; a worker there owns several pools).
  if (local_total() == 0 && (m_wsize != 0 || drain_inboxes(256) == 0)) {
    return {nullptr, nullptr};
  }
  const std::size_t n = m_pools.size();
  for (unsigned pr = 0; pr < priority_count; ++pr) {
    if (m_local_count[pr] == 0) continue;
    // The cursor in a local (a register), wrapped as it moves; m_rr may be out of range after
    // pools left this worker.
    std::size_t rr = m_rr < n ? m_rr : 0;
    for (std::size_t i = 0; i < n; ++i) {
      pool* q = m_pools[rr];
      if (task* t = q->local[pr].pop_front()) {
        --m_local_count[pr];
        if (++m_batch >= pool_batch) {
          m_batch = 0;
          if (++rr == n) rr = 0;
        }
        m_rr = rr;
        return {t, q};
      }
      m_batch = 0;
      if (++rr == n) rr = 0;
    }
    m_rr = rr;
  }
  return {nullptr, nullptr};
}

void worker::requeue_next() noexcept {
  if (m_stack_top == nullptr) return;
  // The stack is already linked newest first, the home pool's front order: one splice.
  std::size_t n = 1;
  task* last = m_stack_top;
  for (task* t; (t = hdr(last).m_next.load(std::memory_order_relaxed)) != nullptr; last = t) ++n;
  m_home->local[stack_priority].push_front_chain(m_stack_top, last, n);
  m_local_count[stack_priority] += n;
  m_stack_top = nullptr;
}

TESSERA_ALWAYS_INLINE bool worker::can_hold_follow_up(const task* t, const task* f) noexcept {
  if (hdr(f).m_data != nullptr || hdr(f).m_priority != stack_priority) return false;
  if (!scheduler::stays_home(f, *this) || more_urgent_queued(hdr(f).m_priority)) return false;
  // A more urgent task already taken into the prefetch window is not counted as queued; held
  // follow-ups would run ahead of it, up to the run limit each (without this check, 66 tasks
  // ran before it at distance 2, 1,040 at 16). Only a follow-up without data while the
  // window holds tasks gets here, which a traversal (its steps have data) never does.
  if (m_wsize != 0 && more_urgent_in_window(hdr(f).m_priority)) return false;
  // A run of follow-ups goes on while each is returned by the one held before it (t came off the
  // stack right after that hold: only its own spawns could have gone above it). Anything else
  // starts a new run. A pointer compare and a store: the completion counts that this compared
  // before (their sum, loaded as a vector straight after a scalar increment, is not forwarded
  // from the store) cost a self-following task ~3 ns per re-run (9.1 -> 6.2 ns).
  if (t != m_last_held) m_slot_left = slot_run_limit;
  if (m_slot_left == 0) {
    // To the back of the queue: everything queued before it runs first, and it starts a new
    // run when it comes back (the next call finds m_last_held unequal).
    m_last_held = nullptr;
    return false;
  }
  --m_slot_left;
  m_last_held = f;
  return true;
}

TESSERA_NOINLINE bool worker::more_urgent_in_window(unsigned priority) const noexcept {
  for (unsigned i = 0; i < m_wsize; ++i) {
    if (hdr(m_window[(m_wbegin + i) & (window_slots - 1)].t).m_priority < priority) return true;
  }
  return false;
}

bool worker::more_urgent_queued(unsigned priority) const noexcept {
  for (unsigned pr = 0; pr < priority; ++pr) {
    if (m_local_count[pr] != 0) return true;
  }
  return false;
}

TESSERA_ALWAYS_INLINE worker::window_entry worker::next() {
  if (m_stack_top != nullptr) {
    // The work-first stack (see push_next and finish): no queue round-trip, nothing to prefetch.
    // Its tasks all have stack_priority; a more urgent task queued since (by the running task,
    // or drained from an inbox) goes first, and the stack waits at the front of the home pool.
    if (!more_urgent_queued(stack_priority)) [[likely]] {
      return {pop_next(), m_home};
    }
    requeue_next();
  }
  if (m_wsize == 0) {
    // The window ran dry (start, after idling, distance 0, tasks without data). Re-read the
    // distance after the fetch that acquired the task, so a set_prefetch_distance() that
    // happened before the task was spawned is seen; a busy worker re-reads it in periodic().
    const auto [t, p] = take();  // inline: every queued task without data comes through here
    if (t == nullptr) return {nullptr, nullptr};
    // No data to wait for: run it now, without the window (the window fills again behind the
    // next task that has data; the distance is read then).
    if (hdr(t).m_data == nullptr) return from_pool({t, p});
    refresh_distance(m_sched.prefetch_distance());
    if (m_distance == 0) return from_pool({t, p});
    prefetch(t);
    // Nothing queued behind it (a chain, a lone request): run it now as well.
    if (local_total() == 0) return from_pool({t, p});
    note_window_priority(t);
    m_window[m_wbegin] = {t, p};
    m_wsize = 1;
  }
  // Refill the window: a task entering at position k is k tasks away from running.
  while (m_wsize <= m_distance) {
    const window_entry e = take();
    if (e.t == nullptr) break;
    prefetch(e.t);
    note_window_priority(e.t);
    m_window[(m_wbegin + m_wsize) & (window_slots - 1)] = e;
    ++m_wsize;
  }
  if (m_wsize == 0) return {nullptr, nullptr};
  const window_entry e = m_window[m_wbegin];
  m_wbegin = (m_wbegin + 1) & (window_slots - 1);
  --m_wsize;
  return from_pool(e);
}

TESSERA_ALWAYS_INLINE void worker::prefetch(const task* t) noexcept {
  // The descriptor queued after t will enter the window next: fetch it now, so its annotation
  // is in cache when its data prefetch is due ([MxTasks-early] §3.3, the two-step prefetch).
  if (task* after = local_queue::next_of(const_cast<task*>(t))) __builtin_prefetch(after, 0, 3);
  if (hdr(t).m_data == nullptr) return;
  bump(m_stats.prefetches, issue_prefetch(*t));
}

// ---- running a task -----------------------------------------------------------------------------

TESSERA_ALWAYS_INLINE task* worker::execute(task* t, pool* p) {
  // Tracing off: this branch is all it costs (m_trace never changes while the worker runs).
  // On: the task's event, inline; a forwarded task marks it where it is forwarded.
  if (m_trace != nullptr) [[unlikely]] trace_task_begins(t);
  return execute_plain(t, p);
}

void worker::advance_epoch(std::uint64_t now) noexcept {
  if (m_trace == nullptr) [[likely]] {
    m_sched.try_advance_epoch(now);
    return;
  }
  const std::uint64_t before = m_sched.global_epoch();
  m_sched.try_advance_epoch(now);
  if (const std::uint64_t after = m_sched.global_epoch(); after != before)
    trace_instant(trace_kind::epoch_advanced, static_cast<std::uint32_t>(after));
}

TESSERA_ALWAYS_INLINE task* worker::execute_plain(task* t, pool* p) {
  if (hdr(t).m_is_resource != 0) [[unlikely]] {
    return execute_on_resource(t, p);
  }
  // A task without a resource: no primitive, nothing to restore. Its follow-up cannot exist
  // when it threw.
  context_access::current(m_ctx) = t;
  m_token = true;
  task* follow;
  try {
    follow = t->execute(m_ctx);
  } catch (...) {
    fail(t, std::current_exception());
    return nullptr;
  }
  if (follow == nullptr) [[likely]] {
    complete(t);
    return nullptr;
  }
  return finish(t, follow, nullptr, primitive::none);
}

TESSERA_ALWAYS_INLINE task* worker::execute_on_resource(task* t, pool* p) {
  // Inline in the task loop (out of line it cost ~17 instructions per task of saving and
  // restoring registers, tessera-bench sync at 1 worker); what is rare is out of line.
  // The header's applied primitive is read once (it is set when the resource is made): under
  // `none` (an automatic choice at one worker) nothing is serialized, and one compare decides.
  const void* ran_on = hdr(t).m_data;  // for finish()
  const primitive applied = resource_header::of(ran_on)->applied;
  if (applied == primitive::none) [[likely]] {
    // A path of its own: finish() knows the primitive serializes nothing, and nothing of the
    // header is kept across the run (~5 instructions a task, tessera-bench sync at 1 worker).
    context_access::current(m_ctx) = t;
    m_token = true;
    const guarded_run r = m_guard.run_plain(t);
    if (r.outcome == run_outcome::follow_up) [[likely]] {
      return finish(t, r.follow, ran_on, primitive::none);
    }
    if (r.outcome == run_outcome::done) {
      complete(t);
    } else {
      other_outcome(t, *resource_header::of(ran_on), r.outcome);
    }
    return nullptr;
  }
  resource_header& h = *resource_header::of(ran_on);
  if (serializes(applied, t) && forward_to_resource_pool(t, p)) [[unlikely]] {
    return nullptr;
  }
  context_access::current(m_ctx) = t;
  m_token = true;
  const guarded_run r = m_guard.run(t, h, applied);
  if (r.outcome == run_outcome::follow_up) [[likely]] {
    // The primitive read again from the header (in cache: the run just used it) rather than
    // kept across the run: kept, GCC stored it and the header's address on the stack before
    // the test for `none` above, on the `none` path too (two stores a task).
    return finish(t, r.follow, ran_on, resource_header::of(ran_on)->applied);
  }
  if (r.outcome == run_outcome::done) {
    complete(t);
  } else {
    other_outcome(t, *resource_header::of(ran_on), r.outcome);
  }
  return nullptr;
}

TESSERA_NOINLINE bool worker::forward_to_resource_pool(task* t, pool* p) {
  // Routed lazily (see scheduler::choose_pool): a serialized task runs only in its
  // resource's pool. Forward it there; it stays counted as one task in flight.
  pool& home =
      m_sched.pool_at(resource_header::of(hdr(t).m_data)->pool.load(std::memory_order_relaxed));
  if (&home == p) return false;
  if (m_trace != nullptr) [[unlikely]] m_trace->task_forwarded();
  m_sched.push(home, t, this, false, /*spawn=*/false);
  return true;
}

TESSERA_NOINLINE void worker::other_outcome(task* t, resource_header& h, run_outcome outcome) {
  if (outcome == run_outcome::failed) {
    fail(t, m_guard.take_error());
    return;
  }
  // forwarded: a read writers kept tearing, queued behind the writers in the resource's pool,
  // as a task passed on: it stays counted as one task in flight. A pool that changes hands
  // takes it along, and no thief takes it alone (answer_steal_request). On the pool's owner it
  // reads optimistically again, where no writer can overlap it (its first run validates), and
  // runs plain if that is torn all the same (read_pessimistically); after a move_resource()
  // before it runs, it is off the resource's pool again (and may be forwarded anew).
  context_access::current(m_ctx) = nullptr;  // t is the other worker's now
  if (m_trace != nullptr) [[unlikely]] m_trace->task_forwarded();
  m_sched.push(m_sched.pool_at(h.pool.load(std::memory_order_relaxed)), t, this, false,
               /*spawn=*/false);
}

void worker::fail(task* t, std::exception_ptr error) {
  bump(m_stats.exceptions);
  m_sched.record_exception(hdr(t).m_group, std::move(error));
  complete(t);
}

TESSERA_ALWAYS_INLINE void worker::complete(task* t) noexcept {
  // The common case inline: no destructor to run, and the block is kept as the thread's spare or
  // fits on its list. Every call is then on the rare paths (open_group_batch), so nothing is held
  // across one: no callee-saved register or stack slot for t's fields in the loop around this.
  if constexpr (task_cache_inline) {
    if (hdr(t).m_destroyer == 0) [[likely]] {
      const group g = hdr(t).m_group;
      const unsigned slot = hdr(t).m_epoch_slot;
      if (task_cache_keep(t, hdr(t).m_block) || task_cache_push(t, hdr(t).m_block)) [[likely]] {
        count_completion(g, slot);
        return;
      }
    }
  }
  complete_slow(t);
}

TESSERA_NOINLINE void worker::complete_slow(task* t) noexcept {
  const group g = hdr(t).m_group;
  const unsigned slot = hdr(t).m_epoch_slot;
  destroy_task(t);
  count_completion(g, slot);
}

TESSERA_ALWAYS_INLINE void worker::count_completion(group g, unsigned slot) noexcept {
  if (m_token) {  // else a child carries t's count (take_token): nothing to count
    m_epoch.count_completion(slot);
    if (g.valid()) group_add(g, -1, slot);
  }
}

TESSERA_ALWAYS_INLINE void worker::count_new(group g, unsigned slot) noexcept {
  m_epoch.count_spawn(slot);
  if (g.valid()) group_add(g, +1, slot);
}

void worker::reacquire_token(group g, unsigned slot) noexcept {
  m_token = true;
  m_epoch.uncount_transfer();
  count_new(g, slot);
}

TESSERA_ALWAYS_INLINE void worker::carry_count(group g, unsigned slot) noexcept {
  if (m_token) {
    m_epoch.count_transfer();
  } else {
    count_new(g, slot);
  }
}

#if defined(TESSERA_DEBUG_CHECKS)
TESSERA_NOINLINE bool worker::follow_up_rejected(task* t, task* follow) {
  if (follow != t) {
    try {
      scheduler::require_unspawned(follow, "follow-up");
    } catch (...) {
      fail(t, std::current_exception());  // `follow` belongs to whoever holds it: left alone
      return true;
    }
  }
  try {
    scheduler::require_resource(follow, "follow-up");  // t itself may have been re-annotated
    if (hdr(follow).m_group.valid() && hdr(follow).m_group != hdr(t).m_group &&
        !m_sched.groups().table().current(hdr(follow).m_group)) {
      throw std::logic_error("tessera: a follow-up annotated with a stale or completed group");
    }
  } catch (...) {
    if (follow != t) destroy_task(follow);  // returned to the runtime: ours to free
    fail(t, std::current_exception());
    return true;
  }
  return false;
}
#endif

TESSERA_ALWAYS_INLINE bool worker::hold_stepping(task* t, const void* ran_on) noexcept {
  // A more urgent task queued or waiting in the window goes first (as can_hold_follow_up; the
  // queues are checked again if the step goes onto the stack).
  if (more_urgent_queued(stack_priority)) return false;
  if (m_urgent_in_window) [[unlikely]] {
    m_urgent_in_window = more_urgent_in_window(stack_priority);
    if (m_urgent_in_window) return false;
    update_step_hold();
  }
  // No run count: the run of held steps ends at the next periodic() (worker::run), which queues
  // the held step at the back of the home pool.
  // On the object it just ran on, its lines are in cache already; at distance 0 nothing is
  // prefetched.
  if (m_step_mode == step_prefetched && hdr(t).m_data != ran_on && m_distance != 0) {
    bump(m_stats.prefetches, issue_prefetch(*t));
  }
  return true;
}

TESSERA_ALWAYS_INLINE task* worker::finish(task* t, task* follow, const void* ran_on,
                                           primitive applied) {
#if defined(TESSERA_DEBUG_CHECKS)
  if (follow_up_rejected(t, follow)) return nullptr;
#endif
  // The common cases first, with nothing to save: a task that runs again next on this worker
  // (a traversal's next step, fib's recursion). The rest is out of line.
  if (follow != t) [[unlikely]] {
    finish_other(t, follow, ran_on, can_hold_follow_up(t, follow));
    return nullptr;
  }
  if (hdr(t).m_data == nullptr) {
    // Without data: held on the work-first stack (can_hold_follow_up), else as below.
    if (can_hold_follow_up(t, t)) {
      carry_count(hdr(t).m_group, hdr(t).m_epoch_slot);
      hold_next(t);
      return nullptr;
    }
    if (scheduler::stays_home(t, *this)) {  // no data: header_hot is false
      carry_count(hdr(t).m_group, hdr(t).m_epoch_slot);
      push_local(*m_home, t, false);
      return nullptr;
    }
    finish_other(t, t, ran_on, false);
    return nullptr;
  }
  {
    // A traversal's next step: t again, annotated with the next object, to the back of the home
    // pool, where it enters the prefetch window. It stays in this worker's pools as a held
    // follow-up stays on the stack (a forward to its resource's pool, a hand-over or a steal
    // answer publishes the transfers first), so it carries t's count the same way. On the
    // object t just ran on (header in cache), finish_other applies the resource's placement now
    // if it has one (serialized_by_pool reads the cached header); any other task on it goes
    // home here too, as choose_pool would send it (a hot object revisited: 35-36 instructions
    // less per step, tessera-bench sync --access hot at 1 worker).
    // (`applied`: the primitive of ran_on's resource, read before the run; serializes() is
    // branch-free and tested first, so that no branch depends on the primitive, see scheduler.h.)
    if (scheduler::stays_home(t, *this) &&
        !(serializes(applied, t) && header_hot(t, ran_on))) {
      carry_count(hdr(t).m_group, hdr(t).m_epoch_slot);
      // Run again next (step_prefetched, step_direct: handed back to the loop, worker::run),
      // or queued (step_queued): see choose_step_mode.
      if (m_step_hold != hold_none && hdr(t).m_priority == stack_priority) {
        if (m_step_hold == hold_direct) [[likely]] {
          // hold_stepping's test that m_step_hold does not answer.
          if (!more_urgent_queued(stack_priority)) {
            // Runs next, with no window ahead of it: its next object's header and first line
            // are requested now, while the loop's own steps stand between here and its run.
            if (const void* d = hdr(t).m_data; d != nullptr) {
              if (hdr(t).m_is_resource != 0) __builtin_prefetch(resource_header::of(d));
              __builtin_prefetch(d);
            }
            return t;
          }
        } else if (hold_stepping(t, ran_on)) {
          return t;
        }
      }
      push_local(*m_home, t, false);
      return nullptr;
    }
  }
  // (t has data: can_hold_follow_up would refuse it.)
  finish_other(t, t, ran_on, false);
  return nullptr;
}

// ---- how a traversal steps (finish(), step_mode) ------------------------------------------------

bool worker::fix_step_mode(std::string_view name) noexcept {
  if (name != "queued" && name != "prefetched" && name != "direct") return false;
  m_step_fixed = true;
  m_step_mode = name == "queued" ? step_queued : name == "prefetched" ? step_prefetched : step_direct;
  return true;
}

void worker::init_step_mode() noexcept {
  // m_step_mode: step_queued, or the mode fix_step_mode() set before this worker started.
  m_step_phase = 0;
  m_step_countdown = step_probe_min;
  m_step_probe_every = step_probe_min;
  m_step_held_sample = {};
  m_step_ref = UINT64_MAX;
  m_step_slow = 0;
  m_step_sample_ok = false;
  m_adapt_distance = m_sched.options().adapt_prefetch_distance;
  m_distance_set = m_sched.prefetch_distance();
  m_distance = m_distance_set;
  m_distance_held = m_distance_set;
  m_stats.distance.store(m_distance, std::memory_order_relaxed);
  update_step_hold();
}

bool worker::start_probe() noexcept {
  for (unsigned tries = 0; tries < probe_turns; ++tries) {
    const unsigned turn = m_probe_turn;
    m_probe_turn = static_cast<std::uint8_t>((turn + 1) % probe_turns);
    if (turn % 2 == 0) {  // a step mode: the next one, then the one after it
      if (m_step_fixed) continue;
      m_step_mode = static_cast<std::uint8_t>((m_step_mode + 1 + turn / 2) % step_modes);
      return true;
    }
    // A distance: twice, then half the one held (0, prefetching off, is never probed). The
    // window fills to the new distance or drains to it as tasks run (next()).
    if (!m_adapt_distance || m_distance == 0) continue;
    const unsigned d = turn == 1 ? std::min(2 * m_distance, runtime::max_prefetch_distance)
                                 : std::max(m_distance / 2, 1u);
    if (d == m_distance) continue;
    m_distance = d;
    return true;
  }
  return false;
}

void worker::choose_step_mode() noexcept {
  if (m_step_fixed && !m_adapt_distance) return;  // nothing to probe: no clock read either
  const std::uint64_t now = trace_clock::now();
  std::uint64_t ticks = now - m_step_mark;
  m_step_mark = now;
#if defined(TESSERA_DEBUG_CHECKS)
  if (auto* hook = test_hooks::interval_ticks.load(std::memory_order_acquire)) {
    ticks = hook(m_index, m_distance, m_step_mode);
  }
#endif
  if (!m_step_sample_ok) {  // the interval had a pause (attention, idling): not a sample
    m_step_sample_ok = true;
    return;
  }
  if (m_step_phase == 0) {
    // The held setting, step_samples intervals in a row over twice its fastest when it was last
    // compared: the data moved (a tree grew out of the cache, the application went on to
    // another phase). The next probe comes after step_samples more, and the waits start again
    // from the least. (A quarter instead of twice: on YCSB's tree, whose 50-task intervals vary
    // with the batch tasks in them, it probed four times as often, for nothing.)
    if (ticks / 2 > m_step_ref) {
      if (++m_step_slow >= step_samples && m_step_countdown > step_samples + 1) {
        m_step_countdown = step_samples + 1;
        m_step_probe_every = step_probe_min;
      }
    } else {
      m_step_slow = 0;
    }
    // Its last step_samples intervals before a probe are what the probe is compared with.
    if (m_step_countdown <= step_samples) m_step_held_sample.add(ticks);
    if (--m_step_countdown != 0) return;
    m_step_held = m_step_mode;
    m_distance_held = m_distance;
    if (m_step_confirming) {
      // The change that won the last probe, tried again against fresh samples of the held one.
      m_step_mode = m_step_confirm_mode;
      m_distance = m_confirm_distance;
    } else if (!start_probe()) {
      m_step_countdown = step_probe_max;
      m_step_held_sample = {};
      return;
    }
    m_step_probe_sample = {};
    m_step_phase = 1;
    bump(m_stats.step_probes);
    return;
  }
  // Probing: the first interval settles (the window fills or drains), then step_samples count.
  if (m_step_phase > 1) m_step_probe_sample.add(ticks);
  if (++m_step_phase <= step_samples + 1) return;
  const std::uint64_t probed = m_step_probe_sample.trimmed();
  const bool won = probed + probed / 32 < m_step_held_sample.trimmed();
  if (won && !m_step_confirming) {
    // A first win: back to the held setting for step_samples intervals (after one to settle),
    // then the same probe again. Where intervals vary by themselves (YCSB's tree) a third of
    // single probes won; a change is taken only if it wins twice in a row.
    m_step_confirming = true;
    m_step_confirm_mode = m_step_mode;
    m_confirm_distance = m_distance;
    m_step_mode = m_step_held;
    m_distance = m_distance_held;
    m_step_phase = 0;
    m_step_countdown = step_samples + 1;
    m_step_held_sample = {};
    return;
  }
  m_step_confirming = false;
  if (won) {
    bump(m_stats.step_changes);
    m_step_probe_every = step_probe_min;  // switched: look at the others again soon
    m_step_ref = m_step_probe_sample.fastest;
  } else {
    // A probe changes the mode or the distance, never both: restoring both undoes it.
    m_step_mode = m_step_held;
    m_distance = m_distance_held;
    m_step_probe_every = std::min(m_step_probe_every * 2, step_probe_max);
    m_step_ref = m_step_held_sample.fastest;
  }
  m_step_slow = 0;
  m_step_phase = 0;
  m_step_countdown = m_step_probe_every;
  m_step_held_sample = {};
}

TESSERA_NOINLINE void worker::finish_other(task* t, task* follow, const void* ran_on, bool hold) {
  const group g = hdr(t).m_group;
  const unsigned slot = hdr(t).m_epoch_slot;
  if (follow != t) {
    hdr(follow).m_epoch_slot = static_cast<std::uint8_t>(slot);
    if (!hdr(follow).m_group.valid()) hdr(follow).m_group = g;
    // t's destructor runs first, while t still holds whatever count it holds: a task spawned
    // from it is t's child (current_task() is t) and is counted as any other, the first one
    // taking t's count (take_token) included. Run after t's count went to the follow-up or
    // its completion, that child took a count t no longer had: one completion too many, and
    // a wait that never returned (spawn_test.a_destructor_may_spawn_whatever_its_task_returned).
    destroy_task(t);
  }
  if (hold && hdr(follow).m_group == g) {  // follow != t: finish() took the other case
    carry_count(g, slot);
    hold_next(follow);
    return;
  }
  // A follow-up of another group is held only above an empty stack. Above tasks of g (spawned
  // by t), its completion would open its group's batch and leave it open while those run,
  // however long: nothing on the stack checks groups. Queued at the front of the home pool
  // instead, it runs once they did, and taking it from the pool flushes g's batch
  // (worker::from_pool), so a wait for the follow-up's group does not last as long as an
  // unrelated task of g.
  const bool to_pool_front = hold && hdr(follow).m_group != g && m_stack_top != nullptr;
  if (to_pool_front) hold = false;
  if (!m_token) reacquire_token(g, slot);
  // Another group is joined before the follow-up can run (and leave it).
  const bool transferred = hdr(follow).m_group == g && g.valid();
  if (hdr(follow).m_group != g) m_sched.groups().table().join(hdr(follow).m_group);
  m_epoch.count_spawn(slot);
  if (hold) {
    hold_next(follow);
  } else if (to_pool_front) {
    push_local(*m_home, follow, true);  // can_hold_follow_up: it stays home, no data
  } else {
    m_sched.route(follow, this, false, header_hot(follow, ran_on));
  }
  if (g.valid() && !transferred) {  // (follow == t: transferred)
    group_add(g, -1, slot);
    // A follow-up of another group held on the stack runs next, and nothing there checks
    // groups (worker::from_pool does for queued tasks): g's batch goes out now, not after it.
    if (hold) flush_group();
  }
  // Counted last: everything this task caused is already counted as spawned.
  m_epoch.count_completion(slot);
}

// ---- batched group counts ---------------------------------------------------------------------

void worker::open_group_batch(group g, unsigned slot) noexcept {
  flush_group();
  m_gbatch.open(g, slot, m_epoch);
}

void worker::flush_group() noexcept {
  if (m_gbatch.flush(m_sched.groups().table(), m_epoch,
                     [this](group g) { m_sched.complete_group(g, this); })) {
    bump(m_stats.group_batches);
  }
}

TESSERA_NOINLINE void worker::flush_before_other_group() noexcept {
  flush_group();
  m_epoch.publish();
}

worker_statistics worker::statistics() const noexcept {
  worker_statistics s;
  // A task that gave its count to a child (take_token) is one execution and one spawn that the
  // epoch counters do not count.
  const std::uint64_t transferred = m_epoch.transferred.load(std::memory_order_relaxed);
  s.executed = transferred;
  s.spawned_local = transferred;
  for (unsigned i = 0; i < epoch_slots; ++i) {
    s.executed += m_epoch.completed[i].load(std::memory_order_relaxed);
    s.spawned_local += m_epoch.spawned[i].load(std::memory_order_relaxed);
  }
  // Not the user's: open group batches (pseudo-tasks in the epoch counters) and the runtime's
  // reclamation tasks.
  const std::uint64_t batches = m_stats.group_batches.load(std::memory_order_relaxed);
  s.cancelled = m_stats.cancelled.load(std::memory_order_relaxed);
  const std::uint64_t not_run_by_user =
      batches + m_stats.reclaims_run.load(std::memory_order_relaxed) + s.cancelled;
  const std::uint64_t not_spawned_by_user =
      batches + m_stats.reclaims_spawned.load(std::memory_order_relaxed);
  s.executed -= std::min(s.executed, not_run_by_user);
  s.spawned_local -= std::min(s.spawned_local, not_spawned_by_user);
  s.spawned_remote = m_stats.spawned_remote.load(std::memory_order_relaxed);
  s.spawned_local -= std::min(s.spawned_local, s.spawned_remote);
  s.optimistic_retries = m_guard.retries();
  s.optimistic_fallbacks = m_guard.fallbacks();
  s.prefetches = m_stats.prefetches.load(std::memory_order_relaxed);
  s.pools_stolen = m_stats.pools_stolen.load(std::memory_order_relaxed);
  s.tasks_stolen = m_stats.tasks_stolen.load(std::memory_order_relaxed);
  s.exceptions = m_stats.exceptions.load(std::memory_order_relaxed);
  s.peers_woken = m_stats.peers_woken.load(std::memory_order_relaxed);
  s.steal_walk_steps = m_stats.steal_walk_steps.load(std::memory_order_relaxed);
  s.steal_requests = m_stats.steal_requests.load(std::memory_order_relaxed);
  s.steal_answers_empty = m_stats.steal_answers_empty.load(std::memory_order_relaxed);
  s.idle_ns = m_stats.idle_ns.load(std::memory_order_relaxed);
  s.parked_ns = m_stats.parked_ns.load(std::memory_order_relaxed);
  s.step_probes = m_stats.step_probes.load(std::memory_order_relaxed);
  s.step_changes = m_stats.step_changes.load(std::memory_order_relaxed);
  s.prefetch_distance = m_stats.distance.load(std::memory_order_relaxed);
  return s;
}

// ---- cancellation (runtime::cancel): away from the task loop ----------------------------------

TESSERA_NOINLINE bool worker::run_while_cancelled() {
  const unsigned interval = m_sched.options().epoch_interval_tasks;
  unsigned until_periodic = interval;
  for (;;) {
    const bool tasks_left = run_checking_cancellations(until_periodic, interval);
    context_access::current(m_ctx) = nullptr;
    if (m_trace != nullptr) trace_close_span();
    if (tasks_left || m_sched.cancellations() == 0) return true;
    if (m_attention.load(std::memory_order_relaxed) != 0) return false;
    idle();  // returns when work or the attention word calls
  }
}

// Out of line: run()'s own loop pays nothing for cancellation.
TESSERA_NOINLINE bool worker::run_checking_cancellations(unsigned& until_periodic,
                                                         unsigned interval) {
  for (window_entry e = next(); e.t != nullptr; e = next()) {
    if (m_sched.cancelled(hdr(e.t).m_group)) {
      drop_cancelled(e.t);
    } else if (task* held = execute(e.t, e.p)) {
      // A held step (finish()): queued here, so a traversal does not run unbounded while
      // cancellations are checked.
      push_local(*m_home, held, false);
    }
    if (--until_periodic == 0) {
      context_access::current(m_ctx) = nullptr;
      periodic();
      until_periodic = interval;
    }
    if (m_attention.load(std::memory_order_relaxed) != 0) return false;
    if (m_sched.cancellations() == 0) return true;
  }
  return false;
}

void worker::drop_cancelled(task* t) noexcept {
  context_access::current(m_ctx) = t;  // as execute(): its count is completed as a task's that returned nothing
  m_token = true;
  bump(m_stats.cancelled);
  complete(t);
}

}  // namespace tessera::detail

// idle_hook.h: outside a worker (no hook wait can run there) it says "woken", so that a caller
// does not block.
bool tessera::idle_woken() noexcept {
  const detail::worker* w = detail::current_worker();
  return w == nullptr || w->woken_in_hook();
}
