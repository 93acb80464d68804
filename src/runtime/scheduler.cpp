#include "runtime/scheduler.h"

#include <unistd.h>  // sysconf

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>


#include "memory/resource_memory.h"
#include "memory/task_allocator.h"
#include "runtime/futex.h"
#include "runtime/test_hooks.h"
#include "runtime/topology.h"
#include "sync/latch.h"

namespace tessera::detail {
namespace {

thread_local std::uint64_t tl_random = 0x9E3779B97F4A7C15ull;
std::uint64_t next_random() noexcept {
  // xorshift64*: placement choices only, never correctness.
  tl_random ^= tl_random >> 12;
  tl_random ^= tl_random << 25;
  tl_random ^= tl_random >> 27;
  return tl_random * 0x2545F4914F6CDD1Dull;
}

std::uint8_t weight_of(frequency f) noexcept {
  switch (f) {
    case frequency::low: return 1;
    case frequency::normal: return 4;
    case frequency::high: return 16;
  }
  return 4;
}

}  // namespace

scheduler::scheduler(runtime& rt, const runtime_options& options)
    : m_runtime(rt),
      m_options(options),
      m_groups(options.report_unhandled_exceptions),
      m_start(std::chrono::steady_clock::now()) {
  auto& topo = topology::get();
  if (options.spin_before_park.count() < 0)
    throw std::invalid_argument("tessera: runtime_options.spin_before_park must not be negative");
  if (options.epoch_period.count() < 0)
    throw std::invalid_argument("tessera: runtime_options.epoch_period must not be negative");
  // Both are used in nanoseconds: far above any sensible value, and below an overflow there.
  constexpr auto longest = std::chrono::hours(1);
  if (options.spin_before_park > longest)
    throw std::invalid_argument("tessera: runtime_options.spin_before_park: at most one hour");
  if (options.epoch_period > longest)
    throw std::invalid_argument("tessera: runtime_options.epoch_period: at most one hour");
  if (options.idle.wait && !options.idle.wake)
    throw std::invalid_argument("tessera: runtime_options.idle: a wait without a wake");
  m_spin_ns = static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(options.spin_before_park).count());
  std::vector<unsigned> cpus = options.cpus;
  {
    // A CPU the machine does not have is a mistake in the list; one it has but this process may
    // not use is a refused pin (the worker runs unpinned and says so).
    const long configured = sysconf(_SC_NPROCESSORS_CONF);
    for (const unsigned c : cpus) {
      if (configured > 0 && c >= static_cast<unsigned long>(configured))
        throw std::invalid_argument("tessera: runtime_options.cpus names CPU " + std::to_string(c) +
                                    ", but this machine has CPUs 0-" +
                                    std::to_string(configured - 1));
    }
  }
  if (cpus.empty()) {
    const auto& order = topo.worker_order();  // cores before SMT siblings, node by node
    const unsigned n = options.workers.value_or(static_cast<unsigned>(order.size()));
    if (n == 0) throw std::invalid_argument("tessera: runtime_options.workers must be at least 1");
    for (unsigned i = 0; i < n; ++i) cpus.push_back(order[i % order.size()]);
  }
  if (cpus.size() > 65535) throw std::invalid_argument("tessera: at most 65535 workers");
  {
    // The CPUs the workers run on: distinct ones of the list (several workers may share one),
    // at most as many as the process may use.
    std::vector<unsigned> distinct = cpus;
    std::sort(distinct.begin(), distinct.end());
    distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
    m_cpu_count = std::max<unsigned>(
        1, static_cast<unsigned>(std::min(distinct.size(), topo.allowed_cpus().size())));
  }
  if (options.pools_per_worker == 0 || options.pools_per_worker > 64) {
    throw std::invalid_argument("tessera: runtime_options.pools_per_worker must be 1-64, got " +
                                std::to_string(options.pools_per_worker));
  }
  if (options.prefetch_distance > runtime::max_prefetch_distance) {
    throw std::invalid_argument("tessera: prefetch_distance must be at most " +
                                std::to_string(runtime::max_prefetch_distance));
  }
  if (options.epoch_interval_tasks == 0) {
    throw std::invalid_argument("tessera: epoch_interval_tasks must be at least 1");
  }
  m_prefetch_distance.store(options.prefetch_distance, std::memory_order_relaxed);
  const unsigned w = static_cast<unsigned>(cpus.size());
  const unsigned ppw = options.pools_per_worker;
  for (unsigned i = 0; i < w * ppw; ++i) {
    auto p = std::make_unique<pool>();
    p->index = i;
    p->home_of = static_cast<std::uint16_t>(i / ppw);
    p->is_home = (i % ppw) == 0;
    p->owner.store(i / ppw, std::memory_order_relaxed);
    m_pools.push_back(std::move(p));
  }
  for (unsigned i = 0; i < w; ++i) {
    const unsigned node = topo.node_of_cpu(cpus[i]);
    m_workers.push_back(
        std::make_unique<worker>(*this, static_cast<std::uint16_t>(i), cpus[i], node));
    m_epochs.attach(m_workers.back()->counters());
    if (m_workers_of_node.size() <= node) m_workers_of_node.resize(node + 1);
    m_workers_of_node[node].push_back(i);
  }
  m_trace = trace_session::from_options(options.trace, w);
  if (m_trace != nullptr) {
    for (unsigned i = 0; i < w; ++i) m_workers[i]->attach_trace(&m_trace->buffer(i));
  }
  // NOLINTNEXTLINE(concurrency-mt-unsafe): read once per runtime, nobody here sets it
  if (const char* env = std::getenv("TESSERA_STEP_MODE"); env != nullptr && *env != '\0') {
    for (const std::unique_ptr<worker>& wk : m_workers) {
      if (!wk->fix_step_mode(env)) {
        std::fprintf(stderr, "tessera: TESSERA_STEP_MODE='%s' ignored (queued, prefetched or "
                     "direct; unset: each worker chooses)\n", env);
        break;
      }
    }
  }
  m_active.store(w, std::memory_order_release);
  m_pinned.store(options.pin, std::memory_order_relaxed);
  // The constructor returns once every worker tried its pin, so that pinned() is final: it
  // answers for the pins the workers got, not for pins still to be tried.
  std::latch starting(w);
  m_starting = &starting;
  unsigned started = 0;
  try {
    for (; started < w; ++started) {
      std::vector<pool*> mine;
      for (unsigned j = 0; j < ppw; ++j) mine.push_back(m_pools[started * ppw + j].get());
      pool* home = mine.front();
      m_workers[started]->start(home, std::move(mine));
    }
    starting.wait();
    m_starting = nullptr;
  } catch (...) {
    // A thread that could not be created (a limit on threads or memory): the destructor does
    // not run for a constructor that throws, so the workers already running are told to exit
    // here (they hold no task yet) and joined before the exception leaves. Without this the
    // unwinding joined worker 0, which idled on and never exited.
    for (unsigned i = 0; i < started; ++i) m_workers[i]->notify(worker::attention_exit);
    for (unsigned i = 0; i < started; ++i) m_workers[i]->join();
    throw;
  }
}

// stop() throws only when called from one of this runtime's tasks, and runtime::~runtime stops
// the process before it gets here in that case (it calls stop() first; this one finds it done).
scheduler::~scheduler() { stop(); }  // NOLINT(bugprone-exception-escape): see above

std::uint64_t scheduler::now_ns() const noexcept {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::steady_clock::now() - m_start)
                                        .count());
}

void scheduler::report_pin_failure(const std::string& why) {
  topology::get().unpin_this_thread();  // the calling worker: on every CPU of the process
  m_pinned.store(false, std::memory_order_relaxed);
  static std::atomic<bool> reported{false};  // once per process, not per runtime
  if (!reported.exchange(true)) {
    std::fprintf(stderr, "tessera: could not pin workers to CPUs (%s); running unpinned\n",
                 why.c_str());
  }
}

// ---- spawning ----------------------------------------------------------------------------------

void scheduler::handed_over_twice(const char* what) {
  throw std::logic_error(std::string("tessera: ") + what +
                         " of a task that was spawned already (the runtime owns a task from its "
                         "spawn until it is done), or that make_task did not make");
}

void scheduler::not_a_resource(const char* what) {
  throw std::logic_error(std::string("tessera: ") + what +
                         " of a task annotated with annotate_resource(p) where p was not made by "
                         "runtime::make_resource, or was freed already (annotate_data is for "
                         "plain memory: prefetched, not synchronized)");
}

void group_changed_after_spawn() {
  throw std::logic_error(
      "tessera: annotate(group) on a task that was spawned already: its count is in the group it "
      "was spawned into until it is done; return or spawn a new task annotated with the other "
      "group");
}

void scheduler::null_task(const char* what) {
  throw std::invalid_argument(std::string("tessera: ") + what + " of nullptr");
}

#if defined(TESSERA_DEBUG_CHECKS)
void scheduler::acted_unvalidated(const char* what) {
  throw std::logic_error(std::string("tessera: ") + what +
                         " from an optimistic reader before context::validate() returned true: "
                         "a torn read is run again and would do it again (validate first, see "
                         "tessera/context.h)");
}

void scheduler::refuse_unvalidated(task* t) {
  destroy_task(t);  // ownership passed to the runtime with the spawn
  acted_unvalidated("a spawn");
}

void scheduler::refuse_unvalidated(task* const* ts, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) destroy_task(ts[i]);  // passed to the runtime with the spawn
  acted_unvalidated("a spawn");
}

void scheduler::refuse_stale_group(task* t) {
  destroy_task(t);  // ownership passed to the runtime with the spawn
  throw std::logic_error(
      "tessera: spawn into a stale or completed group (a group serves one round: make_group() "
      "for each, or a group of another runtime)");
}
#endif

void scheduler::spawn_external(task* t) {
  require_spawnable(t, "spawn");  // before the stop check below, which would free t
  // seq_cst pair with stop(): either stop() sees this spawn in flight and waits for it to be
  // counted, or this spawn sees `stopping` and is refused (the task is destroyed: ownership
  // passed to the runtime with the call).
  m_external_in_flight.fetch_add(1, std::memory_order_seq_cst);
  if (m_stopping.load(std::memory_order_seq_cst)) {
    m_external_in_flight.fetch_sub(1, std::memory_order_release);
    destroy_task(t);
    throw std::logic_error("tessera: spawn from outside the runtime after stop() began");
  }
  if (hdr(t).m_group.valid()) {
#if defined(TESSERA_DEBUG_CHECKS)
    if (!m_groups.table().current(hdr(t).m_group)) {
      m_external_in_flight.fetch_sub(1, std::memory_order_release);
      refuse_stale_group(t);
    }
#endif
    m_groups.table().join(hdr(t).m_group);
  }
  hdr(t).m_epoch_slot = m_epochs.count_in_current_slot(
      [this](unsigned slot, int d) { m_epochs.count_external(slot, d); });
  route(t, nullptr);
  // release: stop() acquires this before it checks quiescence, so it sees the count above.
  m_external_in_flight.fetch_sub(1, std::memory_order_release);
}

void scheduler::spawn_outside_task(task* t, worker& from) {
  if (hdr(t).m_group.valid()) m_groups.table().join(hdr(t).m_group);
  hdr(t).m_epoch_slot = m_epochs.count_in_current_slot(
      [&from](unsigned slot, int d) { from.counters().add_spawn_seq_cst(slot, d); });
  route(t, &from, hdr(t).m_data == nullptr);
}

pool* scheduler::choose_pool(task* t, worker* from, bool header_hot) noexcept {
  // Rule 1 needs the resource's header. For a task spawned by a worker it is not read here: that
  // would be a cache miss on every step of a traversal (and on every insert's leaf) before the
  // prefetcher had a chance. The task goes to the worker's home pool, its header is prefetched
  // with its data, and worker::execute forwards it to the resource's pool if it is serialized
  // there (one extra queue hop for those tasks only). Spawns from outside are routed at once,
  // and so are follow-ups on the object their task just ran on (its header is in cache; a
  // serialized task that keeps returning itself would otherwise take the detour every time).
  if ((from == nullptr || header_hot) && serialized_by_pool(t)) {
    return m_pools[resource_header::of(hdr(t).m_data)->pool.load(std::memory_order_relaxed)].get();
  }
  const unsigned ppw = m_options.pools_per_worker;
  switch (hdr(t).m_target_kind) {
    case task_header::target_worker: {
      const unsigned n = static_cast<unsigned>(m_workers.size());
      const unsigned w = hdr(t).m_target < n ? hdr(t).m_target : hdr(t).m_target % n;
      return m_pools[std::size_t{w} * ppw].get();
    }
    case task_header::target_node: {
      const unsigned node = hdr(t).m_target;
      if (node < m_workers_of_node.size() && !m_workers_of_node[node].empty()) {
        const auto& ws = m_workers_of_node[node];
        return m_pools[std::size_t{ws[next_random() % ws.size()]} * ppw].get();
      }
      break;  // no worker on that node: fall through to the default placement
    }
    default: break;
  }
  if (from != nullptr) return from->home();
  static thread_local unsigned rr = 0;
  const unsigned active = std::max(1u, active_workers());
  return m_pools[std::size_t{rr++ % active} * ppw].get();
}

void scheduler::route_slow(task* t, worker* from, bool newest_first, bool header_hot) {
  pool* p = choose_pool(t, from, header_hot);
  push(*p, t, from, newest_first);
}

void scheduler::spawn_ungrouped(task* t, worker& from) {
  require_spawnable(t, "spawn");
  hdr(t).m_group = group{};
  hdr(t).m_epoch_slot = hdr(from.current_task()).m_epoch_slot;  // from a running task only
  from.counters().count_spawn(hdr(t).m_epoch_slot);
  if (stays_home(t, from)) {
    // The front of the home pool, not the work-first stack: as spawn_into_other_group.
    from.push_local(*from.home(), t, hdr(t).m_data == nullptr);
  } else {
    from.sched().route_slow(t, &from, hdr(t).m_data == nullptr, false);
  }
}

void scheduler::hold_group(group g) {
  if (!g.valid()) return;
  if (!m_groups.table().current(g))
    throw std::logic_error("tessera: a loop into a stale or completed group");
  // Relaxed, as any join: the caller runs a task of g or holds g's open reference.
  m_groups.table().join(g);
}

void scheduler::spawn_into_other_group(task* t, worker& from, bool newest_first, bool home) {
#if defined(TESSERA_DEBUG_CHECKS)
  if (!from.sched().m_groups.table().current(hdr(t).m_group)) refuse_stale_group(t);  // as spawn_external
#endif
  from.sched().m_groups.table().join(hdr(t).m_group);  // at once: the batch holds the parent's group only
  from.counters().count_spawn(hdr(t).m_epoch_slot);
  if (home) {
    // To the front of the home pool, not onto the work-first stack: the parent's completion is
    // batched, and only a task taken from a pool flushes the batch when its group differs
    // (worker::from_pool). From the stack, t would run first and hold the parent's group open
    // for as long as it runs.
    from.push_local(*from.home(), t, newest_first);
  } else {
    from.sched().route_slow(t, &from, newest_first, false);
  }
}

void scheduler::push(pool& p, task* t, worker* from, bool newest_first, bool spawn) noexcept {
  // `owner` names `from` as soon as a giver handed p over, before `from` adopted p under the
  // hand-over mutex: only a pool `from` holds (adopted) may take a plain local push.
  if (from != nullptr && from->owns(&p)) {
    from->push_local(p, t, newest_first);
    return;
  }
  if (from != nullptr) {
    // t may be counted only in from's batch; and it may carry a count that from's transfers
    // hold (a child that took its parent's count, forwarded now to its resource's pool by
    // execute_on_resource): the worker that runs t may complete it, and balance the epoch
    // counts, before from publishes again (epoch_counters::publish_transfers).
    from->flush_group_if(hdr(t).m_group);
    from->counters().publish_transfers();
    // Not for a task passed on (a serialized task forwarded to its resource's pool, a when_done
    // continuation routed by the worker that completed the group): its spawn was counted where
    // it happened, and counting it again here would count it twice.
    if (spawn) from->count_remote_spawn();
  }
  push_inbox(p, hdr(t).m_priority, t, t);
}

void scheduler::push_inbox(pool& p, unsigned priority, task* first, task* last) noexcept {
  p.inbox[priority].push_chain(first, last);
  // seq_cst: ordered after the push's exchange, so a pool handed over concurrently is seen with
  // its new owner (see worker::give_pool), and that owner's `sleeping` flag is read after it.
  const unsigned owner = p.owner.load(std::memory_order_seq_cst);
  m_workers[owner]->post_mail();
  m_workers[owner]->wake_if_sleeping();
}

bool scheduler::wake_a_blind_worker(unsigned except) noexcept {
  for (unsigned i = 0; i < m_workers.size(); ++i) {
    if (i == except) continue;
    worker& w = *m_workers[i];
    // A claimed mark of a worker that is awake (it woke meanwhile, or was still spinning when a
    // victim marked it) is dropped: that worker looks for work itself.
    // An inactive worker's mark is dropped too: reactivated, it asks for its home pool back.
    if (clear_blind(w) && w.active() && w.wake_if_sleeping()) {
      return true;
    }
  }
  return false;
}

bool scheduler::wake_a_parked_worker(unsigned except) noexcept {
  for (unsigned i = 0; i < m_workers.size(); ++i) {
    worker& w = *m_workers[i];
    if (i == except || !w.active()) continue;
    if (w.wake_if_sleeping()) return true;
  }
  return false;
}

// ---- groups ------------------------------------------------------------------------------------

bool scheduler::on_own_worker() const noexcept {
  // A worker of another runtime may block on this one (a runtime made inside a task, say): it
  // does not hold up any of this runtime's tasks.
  const worker* w = current_worker();
  return w != nullptr && w->owner() == this;
}

void scheduler::wait(group g) {
  if (on_own_worker()) {
    throw std::logic_error(
        "tessera: runtime::wait(group) called from one of its own workers; use "
        "context::when_done instead");
  }
  m_groups.close_for_wait(g);
  leave_group(g, nullptr);  // drop the open reference
  m_groups.wait_closed(g);
}

void scheduler::when_done(group g, task* continuation, worker& from) {
  require_spawnable(continuation, "when_done");
#if defined(TESSERA_DEBUG_CHECKS)
  require_validated(from, "when_done");  // the continuation stays the caller's
#endif
  const task* parent = from.current_task();
  const group own = hdr(continuation).m_group;
  const group joins = own.valid() || parent == nullptr ? own : hdr(parent).m_group;
  const std::uint8_t slot = parent != nullptr ? hdr(parent).m_epoch_slot : current_epoch_slot();
  m_groups.close_with_continuation(g, continuation, joins, slot);
  // Counted as spawned now, in its operation's slot, not when the group completes: the group's
  // remaining tasks may belong to other operations (other slots), and the registering task may
  // finish first, so without this the slot could balance, and the epoch move on and free what
  // the continuation may still read, while the continuation waits. (g cannot complete before
  // the leave below: the open reference is ours until then.)
  from.counters().count_spawn(slot);
  leave_group(g, &from);
}

void scheduler::detach(group g) {
  m_groups.close_detached(g);
  // From a task of this runtime, a completion here is a worker's (its continuation rules); from
  // any other thread, an outside one.
  worker* w = current_worker();
  leave_group(g, (w != nullptr && w->owner() == this) ? w : nullptr);  // the open reference
}

void scheduler::leave_group(group g, worker* from) noexcept {
  if (m_groups.table().leave(g)) complete_group(g, from);
}

bool scheduler::cancel(group g) {
  if (!m_groups.cancel(g)) return false;
  for (auto& w : m_workers) w->notify(worker::attention_cancel);
  return true;
}

void scheduler::complete_group(group g, worker* from) noexcept {
  if (from != nullptr) from->trace_group_completed(g);
  task* cont = m_groups.complete(g);
  if (cont == nullptr) return;
  // Counted as spawned by when_done already, by the worker that registered it.
  if (from == nullptr) {
    route(cont, nullptr);
  } else {
    push(*choose_pool(cont, from), cont, from, false, false);
  }
}

// ---- quiescence and epochs --------------------------------------------------------------------

void scheduler::wait_idle() {
  if (on_own_worker()) {
    throw std::logic_error(
        "tessera: wait_idle() called from one of its own workers (a task would wait for itself; "
        "put the work in a group and use context::when_done)");
  }
  if (quiescent()) return;
  // Sleep until a worker going idle finds the runtime quiescent (notify_if_idle); polling with
  // sleeps doubling up to 1 ms would return up to ~1 ms late.
  // acq_rel: the other side of notify_if_idle's read-modify-write (what the workers that went
  // idle before published is visible to the check below).
  m_idle_waiters.fetch_add(1, std::memory_order_acq_rel);
  for (;;) {
    // acquire, read before the check: a notification after the check changes the word, and the
    // futex wait below then returns at once; one before it is seen with what its worker saw.
    const std::uint32_t seq = m_idle_seq.load(std::memory_order_acquire);
    if (quiescent()) break;
    // The timeout is a safety net only (test_hooks::idle_wait_timeout_ns lets a test rule it out).
    std::uint64_t timeout_ns = 50'000'000;
#if defined(TESSERA_DEBUG_CHECKS)
    if (const std::uint64_t t = test_hooks::idle_wait_timeout_ns.load(std::memory_order_relaxed)) {
      timeout_ns = t;
    }
#endif
    futex_wait_for(m_idle_seq, seq, timeout_ns);
  }
  m_idle_waiters.fetch_sub(1, std::memory_order_relaxed);
}

void scheduler::notify_idle_waiters() noexcept {
  if (!quiescent()) return;
  m_idle_seq.fetch_add(1, std::memory_order_release);
  futex_wake(m_idle_seq, futex_wake_all);
}

// ---- resources ---------------------------------------------------------------------------------

namespace {
/// Hints with a value outside their enum or a read ratio outside 0..1 (NaN too): the primitive
/// would be chosen from nonsense, and one outside the enum ran with no synchronization at all.
void check_hints(const resource_hints& h) {
  if (static_cast<unsigned>(h.isolation) > static_cast<unsigned>(isolation::none))
    throw std::invalid_argument("tessera: resource_hints.isolation is not an isolation value");
  if (static_cast<unsigned>(h.frequency) > static_cast<unsigned>(frequency::high))
    throw std::invalid_argument("tessera: resource_hints.frequency is not a frequency value");
  if (static_cast<unsigned>(h.primitive) > static_cast<unsigned>(primitive::scheduling))
    throw std::invalid_argument("tessera: resource_hints.primitive is not a primitive value");
  if (!(h.read_ratio >= 0.0 && h.read_ratio <= 1.0))
    throw std::invalid_argument(
        "tessera: resource_hints.read_ratio must be within 0.0 .. 1.0, got " +
        std::to_string(h.read_ratio));
}
}  // namespace

resource_header* scheduler::allocate_resource(std::size_t bytes, const resource_hints& hints) {
  check_hints(hints);
  resource_header* h = allocate_resource_memory(bytes, m_options.resources);
  h->prim = select_primitive(hints);
  h->applied = select_primitive(hints, worker_count());
  h->weight = weight_of(hints.frequency);
  h->object_size = static_cast<std::uint32_t>(bytes);
  // Place it: two random candidate pools (non-home ones when there are any), the lighter wins.
  const unsigned ppw = m_options.pools_per_worker;
  auto pick = [&]() -> unsigned {
    const unsigned n = pool_count();
    if (ppw == 1) return static_cast<unsigned>(next_random() % n);
    const unsigned w = static_cast<unsigned>(next_random() % m_workers.size());
    return w * ppw + 1 + static_cast<unsigned>(next_random() % (ppw - 1));
  };
  unsigned a = pick();
  unsigned b = pick();
  if (m_pools[b]->weight.load(std::memory_order_relaxed) <
      m_pools[a]->weight.load(std::memory_order_relaxed)) {
    a = b;
  }
  m_pools[a]->weight.fetch_add(h->weight, std::memory_order_relaxed);
  h->pool.store(a, std::memory_order_relaxed);
  return h;
}

void scheduler::retire(resource_header* h) {
  // A pointer make_resource did not return is refused here: stop() would free it (free():
  // invalid pointer). The header's mark says whether it is one (a freed resource's is cleared too).
  if (!is_live_resource(object_of(h)))
    throw std::invalid_argument(
        "tessera: retire_resource of memory that make_resource did not return (or freed already)");
  if (h->retired.exchange(true, std::memory_order_relaxed))
    throw std::logic_error("tessera: retire_resource of a resource that was retired already");
  {
    const unsigned p = h->pool.load(std::memory_order_relaxed);
    m_pools[p]->weight.fetch_sub(h->weight, std::memory_order_relaxed);
  }
  worker* w = current_worker();
  if (w != nullptr && w->owner() == this) {
    w->retire(h);
    return;
  }
  retire_for_workers(h);
}

void scheduler::retire_for_workers(resource_header* h) {
  if (!m_retired.put(h)) free_resource(h);  // the runtime stopped: no task can read it any more
}

void scheduler::move(resource_header* h, worker_id w) {
  // The checks retire() makes (unchecked, moving nullptr, foreign memory or a retired resource
  // is a crash, a write into the user's memory, or a pool weight counted twice).
  if (h == nullptr) throw std::invalid_argument("tessera: move_resource(nullptr)");
  if (!is_live_resource(object_of(h)))
    throw std::invalid_argument(
        "tessera: move_resource of memory that make_resource did not return (or freed already)");
  if (h->retired.load(std::memory_order_relaxed))
    throw std::logic_error("tessera: move_resource of a retired resource");
  if (w.value >= m_workers.size())
    throw std::out_of_range("tessera: move_resource to an unknown worker");
  // The move takes effect at once: a task on the resource spawned from now on goes to the new
  // pool and runs there, beside the one still running here. So a task on the resource may not
  // move it: its next writer could start there while this one still runs here.
  if (on_own_worker()) {
    const task* running = current_worker()->current_task();
    if (running != nullptr && hdr(running).m_data == h->object()) {
      throw std::logic_error(
          "tessera: move_resource from a task running on that resource (move it before tasks "
          "name it, or from a task on another resource, once none of its tasks is queued)");
    }
  }
  const unsigned ppw = m_options.pools_per_worker;
  unsigned best = w.value * ppw + (ppw > 1 ? 1 : 0);
  for (unsigned j = 1; j < ppw; ++j) {
    const unsigned i = w.value * ppw + j;
    if (m_pools[i]->weight.load(std::memory_order_relaxed) <
        m_pools[best]->weight.load(std::memory_order_relaxed)) {
      best = i;
    }
  }
  const unsigned old = h->pool.load(std::memory_order_relaxed);
  m_pools[old]->weight.fetch_sub(h->weight, std::memory_order_relaxed);
  m_pools[best]->weight.fetch_add(h->weight, std::memory_order_relaxed);
  h->pool.store(best, std::memory_order_relaxed);
}

// ---- workers -----------------------------------------------------------------------------------

void scheduler::set_active_workers(unsigned n) {
  if (n == 0 || n > m_workers.size()) {
    throw std::invalid_argument("tessera: set_active_workers(" + std::to_string(n) +
                                "): must be between 1 and " + std::to_string(m_workers.size()));
  }
  lock hold(m_resize_mutex);
  m_active.store(n, std::memory_order_release);
  for (unsigned i = 0; i < m_workers.size(); ++i) m_workers[i]->set_active(i < n);
}

int scheduler::choose_victim(unsigned thief) const noexcept {
  const unsigned n = static_cast<unsigned>(m_workers.size());
  return detail::choose_victim(
      thief, n, static_cast<unsigned>(next_random() % n),
      [this](unsigned i) { return m_workers[i]->queued_published(); },
      [this](unsigned i) { return m_workers[i]->steal_requested_by() != no_thief; });
}

runtime_statistics scheduler::statistics() const {
  runtime_statistics s;
  for (auto& w : m_workers) s.workers.push_back(w->statistics());
  s.spawned_external = m_epochs.external_spawned();
  return s;
}

void scheduler::stop() {
  // A task cannot wait for its own runtime to drain (it is one of the tasks). An error, as for
  // wait() and wait_idle(), not an abort of the process.
  if (on_own_worker())
    throw std::logic_error("tessera: runtime::stop() called from one of its own tasks");
  lock hold(m_stop_mutex);
  if (m_stopped) return;
  // seq_cst: see spawn(), and worker::maybe_reclaim: a reclamation task spawned from here on is
  // either counted before wait_idle() reads the counts (seq_cst, in quiescent()), or not
  // spawned at all.
  m_stopping.store(true, std::memory_order_seq_cst);
  // seq_cst, not acquire: the store above and this load are one side of a store-buffering pair
  // (spawn's increment, then its load of m_stopping, the other). With an acquire load both sides
  // could read the old values (allowed by the model, seen on POWER and on ARM with RCpc loads):
  // the spawn goes on, stop() misses it, and its task is pushed after the workers exited.
  while (m_external_in_flight.load(std::memory_order_seq_cst) != 0) std::this_thread::yield();
  // Drain: every task spawned so far, and every task those spawn, runs. Resizing to all workers
  // first makes sure no pool is parked with an inactive worker.
  set_active_workers(static_cast<unsigned>(m_workers.size()));
  wait_idle();
  for (auto& w : m_workers) w->notify(worker::attention_exit);
  for (auto& w : m_workers) w->join();
  if (m_trace != nullptr) {  // the joins order the workers' rings before these reads
    std::vector<unsigned> cpus;
    for (auto& w : m_workers) cpus.push_back(w->cpu());
    m_trace->finish(cpus);
  }
  // A resource's destructor may retire others: from here (not a worker) they join
  // m_retired_external, freed below, outside the lock, until none is left.
  for (auto& w : m_workers) w->reclaim_all();
  for (;;) {
    const std::vector<resource_header*> left = m_retired.take_or_close();
    if (left.empty()) break;  // closed: from now on retire() frees at once
    for (auto* h : left) free_resource(h);
  }
  m_stopped = true;
}

}  // namespace tessera::detail
