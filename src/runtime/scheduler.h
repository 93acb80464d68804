// src/runtime/scheduler.h — the runtime's internals: workers, pools, routing, groups, epochs.
//
// Routing ([MxTasks] Fig. 5, lines 1-7), in this order:
//   1. the task annotates a resource serialized by scheduling (primitive `scheduling`, or
//      `optimistic_scheduled` and the task writes) -> the resource's pool; serialization wins
//      over every placement annotation (for tasks spawned by workers this rule is applied
//      when the task is about to run, see choose_pool);
//   2. a worker target -> that worker's home pool;
//   3. a NUMA node target -> the home pool of a worker on that node (one at random);
//   4. spawned by a worker -> that worker's home pool (optimistic and latched readers stay local);
//   5. spawned from outside -> the home pool of an active worker, round-robin.
// A push into a pool the spawning worker owns is a plain list append; anything else is one
// atomic exchange into the pool's inbox, followed by a wake-up of its owner if that one sleeps.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <latch>
#include <memory>
#include <vector>

#include "memory/reclamation.h"
#include "memory/resource_memory.h"
#include "memory/task_allocator.h"
#include "memory/epoch.h"
#include "groups/group_registry.h"
#include "runtime/pool.h"
#include "runtime/task_lifetime.h"
#include "runtime/test_hooks.h"
#include "runtime/worker.h"
#include "tessera/runtime.h"
#include "trace/trace_session.h"
#include "util/compiler.h"
#include "util/mutex.h"

namespace tessera::detail {

/// True if primitive `p` (a resource's applied one) serializes `t`, a task on that resource, by
/// the resource's pool: serialized_by_pool with the header already read.
/// Branch-free (the compares combined bitwise): under an automatic choice a worker's consecutive
/// tasks name objects of different primitives in a data-dependent order, and a branch on the
/// primitive (worker::execute_on_resource, worker::finish) would be mispredicted as often.
inline bool serializes(primitive p, const task* t) noexcept {
  return static_cast<bool>(static_cast<unsigned>(p == primitive::scheduling) |
                           (static_cast<unsigned>(p == primitive::optimistic_scheduled) &
                            static_cast<unsigned>(t->mode() == access::write)));
}

/// True if `t` must run in its resource's pool (primitive `scheduling`, or a writer under
/// `optimistic_scheduled`): routing rule 1, and never handed out on its own by stealing.
/// Reads the resource's header.
inline bool serialized_by_pool(const task* t) noexcept {
  if (!t->has_resource()) return false;
  return serializes(resource_header::of(t->data())->applied, t);
}

/// True if `t` reads a resource under `optimistic_scheduled` whose pool is `pool_index`: there it
/// runs beside no writer (worker::answer_steal_request keeps it). Reads the resource's header.
inline bool scheduled_reader_of(const task* t, std::uint32_t pool_index) noexcept {
  if (!t->has_resource()) return false;
  const resource_header& h = *resource_header::of(t->data());
  return h.applied == primitive::optimistic_scheduled && t->mode() != access::write &&
         h.pool.load(std::memory_order_relaxed) == pool_index;
}

/// The worker the calling thread is (any runtime), or nullptr.
worker* current_worker() noexcept;

class scheduler {
 public:
  scheduler(runtime& rt, const runtime_options& options);
  ~scheduler();  // NOLINT(bugprone-exception-escape): see scheduler.cpp

  void stop();
  bool running() const noexcept { return !m_stopping.load(std::memory_order_acquire); }

  /// Routes a task. `from` is the calling worker (nullptr from outside).
  /// `newest_first`: a fresh spawn without a data annotation, queued at the front of the
  /// spawner's own pool (depth-first, cache-warm: fork-join recursions stay small), or pushed
  /// onto the worker's work-first stack, which stands for that front (worker::push_next).
  /// Follow-ups and annotated tasks queue at the back, so the prefetch window sees many
  /// different tasks and a task that returns itself cannot starve the others.
  /// `header_hot`: the caller just ran a task on t's resource (a follow-up on the same object),
  /// so its header is in cache and rule 1 is applied now instead of when t is about to run.
  TESSERA_ALWAYS_INLINE void route(task* t, worker* from, bool newest_first = false,
                                   bool header_hot = false) {
    // Fast path of rule 4 and push, inline: spawned by the worker holding its home pool (rule 1
    // is applied lazily for those, see choose_pool), no target or this worker (the common case
    // of fork-join and of every step of a traversal).
    if (from != nullptr && !header_hot && stays_home(t, *from)) [[likely]] {
      push_home(t, *from, newest_first, hdr(t).m_priority);
      return;
    }
    route_slow(t, from, newest_first, header_hot);
  }
  /// Rule 4's fast case: `t` has no target or targets `from`, and `from` holds its home pool.
  TESSERA_ALWAYS_INLINE static bool stays_home(const task* t, const worker& from) noexcept {
    return (hdr(t).m_target_kind == task_header::target_none ||
            (hdr(t).m_target_kind == task_header::target_worker && hdr(t).m_target == from.index())) &&
           from.holds_home();
  }
  TESSERA_ALWAYS_INLINE static void push_home(task* t, worker& from, bool newest_first,
                                              std::uint8_t priority) noexcept {
    if (newest_first) {
      from.push_next(t, priority);
    } else {
      from.push_local(*from.home(), t, false);
    }
    from.note_spawned_home();
  }
  /// Public spawn entry: checks, counts, groups. Inline: a task spawning a task is the hot path.
  TESSERA_ALWAYS_INLINE void spawn(task* t, worker* from) {
    if (from == nullptr) {
      spawn_external(t);
      return;
    }
    spawn_from(t, *from);
  }
  /// spawn() from a worker of this scheduler (context::spawn): the scheduler is reached through
  /// the worker on the slow paths only.
  TESSERA_ALWAYS_INLINE static void spawn_from(task* t, worker& from) {
    require_spawnable(t, "spawn");
#if defined(TESSERA_DEBUG_CHECKS)
    if (from.reading_unvalidated()) [[unlikely]] refuse_unvalidated(t);
#endif
    const task* parent = from.current_task();
    if (parent == nullptr) [[unlikely]] {
      from.sched().spawn_outside_task(t, from);
      return;
    }
    // From a task: inherit the operation's epoch slot and, without a group of its own, the
    // group. A spawn into the running task's own group is counted in the worker's batch (no
    // atomic RMW); a spawn into another group joins it at once (the batch's soundness needs a
    // running task of the group on this worker, see docs/architecture.md "Group counts").
    // The first such spawn of a task that stays on this worker takes over the task's own count
    // instead (worker::take_token).
    // t's fields are read into locals before the first store: the one-byte stores below may
    // alias anything, so fields read after them would be loaded again, and what the compiler
    // knows of them from make_task (no data, no target, normal priority) would not fold.
    const bool no_data = hdr(t).m_data == nullptr;
    const bool home = stays_home(t, from);
    const std::uint8_t priority = hdr(t).m_priority;
    const group own = hdr(t).m_group;
    const std::uint8_t slot = hdr(parent).m_epoch_slot;
    hdr(t).m_epoch_slot = slot;
    if (!own.valid() || own == hdr(parent).m_group) {
      const group g = hdr(parent).m_group;
      hdr(t).m_group = g;
      // The parent's count passes to t, which stays in this worker's own pool or stack: it
      // cannot run, leave or complete before the parent returns, so the group stays open while
      // the parent runs. Nothing to count.
      if (from.holds_token() && home) {
        from.take_token();
        push_home(t, from, no_data, priority);
        return;
      }
      if (g.valid()) from.group_add(g, +1, slot);
    } else {
      spawn_into_other_group(t, from, no_data, home);
      return;
    }
    from.counters().count_spawn(slot);
    if (home) {
      push_home(t, from, no_data, priority);
    } else {
      from.sched().route_slow(t, &from, no_data, false);
    }
  }

  /// context::spawn(span): spawn_from() for each of ts[0..n), in order. The common case, a task
  /// with data that stays in this worker's home pool in the running task's group, is counted in
  /// the group and the epoch slot once for all such tasks and queued as a chain (one append per
  /// priority run); any other task flushes the chain and takes spawn_from(). The counts are
  /// added after the tasks are queued: the running task holds its group's and slot's count until
  /// it returns, and nothing in this worker's own queue leaves it before then (a steal is
  /// answered by this worker, between tasks), so no count can reach zero early. With debug
  /// checks the caller has checked every task (require_spawnable, and no task twice).
  static void spawn_many_from(task* const* ts, std::size_t n, worker& from) {
#if defined(TESSERA_DEBUG_CHECKS)
    if (n != 0 && from.reading_unvalidated()) [[unlikely]] refuse_unvalidated(ts, n);
#endif
    const task* parent = from.current_task();
    if (parent == nullptr) [[unlikely]] {
      for (std::size_t i = 0; i < n; ++i) from.sched().spawn_outside_task(ts[i], from);
      return;
    }
    const std::uint8_t slot = hdr(parent).m_epoch_slot;
    const group g = hdr(parent).m_group;
    const bool holds_home = from.holds_home();
    bool token = from.holds_token();
    std::uint32_t queued = 0;     // queued here by this loop
    std::uint32_t took_token = 0;  // 1 if one of them took the running task's count
    task* first = nullptr;
    task* last = nullptr;
    std::uint32_t chained = 0;
    std::uint8_t chain_priority = 0;
    const auto flush = [&] {
      if (chained == 0) return;
      from.push_home_chain(first, last, chained, chain_priority);
      chained = 0;
    };
    for (std::size_t i = 0; i < n; ++i) {
      task* const t = ts[i];
      const task_header& h = hdr(t);
      const group own = h.m_group;
      const std::uint8_t priority = h.m_priority;
      const bool home = h.m_target_kind == task_header::target_none ||
                        (h.m_target_kind == task_header::target_worker &&
                         h.m_target == from.index());
      if (h.m_data == nullptr || !home || !holds_home || (own.valid() && own != g)) [[unlikely]] {
        flush();
        spawn_from(t, from);
        token = from.holds_token();
        continue;
      }
      hdr(t).m_epoch_slot = slot;
      hdr(t).m_group = g;
      if (token) [[unlikely]] {
        token = false;
        took_token = 1;
        from.take_token();  // the running task's count passes to t (see spawn_from)
      }
      if (chained != 0 && priority != chain_priority) [[unlikely]] flush();
      if (chained == 0) {
        first = t;
        chain_priority = priority;
      } else {
        hdr(last).m_next.store(t, std::memory_order_relaxed);
      }
      last = t;
      ++chained;
      ++queued;
    }
    flush();
    if (const std::uint32_t counted = queued - took_token; counted != 0) {
      if (g.valid()) from.group_add(g, static_cast<int>(counted), slot);
      from.counters().count_spawns(slot, counted);
    }
    if (queued != 0) from.note_spawned_home(queued);
  }

#if defined(TESSERA_DEBUG_CHECKS)
  /// With TESSERA_DEBUG_CHECKS: throws std::logic_error, naming `what`, if `t` is annotated with
  /// a resource that make_resource did not make (or that was freed).
  static void require_resource(const task* t, const char* what) {
    if (t->has_resource() && !is_live_resource(t->data())) [[unlikely]] not_a_resource(what);
  }

  /// With TESSERA_DEBUG_CHECKS: `t` was made by make_task and not spawned yet (its epoch slot is
  /// still task_header::unspawned_slot). The one test behind require_unspawned and runtime::discard.
  static bool unspawned(const task* t) noexcept { return hdr(t).m_epoch_slot == task_header::unspawned_slot; }
#endif

  /// From a running task on `from`: spawns `t` in no group (not the running task's), in the
  /// running task's epoch slot, placed by its annotations; to the front of the home pool if it
  /// stays on `from`. For a task-form loop's helpers (detail/claimed_loop.h), which the loop's
  /// group must not wait for.
  static void spawn_ungrouped(task* t, worker& from);
  /// For a task-form loop: joins `g` once (the loop's hold on it) if it is valid, after checking
  /// that it is current; throws std::logic_error if it is not.
  void hold_group(group g);

  // groups
  group make_group() { return m_groups.open(); }
  group_registry& groups() noexcept { return m_groups; }
  void wait(group g);
  void when_done(group g, task* continuation, worker& from);
  /// The calling thread is one of this runtime's workers (it must not block on this runtime).
  bool on_own_worker() const noexcept;
  void leave_group(group g, worker* from) noexcept;
  /// `g`'s count reached zero (the caller's leave or batch flush brought it there): wakes its
  /// waiter or routes its continuation (`from`: the calling worker, or nullptr).
  void complete_group(group g, worker* from) noexcept;
  void record_exception(group g, std::exception_ptr e) {
    m_groups.record_exception(g, std::move(e));
  }
  void detach(group g);
  /// runtime::cancel. Marks g cancelled under its mutex and asks every worker to look
  /// (attention_cancel): from then on a worker drops each task of g it takes before running it.
  bool cancel(group g);
  std::uint32_t cancellations() const noexcept { return m_groups.cancellations(); }
  bool cancelled(group g) noexcept { return m_groups.cancelled(g); }
  const std::atomic<bool>* cancel_flag(group g) noexcept { return m_groups.cancel_flag(g); }
  void wait_idle();
  bool quiescent() const noexcept { return m_epochs.quiescent(); }
  /// Called by a worker going idle, after it published its epoch counts: wakes wait_idle()'s
  /// waiters if the runtime is quiescent. Without waiters: one read-modify-write.
  void notify_if_idle() noexcept {
    // Every worker going idle and every waiter registering does a read-modify-write of this one
    // word (acq_rel), so they are ordered in its modification order, and each one acquires what
    // the ones before it published. A waiter that registers after us sees our counts; if it
    // registered before, we see it and check. And the last worker to go idle sees every other
    // worker's counts, so one of us finds the runtime quiescent. (No fences: ThreadSanitizer
    // does not model them.)
    if (m_idle_waiters.fetch_add(0, std::memory_order_acq_rel) != 0) notify_idle_waiters();
  }
  std::vector<std::exception_ptr> take_unhandled() { return m_groups.take_unhandled(); }

  // resources and reclamation
  resource_header* allocate_resource(std::size_t bytes, const resource_hints& hints);
  void retire(resource_header* h);
  /// Resources retired by threads that are not workers of this runtime, for a worker to put on
  /// its own retired list (worker::maybe_reclaim), so that they are reclaimed while the runtime
  /// runs. Call it when has_external_retired().
  std::vector<resource_header*> take_external_retired() { return m_retired.take(); }
  /// Puts `h` where the active workers take it from (take_external_retired): for a thread that
  /// is not one of the workers, and for a worker being deactivated, which reclaims nothing
  /// while inactive. Frees it at once once stop() freed the rest.
  void retire_for_workers(resource_header* h);
  bool has_external_retired() const noexcept { return m_retired.maybe_nonempty(); }
  void move(resource_header* h, worker_id w);
  std::uint64_t global_epoch() const noexcept { return m_epochs.global(); }
  /// The epoch slot of an operation that starts now (a task spawned from outside any task).
  std::uint8_t current_epoch_slot() const noexcept { return m_epochs.current_slot(); }
  /// Advances the global epoch if the slot it would reuse is drained. Any worker may call it.
  void try_advance_epoch(std::uint64_t now /* now_ns() */) noexcept {
    m_epochs.try_advance(now, epoch_period_ns());
  }
  epoch_clock& epochs() noexcept { return m_epochs; }
  /// stop() began. seq_cst: one side of the Dekker pair with the reclamation task's spawn
  /// (worker::maybe_reclaim); stop() stores it, then reads the counts (quiescent()).
  bool stopping() const noexcept { return m_stopping.load(std::memory_order_seq_cst); }
  std::uint64_t epoch_period_ns() const noexcept {
    return static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(m_options.epoch_period).count());
  }

  // workers
  runtime& rt() noexcept { return m_runtime; }
  const runtime_options& options() const noexcept { return m_options; }
  unsigned worker_count() const noexcept { return static_cast<unsigned>(m_workers.size()); }
  worker& worker_at(unsigned i) noexcept { return *m_workers[i]; }
  const worker& worker_at(unsigned i) const noexcept { return *m_workers[i]; }
  pool& pool_at(unsigned i) noexcept { return *m_pools[i]; }
  const std::vector<std::unique_ptr<pool>>& pools() const noexcept { return m_pools; }
  unsigned pool_count() const noexcept { return static_cast<unsigned>(m_pools.size()); }
  unsigned active_workers() const noexcept { return m_active.load(std::memory_order_acquire); }
  /// How long an idle worker spins before it parks: options().spin_before_park, or none while
  /// more workers are active than they have CPUs (a spinner would hold a CPU that a worker with
  /// work waits for; it parks after idle()'s quick poll).
  std::uint64_t spin_before_park_ns() const noexcept {
    return active_workers() > m_cpu_count ? 0 : m_spin_ns;
  }
  void set_active_workers(unsigned n);
  unsigned prefetch_distance() const noexcept {
    return m_prefetch_distance.load(std::memory_order_relaxed);
  }
  void set_prefetch_distance(unsigned d) noexcept {
    m_prefetch_distance.store(d, std::memory_order_relaxed);
  }
  bool pinned() const noexcept { return m_pinned.load(std::memory_order_relaxed); }
  /// Called by each worker once it tried to pin itself (the constructor waits for all of them).
  void worker_started() noexcept { m_starting->count_down(); }
  void report_pin_failure(const std::string& why);
  runtime_statistics statistics() const;
  std::uint64_t now_ns() const noexcept;

  /// Pushes first..last (linked through m_next, all of `priority`) into p's inbox and tells the
  /// worker that owns p now, not the one a caller looked at before: mail, and a wake-up if it
  /// is parked. Every push into an inbox goes through here.
  void push_inbox(pool& p, unsigned priority, task* first, task* last) noexcept;
  /// Picks the worker an idle thief should ask (the one with most queued tasks that no other
  /// thief has asked yet), or -1. Out of line: only idle workers call it, and inlined, its size
  /// moved the workers' hot loop (the 1-worker tree: 9.5 -> 10.1 ns from the layout alone).
  [[gnu::noinline]] int choose_victim(unsigned thief) const noexcept;
  /// Active workers asleep in park() right now (or about to be). seq_cst: read by periodic()
  /// after its seq_cst store of its queue length; a worker that parks just after it was read
  /// sees that length and asks for work itself (worker::park).
  unsigned parked_workers() const noexcept { return m_parked.load(std::memory_order_seq_cst); }
  /// An active worker is about to park (seq_cst: before its last look for work, see worker::park).
  void count_parked() noexcept { m_parked.fetch_add(1, std::memory_order_seq_cst); }
  /// It did not park, or woke. Relaxed: a peer that still counts it only tries a wake-up that
  /// finds no sleeper.
  void count_unparked() noexcept { m_parked.fetch_sub(1, std::memory_order_relaxed); }
  /// Workers marked blind right now: parked (or about to park) without having seen a peer with
  /// more than one queued task (worker::park), or told "nothing here" by a victim with fewer
  /// than two (worker::answer_steal_request). A busy worker with more than one queued that sees
  /// a mark claims one and wakes that worker, despite its once-per-millisecond limit
  /// (worker::wake_a_peer): each mark is one wake-up, of the worker that needs it. seq_cst:
  /// Dekker with periodic()'s store of its queue length, see worker::park.
  std::uint32_t blind_workers() const noexcept { return m_blind.count(); }
  /// Marks `w` blind (no effect if it is already). Any thread.
  void mark_blind(worker& w) noexcept { m_blind.mark(w.mailbox()); }
  /// Clears `w`'s mark; true if this call cleared it (then the caller owns that mark's wake-up).
  bool clear_blind(worker& w) noexcept { return m_blind.clear(w.mailbox()); }
  /// Claims the mark of a worker other than `except` and wakes it; repeats while the claimed
  /// worker was awake already (its mark was stale). True if a worker was woken.
  bool wake_a_blind_worker(unsigned except) noexcept;
  /// Wakes one active parked worker other than `except`; false if none was asleep.
  bool wake_a_parked_worker(unsigned except) noexcept;

 /// Queues `t` in pool `p`: a plain append if `from` (the calling worker, or nullptr) holds p,
  /// else an inbox push that tells p's owner. `spawn`: t is being spawned (counted as a remote
  /// spawn of `from` if p is not its own); false for a task passed on (a serialized task forwarded
  /// to its resource's pool, a continuation), whose spawn was counted where it happened.
  void push(pool& p, task* t, worker* from, bool newest_first = false, bool spawn = true) noexcept;

 private:
  void spawn_external(task* t);
 public:
  /// With TESSERA_DEBUG_CHECKS: throws std::logic_error, naming `what` (spawn, follow-up,
  /// when_done), unless `t` was made by make_task and not spawned yet. Without, nothing (it
  /// compiles to no code). The caller still owns `t` after the throw: not the runtime's.
  TESSERA_ALWAYS_INLINE static void require_unspawned(const task* t, const char* what) {
#if defined(TESSERA_DEBUG_CHECKS)
    if (t == nullptr) [[unlikely]]
      null_task(what);
    if (!unspawned(t)) [[unlikely]]
      handed_over_twice(what);
#else
    (void)t;
    (void)what;
#endif
  }
  /// require_unspawned, then (with TESSERA_DEBUG_CHECKS) require_resource: what a spawn and
  /// when_done check before anything changes. worker::finish makes the two checks apart (a
  /// follow-up with a bad resource is the runtime's to free, one handed over twice is not).
  TESSERA_ALWAYS_INLINE static void require_spawnable(const task* t, const char* what) {
    require_unspawned(t, what);
#if defined(TESSERA_DEBUG_CHECKS)
    require_resource(t, what);
#endif
  }
 private:
  [[noreturn]] static void handed_over_twice(const char* what);
  [[noreturn]] static void not_a_resource(const char* what);
  /// Throws std::invalid_argument: `what` (spawn, follow-up...) of nullptr.
  [[noreturn]] static void null_task(const char* what);

  /// spawn_from() on a worker thread with no task running (a task's destructor, say): like a
  /// spawn from outside, the task starts an operation of the current epoch.
  void spawn_outside_task(task* t, worker& from);
  /// spawn_from()'s case of a task given a group other than its parent's (out of line: rare).
  static void spawn_into_other_group(task* t, worker& from, bool newest_first, bool home);
#if defined(TESSERA_DEBUG_CHECKS)
  /// Frees `t`, spawned into a stale or completed group, and throws std::logic_error.
  [[noreturn]] static void refuse_stale_group(task* t);

 public:
  /// Throws std::logic_error if the task running on `from` is an optimistic reader that has not
  /// validated: `what` (a spawn, when_done, a loop) would be done again by the rerun of a torn
  /// read. context.h, validate().
  static void require_validated(const worker& from, const char* what) {
    if (from.reading_unvalidated()) [[unlikely]] acted_unvalidated(what);
  }

 private:
  [[noreturn]] static void acted_unvalidated(const char* what);
  /// Frees `t` and throws as require_validated.
  [[noreturn]] static void refuse_unvalidated(task* t);
  /// Frees ts[0..n) and throws as require_validated.
  [[noreturn]] static void refuse_unvalidated(task* const* ts, std::size_t n);
#endif
  void route_slow(task* t, worker* from, bool newest_first, bool header_hot);
  pool* choose_pool(task* t, worker* from, bool header_hot = false) noexcept;
  void notify_idle_waiters() noexcept;

  runtime& m_runtime;
  runtime_options m_options;
  std::vector<std::unique_ptr<pool>> m_pools;
  std::vector<std::unique_ptr<worker>> m_workers;
  std::vector<std::vector<unsigned>> m_workers_of_node;
  group_registry m_groups;

  std::atomic<bool> m_stopping{false};
  std::atomic<std::uint32_t> m_external_in_flight{0};  ///< spawns from outside being routed
  bool m_stopped GUARDED_BY(m_stop_mutex) = false;
  mutex m_stop_mutex;
  std::atomic<unsigned> m_active{0};
  unsigned m_cpu_count = 1;     ///< distinct CPUs of the workers (at most the process's CPUs)
  std::uint64_t m_spin_ns = 0;  ///< options().spin_before_park
  mutex m_resize_mutex;  ///< one set_active_workers at a time
  std::atomic<unsigned> m_prefetch_distance{0};
  std::atomic<bool> m_pinned{true};  ///< options().pin, until a worker's pin is refused
  std::latch* m_starting = nullptr;  ///< during the constructor: workers yet to try their pin
  std::atomic<bool> m_pin_reported{false};
  /// See parked_workers(). Its own line: it changes on every park, and the members above are
  /// read by busy workers.
  alignas(64) std::atomic<unsigned> m_parked{0};
  blind_marks m_blind;  ///< see blind_workers(); changes with m_parked

  epoch_clock m_epochs;

  /// Threads in wait_idle() (read by every worker going idle; changes only when a wait starts or
  /// ends) and the futex word they sleep on (bumped by notify_idle_waiters).
  alignas(64) std::atomic<std::uint32_t> m_idle_waiters{0};
  std::atomic<std::uint32_t> m_idle_seq{0};

  retire_inbox m_retired;  // retired by threads that are not workers, until a worker adopts them

  std::chrono::steady_clock::time_point m_start;
  /// The workers' trace rings while tracing is on (trace/trace_session.h); nullptr when off.
  std::unique_ptr<trace_session> m_trace;

};

}  // namespace tessera::detail
