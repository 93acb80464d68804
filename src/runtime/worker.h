// src/runtime/worker.h — one pinned thread that runs the tasks of the pools it owns.
//
// The loop (docs/architecture.md has the picture):
//   1. attention word set by others? handle it: adopt handed-over pools, answer a steal request,
//      deactivate, shut down;
//   2. the top of the work-first stack (fresh spawns and follow-ups without data) runs first; else
//      refill the prefetch window from the owned pools (highest priority first, round-robin
//      over pools, at most `pool_batch` tasks from one pool in a row) — each task entering the
//      window gets its data prefetched, and the descriptor after it too;
//   3. run the window's oldest task, under its resource's primitive if it has one
//      (sync/guarded_execution.h); route its follow-up, count its completion (groups/);
//   4. no task: publish epoch counters, spin a while (draining inboxes, asking to steal), park.
//
// Where the parts are: the loop, picking and running tasks in worker.cpp; idling and parking in
// worker_idle.cpp; asking for and answering steals, and pools changing hands, in
// steal/worker_stealing.cpp; the retired list and the reclamation task in
// memory/worker_reclamation.cpp.
//
// Everything here is touched only by the worker's own thread except the members in the
// "shared" block, whose contracts are stated where they are declared.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string_view>
#include <thread>
#include <typeinfo>
#include <vector>

#include "groups/group_batch.h"
#include "memory/epoch.h"
#include "memory/reclamation.h"
#include "runtime/context_access.h"
#include "runtime/pool.h"
#include "steal/stealing.h"
#include "sync/guarded_execution.h"
#include "tessera/context.h"
#include "tessera/detail/resource_header.h"
#include "tessera/statistics.h"
#include "tessera/detail/task_access.h"
#include "tessera/idle_hook.h"
#include "tessera/task.h"
#include "trace/trace_buffer.h"
#include "util/compiler.h"
#include "util/mutex.h"
#include "util/owner_counter.h"

namespace tessera::detail {

class scheduler;

/// Counters written only by their worker (relaxed store) and read by anyone (relaxed load).
struct worker_counters {
  std::atomic<std::uint64_t> spawned_remote{0};
  std::atomic<std::uint64_t> prefetches{0};
  std::atomic<std::uint64_t> pools_stolen{0};
  std::atomic<std::uint64_t> tasks_stolen{0};
  std::atomic<std::uint64_t> exceptions{0};
  std::atomic<std::uint64_t> peers_woken{0};
  std::atomic<std::uint64_t> steal_walk_steps{0};
  std::atomic<std::uint64_t> steal_requests{0};
  std::atomic<std::uint64_t> steal_answers_empty{0};
  // flushed batches (pseudo-tasks in the epoch counts)
  std::atomic<std::uint64_t> group_batches{0};
  // the runtime's reclamation tasks, spawned here and run here (not the user's: subtracted)
  std::atomic<std::uint64_t> reclaims_spawned{0};
  std::atomic<std::uint64_t> reclaims_run{0};
  std::atomic<std::uint64_t> idle_ns{0};
  std::atomic<std::uint64_t> parked_ns{0};
  std::atomic<std::uint64_t> cancelled{0};  // dropped: counted as completions, not executions
  std::atomic<std::uint64_t> step_probes{0};   // choose_step_mode's probes, second runs included
  std::atomic<std::uint64_t> step_changes{0};  // the changes it took (a probe won twice)
  std::atomic<std::uint32_t> distance{0};      // m_distance, for statistics()
};

class worker {
 public:
  /// A reclamation task ran here (the runtime's own: left out of the statistics).
  void count_reclaim_run() noexcept { bump(m_stats.reclaims_run); }
  enum attention_bits : std::uint32_t {
    attention_incoming = 1,  ///< pools were handed to us
    attention_steal = 2,     ///< a thief asked for work
    attention_active = 4,    ///< set_active_workers changed our state
    attention_exit = 8,      ///< the runtime stops (only when idle)
    attention_cancel = 16,   ///< a group was cancelled: take tasks through the checking loop
  };
  static constexpr unsigned pool_batch = 16;
  /// The prefetch window: a ring of a power of two > max_prefetch_distance entries (masked).
  static constexpr unsigned window_slots = 32;
  static constexpr int no_thief = detail::no_thief;
  /// Follow-ups without data go onto the work-first stack at most this many times in a row, each
  /// returned by the follow-up held just before it (a task that keeps returning itself, or a new
  /// task, cannot starve the queue); the next one goes to the back of the home pool.
  static constexpr unsigned slot_run_limit = 64;
  /// The one priority the work-first stack holds: every task on it is as urgent as any other,
  /// so its LIFO order never runs a task before a more urgent one (checked when popping).
  static constexpr std::uint8_t stack_priority = static_cast<std::uint8_t>(priority::normal);
  /// A busy worker wakes a parked peer to take its queued work at most this often (periodic()).
  static constexpr std::uint64_t peer_wake_interval_ns = 1'000'000;
  /// idle() polls the inboxes this many times (a pause between two) before it publishes its
  /// counts and reads the clock: about a microsecond.
  static constexpr unsigned quick_polls = 32;
  /// m_sleeping's values.
  static constexpr std::uint32_t asleep_awake = 0;
  static constexpr std::uint32_t asleep_futex = 1;
  static constexpr std::uint32_t asleep_hook = 2;
  /// periodic() reads the clock (to advance the epoch) at least every this many calls.
  static constexpr unsigned max_clock_every = 64;

  worker(scheduler& s, std::uint16_t index, unsigned cpu, unsigned node);
  worker(const worker&) = delete;
  worker& operator=(const worker&) = delete;
  ~worker();

  void start(pool* home, std::vector<pool*> pools);
  void join();

  std::uint16_t index() const noexcept { return m_index; }
  const scheduler* owner() const noexcept { return &m_sched; }
  scheduler& sched() noexcept { return m_sched; }
  /// A task spawned here went to a pool this worker does not hold.
  void count_remote_spawn() noexcept { bump(m_stats.spawned_remote); }
  /// This worker holds pool `p` (adopted it; the pool's `owner` may name it a little earlier).
  bool owns(const pool* p) const noexcept {
    return p->held_by.load(std::memory_order_relaxed) == m_index;
  }
  unsigned cpu() const noexcept { return m_cpu; }
  unsigned node() const noexcept { return m_node; }
  pool* home() const noexcept { return m_home; }
  /// The running task (its epoch slot is that of every task it spawns), also while its
  /// destructor runs; nullptr outside a run of tasks (periodic(), idle, attention). Between two
  /// tasks of a run it still names the last one: nothing spawns there (next() only moves tasks),
  /// and leaving it saves a store per task.
  task* current_task() const noexcept { return context_access::current(m_ctx); }
  /// This worker holds its home pool (owns(home()), kept as a flag: every spawn asks).
  bool holds_home() const noexcept { return m_holds_home; }
  context& ctx() noexcept { return m_ctx; }
  guarded_executor& guard() noexcept { return m_guard; }

  /// Called on this worker's thread: queue into a pool it owns (no atomic read-modify-write).
  TESSERA_ALWAYS_INLINE void push_local(pool& p, task* t, bool newest_first = false) noexcept {
    if (newest_first) {
      p.local[hdr(t).m_priority].push_front(t);
    } else {
      p.local[hdr(t).m_priority].push_back(t);
    }
    ++m_local_count[hdr(t).m_priority];
  }
  /// After a spawn that stays in this worker's pools: the second since the last periodic() (or
  /// idle()) publishes the queue for thieves and wakes a parked peer (offer_queued). A decrement
  /// and a branch per spawn; at most one call per periodic() interval.
  TESSERA_ALWAYS_INLINE void note_spawned_home() noexcept {
    if (--m_spawns_until_offer == 0) [[unlikely]] offer_queued_after_spawns();
  }
  /// note_spawned_home() for `n` (> 0) spawns at once (context::spawn of a span).
  TESSERA_ALWAYS_INLINE void note_spawned_home(std::uint32_t n) noexcept {
    if (m_spawns_until_offer <= n) [[unlikely]] {
      m_spawns_until_offer = 1;
      offer_queued_after_spawns();
      return;
    }
    m_spawns_until_offer -= n;
  }
  /// Queues the chain first -> ... -> last (n tasks of priority `priority`, linked through
  /// m_next) at the back of the home pool, which this worker holds.
  TESSERA_ALWAYS_INLINE void push_home_chain(task* first, task* last, std::uint32_t n,
                                             std::uint8_t priority) noexcept {
    m_home->local[priority].push_back_chain(first, last, n);
    m_local_count[priority] += n;
  }
  /// Called on this worker's thread for a fresh spawn without data that would go to the front of
  /// its home pool: a normal-priority one goes onto the work-first stack instead (it would be
  /// among the next tasks fetched anyway, newest first). With tasks in the prefetch window, or
  /// with another priority, it is queued at the front of the home pool as before.
  /// `priority`: t's, read by the caller before its own stores (so that a priority known where
  /// the task was made folds away).
  TESSERA_ALWAYS_INLINE void push_next(task* t, std::uint8_t priority) noexcept {
    if (m_wsize != 0 || priority != stack_priority) [[unlikely]] {
      push_local(*m_home, t, true);
      return;
    }
    hold_next(t);
  }
  /// The running task still holds its count: one in its group's pending count, one in its slot's
  /// spawn count (nothing has taken it, see take_token).
  bool holds_token() const noexcept { return m_token; }
#if defined(TESSERA_DEBUG_CHECKS)
  /// The running task is an optimistic reader whose run has not validated (context::validate()):
  /// what it does outside itself would be done again if the read turns out torn.
  bool reading_unvalidated() const noexcept { return context_access::reading_unvalidated(m_ctx); }
#endif
  /// Called by scheduler::spawn for the first child spawned into the running task's own group that
  /// stays in this worker's own pools: the running task's count passes to the child. Neither the
  /// child's spawn nor the running task's completion is counted. In a chain or a recursion that
  /// saves half the counting; the counts stay exact (docs/architecture.md, "Group counts").
  TESSERA_ALWAYS_INLINE void take_token() noexcept {
    m_token = false;
    m_epoch.count_transfer();
  }
  /// Any thread: raise attention bits and wake the worker if it sleeps.
  void notify(std::uint32_t bits) noexcept;
  /// Any thread: wake the worker if it parked (after a push into one of its pools). True if it
  /// was asleep and this call woke it.
  bool wake_if_sleeping() noexcept;
  /// The worker's own thread, in a blocking wait of the idle hook (tessera::idle_woken): true
  /// if a waker took its mark since it entered the hook. seq_cst: the other side of
  /// wake_if_sleeping's exchange, which comes before the hook's wake.
  [[nodiscard]] bool woken_in_hook() const noexcept {
    return m_sleeping.load(std::memory_order_seq_cst) != asleep_hook;
  }
  /// Any thread, after a push into the inbox of a pool this worker owns: tells periodic() that an
  /// inbox has tasks (a worker running its work-first stack fetches nothing from its pools, and
  /// so drains nothing, for as long as the stack lasts).
  void post_mail() noexcept {
    // seq_cst, with the push's exchange before it: see take_mail().
    if (m_mail.load(std::memory_order_seq_cst) == 0) m_mail.store(1, std::memory_order_seq_cst);
  }
  /// Any thread: ask this worker for work on behalf of `thief`. False if another request waits.
  bool request_steal(int thief) noexcept;
  /// Any thread: the thief whose request waits for this worker's answer, or no_thief (relaxed:
  /// a snapshot; scheduler::choose_victim passes over a worker that has one).
  int steal_requested_by() const noexcept { return m_mailbox.requested_by(); }
  /// The request slot and blind mark thieves and the scheduler use (any thread).
  steal_mailbox& mailbox() noexcept { return m_mailbox; }
  bool active() const noexcept { return m_active.load(std::memory_order_relaxed); }
  /// Tasks queued here as last published (offer_queued); seq_cst: see choose_victim.
  std::uint32_t queued_published() const noexcept {
    return m_queued.load(std::memory_order_seq_cst);
  }

  void set_active(bool a) noexcept;
  /// Any thread: true once the runtime asked this worker to exit (stop(), after the drain) and
  /// the worker has not handled it yet.
  bool exit_requested() const noexcept {
    return (m_attention.load(std::memory_order_acquire) & attention_exit) != 0;
  }
  worker_statistics statistics() const noexcept;
  epoch_counters& counters() noexcept { return m_epoch; }
  /// Retire a resource from a task running on this worker.
  void retire(resource_header* h) noexcept;
  /// Frees everything still retired (runtime stopped).
  void reclaim_all() noexcept;

  /// Adds `d` to the pending count of `g`, batched on this worker (owner-only, no atomic RMW):
  /// +1 for a task spawned into the running task's own group, -1 for a completion. The batch
  /// goes to the group's shared counter in one fetch_add (flush_group) before a task leaves this
  /// worker (remote push, pool hand-over, steal answer), every `epoch_interval_tasks` tasks, on
  /// switching to another group, and before idling. Why that is sound: docs/architecture.md,
  /// "Group counts".
  /// `slot`: the epoch slot of the task counted (the running task's).
  /// Always inline: a compare and an add on every spawn and completion (left to the compiler, it
  /// went out of line in spawn paths once the task loop grew: +5 instructions per task of
  /// tessera-bench spawn --pattern tree).
  TESSERA_ALWAYS_INLINE void group_add(group g, int d, unsigned slot) noexcept {
    if (g != m_gbatch.open_group()) [[unlikely]] {
      open_group_batch(g, slot);
    }
    m_gbatch.add(d);
  }
  /// Applies the batched count; completes the group if that brings it to zero.
  void flush_group() noexcept;
  /// Flushes the batch of another group and starts one for `g`, counted in epoch slot `slot`.
  void open_group_batch(group g, unsigned slot) noexcept;
  /// Before tasks of this worker's pools leave in a hand-over (give_pool, a steal answer): the
  /// group batch, since they may be counted only there, and the transfer count, since the
  /// worker that takes them may complete a child this worker's count passed to (epoch.h).
  void before_tasks_leave() noexcept {
    flush_group();
    m_epoch.publish_transfers();
  }
  /// Before start(): record this worker's events into `b` (tessera/trace.h). Without it the
  /// worker records nothing, at the cost of one predictable branch per event site.
  void attach_trace(trace_buffer* b) noexcept { m_trace = b; }
  /// Holds step mode `name` (queued, prefetched or direct), no other probed: TESSERA_STEP_MODE,
  /// read once per runtime by the scheduler before the workers start. False, and nothing
  /// changed, for another name.
  bool fix_step_mode(std::string_view name) noexcept;
  /// This worker completed group `g` (its last task finished here): an instant in the trace.
  void trace_group_completed(group g) noexcept {
    if (m_trace != nullptr) [[unlikely]] {
      trace_instant(trace_kind::group_completed, g.index);
    }
  }
  /// Flushes if tasks of `g` are about to leave this worker.
  void flush_group_if(group g) noexcept {
    if (g == m_gbatch.open_group()) flush_group();
  }

 private:
  struct window_entry {
    task* t;
    pool* p;
  };

  void run();
  /// Handles raised attention bits (parking while deactivated); false when the worker exits.
  bool attend();
  void handle_attention(std::uint32_t bits);
  void adopt_incoming();
  void answer_steal_request();
  void give_pool(pool* p, worker& to);
  void give_everything();
  /// The task to run next and the pool it came from; {nullptr, nullptr} when there is none.
  TESSERA_ALWAYS_INLINE window_entry next();
  /// `e`, a task from the pools about to run. If it is of another group than the open batch,
  /// the batch goes out first (flush_before_other_group): the task may run long, and the batch
  /// may hold the last completion of its group, whose waiter would wait for that task too. Tasks
  /// from the work-first stack are not asked (their parent ran just before them, mostly in their
  /// group; asking would cost every task a load and a compare); the batch's other flushes bound
  /// their delay in tasks (docs/architecture.md, "Group counts").
  TESSERA_ALWAYS_INLINE window_entry from_pool(window_entry e) noexcept {
    // No batch open (a task that returns itself carries its count and opens none): nothing to
    // flush, and no call for every task of another group.
    const group open = m_gbatch.open_group();
    if (open.valid() && hdr(e.t).m_group != open) [[unlikely]] {
      flush_before_other_group();
    }
    return e;
  }
  /// from_pool's flush: the group batch, then the epoch counts. The task about to run may run
  /// long, and completions left unpublished meanwhile (up to epoch_interval_tasks - 1 of them,
  /// the batch's own among them) would keep their slots unbalanced: the global epoch could not
  /// pass the oldest of them + 3, and what was retired since would wait for that task's end
  /// (as idle() publishes before its quick poll).
  void flush_before_other_group() noexcept;
  /// How a task that returns itself with new data (a traversal's next step) goes on, when it
  /// stays home: queued at the back of the home pool, where it enters the prefetch window and
  /// its lines are fetched while d other tasks run (hides misses to DRAM, costs a queue round
  /// trip, a window slot and a prefetch: ~70 instructions a step); or held on the work-first
  /// stack to run next, its lines prefetched as it is held (the misses of one object overlap
  /// each other, not those of other tasks) or not at all (data in cache). Which pays depends on
  /// where the data is: each worker samples its cycles per periodic() interval in the mode it
  /// holds and, now and then, in another one, and keeps the faster (choose_step_mode).
  enum step_mode : std::uint8_t { step_queued = 0, step_prefetched = 1, step_direct = 2 };
  static constexpr unsigned step_modes = 3;
  /// Intervals compared, each side: their sum less the longest (step_sample).
  static constexpr unsigned step_samples = 8;
  /// step_samples intervals of one setting. Two settings are compared by the sum less the
  /// longest interval: a setting's average, an interrupt or a preemption (which lengthens one)
  /// left out (the fastest interval alone says which side was luckier where intervals vary by
  /// what runs in them: YCSB's tree, a batch task in a 50-task interval or not). The fastest is
  /// the slow-sample rule's reference (m_step_ref): a mean taken across a phase change, half
  /// before and half after, could put the slower phase under twice it, and the rule not fire.
  struct step_sample {
    std::uint64_t sum = 0;
    std::uint64_t longest = 0;
    std::uint64_t fastest = UINT64_MAX;
    void add(std::uint64_t ticks) noexcept {
      sum += ticks;
      longest = std::max(longest, ticks);
      fastest = std::min(fastest, ticks);
    }
    std::uint64_t trimmed() const noexcept { return sum - longest; }
  };
  /// Intervals between two probes: from step_probe_min, doubled after each probe that lost, and
  /// back to step_probe_min when the held setting ran step_samples intervals in a row over twice
  /// as long as when it was last compared.
  static constexpr unsigned step_probe_min = 64;
  static constexpr unsigned step_probe_max = 2048;
  /// What a probe tries, in turn (choose_step_mode): the next step mode, twice the prefetch
  /// distance, the mode after it, half the distance. A probe that cannot apply (the mode fixed by
  /// TESSERA_STEP_MODE, the distance fixed by runtime_options::adapt_prefetch_distance or 0, or
  /// at its bound) gives its turn to the next.
  static constexpr unsigned probe_turns = 4;
  void init_step_mode() noexcept;
  /// periodic(): one interval's sample; probes another mode or distance, or decides after a
  /// probe.
  void choose_step_mode() noexcept;
  /// Starts the next probe that can apply (m_probe_turn); false if none can.
  bool start_probe() noexcept;
  /// `d`, the prefetch distance set for the runtime (scheduler::prefetch_distance), if it changed
  /// since this worker last looked: the one in force from now on, wherever the sampler had taken
  /// it (runtime::set_prefetch_distance starts every worker again from the distance it sets).
  TESSERA_ALWAYS_INLINE void refresh_distance(unsigned d) noexcept {
    if (d != m_distance_set) [[unlikely]] {
      m_distance_set = d;
      m_distance = d;
      m_stats.distance.store(d, std::memory_order_relaxed);  // a parked worker's too (idle())
      m_distance_held = d;  // a probe under way ends on d, won or lost
      m_step_ref = UINT64_MAX;  // its speed at d not known yet
      m_step_confirming = false;  // a win at the old distance says nothing of d
    }
  }
  /// finish() outside step_queued: true if `t` may run next (prefetching its lines under
  /// step_prefetched unless they are ran_on's); false if a more urgent task waits (t is queued
  /// instead). The loop runs a held step next, up to the next periodic() (worker::run).
  TESSERA_ALWAYS_INLINE bool hold_stepping(task* t, const void* ran_on) noexcept;
  /// True (and counted) if follow-up `f`, returned by `t`, goes onto the work-first stack.
  TESSERA_ALWAYS_INLINE bool can_hold_follow_up(const task* t, const task* f) noexcept;
  /// Pushes `t` onto the work-first stack: a list linked through the tasks' own queue link
  /// (m_next, owned by whatever holds the task), newest first. A push and a pop are a load and two
  /// stores each: no index, no capacity, nothing to spill.
  TESSERA_ALWAYS_INLINE void hold_next(task* t) noexcept {
    hdr(t).m_next.store(m_stack_top, std::memory_order_relaxed);
    m_stack_top = t;
  }
  /// Pops the top of the work-first stack (not empty).
  TESSERA_ALWAYS_INLINE task* pop_next() noexcept {
    task* t = m_stack_top;
    m_stack_top = hdr(t).m_next.load(std::memory_order_relaxed);
    return t;
  }
  /// `t` enters the prefetch window: if it is more urgent than the work-first stack, steps are
  /// not held (hold_stepping) until the window is found to hold none such.
  TESSERA_ALWAYS_INLINE void note_window_priority(const task* t) noexcept {
    if (hdr(t).m_priority < stack_priority) [[unlikely]] {
      m_urgent_in_window = true;
      update_step_hold();
    }
  }
  void update_step_hold() noexcept {
    m_step_hold = m_step_mode == step_queued ? hold_none
                  : m_step_mode == step_direct && !m_urgent_in_window ? hold_direct
                                                                      : hold_checked;
  }
  bool more_urgent_queued(unsigned priority) const noexcept;
  /// A task more urgent than `priority` waits in the prefetch window.
  bool more_urgent_in_window(unsigned priority) const noexcept;
  /// Moves the whole work-first stack to the front of the home pool (pools may change hands,
  /// a thief looks at the queue, or a more urgent task waits).
  void requeue_next() noexcept;
  /// The next task from the owned pools (highest priority first, round-robin over pools, at
  /// most pool_batch from one pool in a row; inboxes drained when the local queues are empty,
  /// and on mail by periodic()), or {nullptr, nullptr}. Inline in both of next()'s
  /// call sites: as a call from the window's refill loop it costs ~16 instructions more per task
  /// entering the window (YCSB C at 100,000 records, callgrind).
  window_entry take();
  std::size_t drain_inboxes(std::size_t limit);
  /// Drains the inboxes if mail was posted (post_mail), and posts it again to itself while
  /// tasks are left in them.
  void take_mail();
  TESSERA_ALWAYS_INLINE void prefetch(const task* t) noexcept;
  /// Runs `t`; returns the step held to run next (finish()), or nullptr.
  TESSERA_ALWAYS_INLINE task* execute(task* t, pool* p);
  /// execute() without the trace: what both the plain and the traced path run.
  TESSERA_ALWAYS_INLINE task* execute_plain(task* t, pool* p);
  /// Tracing on: `t` begins, its span opens (trace_buffer::task_begins, inline: a 16-byte
  /// store and a few compares; a clock read every few tasks).
  TESSERA_ALWAYS_INLINE void trace_task_begins(const task* t) noexcept {
    std::uint64_t payload = 0;  // read before the run: t may be destroyed by it
    if (hdr(t).m_is_resource != 0) {
      const void* r = hdr(t).m_data;
      payload = trace_event::task_payload(
          r, static_cast<std::uint8_t>(resource_header::of(r)->applied));
    }
    m_trace->task_begins(&typeid(*t), payload, m_guard.retries());
  }
  /// Tracing on: the open task span (the last task's), if any, ends now. A span is ended by
  /// the next task's start or here, where the worker leaves its run of tasks (periodic(), the
  /// end of a run, idling).
  void trace_close_span() noexcept { m_trace->close_span(m_guard.retries()); }
  /// An event at this moment (tracing on only).
  void trace_instant(trace_kind kind, std::uint32_t value, std::uint16_t peer = 0) noexcept {
    m_trace->record(trace_event::instant(trace_clock::now(), kind, value, peer));
  }
  /// try_advance_epoch, and with tracing on an instant if it advanced the epoch.
  void advance_epoch(std::uint64_t now) noexcept;
  /// The task loop while a group is cancelled (scheduler::cancellations() != 0): each task is
  /// checked first, and one of a cancelled group is dropped. True if it stopped because no
  /// cancellation is in force any more (tasks may be left), false when none was left or the
  /// attention word is set.
  bool run_checking_cancellations(unsigned& until_periodic, unsigned interval);
  /// attend()'s part while a group is cancelled: runs tasks through run_checking_cancellations,
  /// idling when there are none, until no cancellation is in force (true) or the attention word
  /// is set (false: attend() handles it, then comes back here), so that run()'s own loop never
  /// takes a task while a cancellation is in force.
  bool run_while_cancelled();
  /// `t`, of a cancelled group, taken from the pools: destroyed without running and counted as
  /// done, as a task that returned nothing.
  void drop_cancelled(task* t) noexcept;
  /// execute() for a task annotated with a resource: under the resource's primitive.
  TESSERA_ALWAYS_INLINE task* execute_on_resource(task* t, pool* p);
  /// `t`, serialized by its resource's pool, was taken from pool `p`: if that is not the
  /// resource's pool, pushes it there and returns true.
  bool forward_to_resource_pool(task* t, pool* p);
  /// execute_on_resource's rare outcomes: `failed` (reported) and `forwarded` (pushed to the
  /// pool of the resource of header `h`).
  void other_outcome(task* t, resource_header& h, run_outcome outcome);
  /// After execute: `t` threw (the exception goes to its group), or it is done (no follow-up),
  /// or it handed back `follow` (routed; `ran_on`: the resource t ran on, or nullptr).
  void fail(task* t, std::exception_ptr error);
  TESSERA_ALWAYS_INLINE void complete(task* t) noexcept;
  void complete_slow(task* t) noexcept;
  /// Counts the completion of a task of group `g` in epoch slot `slot` (unless it passed its
  /// count on, see take_token).
  TESSERA_ALWAYS_INLINE void count_completion(group g, unsigned slot) noexcept;
  /// The running task `t` gave its count to a child and hands back a follow-up: it takes a fresh
  /// count (as a spawn into its own group), so finish() can treat it like any other task.
  void reacquire_token(group g, unsigned slot) noexcept;
  /// A new count in slot `slot` and group `g`: one spawn, and +1 in the group's batch.
  TESSERA_ALWAYS_INLINE void count_new(group g, unsigned slot) noexcept;
  /// A follow-up held on the work-first stack carries t's count, as a first child does
  /// (take_token): it stays here until it runs, or leaves in a hand-over, which publishes the
  /// transfer first (before_tasks_leave). So this execution is counted as one transfer; or, if a
  /// child took t's count already (and counted the transfer), the follow-up gets a new count.
  TESSERA_ALWAYS_INLINE void carry_count(group g, unsigned slot) noexcept;
  /// Inline (in both execute paths): the common cases, a task held to run again or going home
  /// with new data, cost no call; the rest is finish_other. `applied`: the primitive of
  /// ran_on's resource (primitive::none without one).
  /// Returns `t` if it is a traversal's step held to run next (hold_stepping): the loop runs it
  /// next (worker::run), else nullptr.
  TESSERA_ALWAYS_INLINE task* finish(task* t, task* follow, const void* ran_on, primitive applied);
#if defined(TESSERA_DEBUG_CHECKS)
  /// finish()'s checks of a follow-up (not spawned, a resource made by the runtime, a current
  /// group): true if `follow` was refused, reported as t's failure.
  bool follow_up_rejected(task* t, task* follow);
#endif
  /// Follow-up `f` is annotated with the resource its task just ran on (`ran_on`): the header is
  /// in cache, so the resource's placement is applied at once (scheduler::route's header_hot).
  static bool header_hot(const task* f, const void* ran_on) noexcept {
    return ran_on != nullptr && hdr(f).m_data == ran_on && hdr(f).m_is_resource != 0;
  }
  /// finish() for everything but a task held to run again: `hold`, can_hold_follow_up's answer.
  void finish_other(task* t, task* follow, const void* ran_on, bool hold);
  void idle();
  /// Sleeps on the futex until woken (or the 50 ms safety timeout). True if the sleep ended
  /// without a wake-up (idle() then parks again without spinning first).
  bool park();
  bool has_work_for_park() const noexcept;
  /// The application's idle hook (runtime_options::idle, idle_hook.h), or nullptr.
  const idle_hook* idle_hook_or_null() const noexcept;
  void try_steal();
  /// `thief` was answered with nothing while tasks were queued here (none it may take, or the
  /// last walk not paid for yet): it is marked blind when the walk is paid for (wake_a_peer), so
  /// that it asks again. One thief is remembered; an earlier one is marked at once.
  void remember_refused(int thief) noexcept;
  void periodic();
  /// Publishes how many tasks are queued here (m_queued) for thieves choosing a victim and, with
  /// more than one queued and a peer parked, wakes one (wake_a_peer). From periodic(), and from
  /// the second spawn that stays here after it (note_spawned_home): a long task that splits its
  /// work (a parallel_for's first piece spawns all its halves in one run) would otherwise keep
  /// it from parked peers until its next periodic(), 50 tasks later, which at a loop's 16 pieces
  /// per worker is never.
  void offer_queued();
  [[gnu::noinline]] void offer_queued_after_spawns();
  /// periodic()'s wake-up of a parked peer (some are parked, more than one task queued here):
  /// out of line, since it runs only while a worker is parked, and periodic() is inlined into
  /// the worker loop.
  [[gnu::noinline]] void wake_a_peer();
  void maybe_reclaim();
  /// Tasks this worker has run to completion so far (the epoch counts less the group batches'
  /// pseudo-tasks, which with a short epoch interval are as many as the tasks): what a walk's
  /// debt is paid in.
  std::uint64_t tasks_done() const noexcept {
    return m_epoch.completions() - m_stats.group_batches.load(std::memory_order_relaxed);
  }
  std::size_t local_total() const noexcept {
    return m_local_count[0] + m_local_count[1] + m_local_count[2];
  }

  // ---- owner-only -----------------------------------------------------------------------------
  scheduler& m_sched;
  std::uint16_t m_index;
  unsigned m_cpu;
  unsigned m_node;
  std::thread m_thread;
  pool* m_home = nullptr;
  std::vector<pool*> m_pools;
  std::array<std::size_t, priority_count> m_local_count{};
  std::size_t m_rr = 0;
  unsigned m_batch = 0;
  std::array<window_entry, window_slots> m_window{};
  unsigned m_wbegin = 0;
  unsigned m_wsize = 0;
  unsigned m_distance = 0;      // the prefetch distance in force (the sampler's, or as set)
  unsigned m_distance_set = 0;  // the runtime's distance when this worker last looked
  unsigned m_distance_held = 0; // the distance held while another is probed
  // How a task returning itself with new data goes on (finish(), choose_step_mode).
  std::uint8_t m_step_mode = step_queued;
  std::uint8_t m_step_held = step_queued;  // the mode held while another is probed
  std::uint8_t m_step_phase = 0;           // 0: holding a mode; 1: probing, settling; 2..: sampling
  bool m_step_fixed = false;               // TESSERA_STEP_MODE named a mode: not probed
  bool m_adapt_distance = false;           // runtime_options::adapt_prefetch_distance
  std::uint8_t m_probe_turn = 0;           // the next probe's kind (probe_turns)
  bool m_urgent_in_window = false;         // see note_window_priority
  // What finish() does with a traversal's step, from m_step_mode and m_urgent_in_window
  // (update_step_hold): queue it (`queued`), hold it after the queues' test alone (`direct`, no
  // more urgent task in the window), or ask hold_stepping. One byte: the mode, the window's flag
  // and the `prefetched` test were three tests a step.
  enum : std::uint8_t { hold_none, hold_direct, hold_checked };
  std::uint8_t m_step_hold = hold_none;
  bool m_step_sample_ok = false;           // the interval since m_step_mark ran tasks only
  unsigned m_step_countdown = 0;           // intervals until the next probe
  unsigned m_step_probe_every = 0;         // intervals between two probes
  std::uint64_t m_step_mark = 0;           // trace_clock ticks at the last periodic()
  step_sample m_step_held_sample;          // the held setting's intervals before a probe
  step_sample m_step_probe_sample;         // the probed setting's
  std::uint64_t m_step_ref = 0;            // the held setting's fastest when last compared
  bool m_step_confirming = false;          // the next probe repeats one that won (choose_step_mode)
  std::uint8_t m_step_confirm_mode = 0;    // its mode
  unsigned m_confirm_distance = 0;         // and its distance
  unsigned m_step_slow = 0;                // its intervals in a row since, over twice as long
  // The work-first stack: fresh spawns and follow-ups without data of stack_priority, newest
  // first, linked through m_next from m_stack_top (nullptr: empty)
  // (docs/architecture.md, note (†) of "A task's journey").
  task* m_stack_top = nullptr;
  unsigned m_slot_left = 0;            // holds left in the run of m_last_held (can_hold_follow_up)
  const task* m_last_held = nullptr;   // the last of them; compared, never dereferenced
  context m_ctx;
  guarded_executor m_guard;  // runs tasks on resources under their primitive
  bool m_holds_home = false;  // owns(m_home), updated where pools change hands
  bool m_token = false;       // the running task still holds its count (take_token)
  bool m_active_local = true;
  bool m_exit = false;
  int m_pending_victim = -1;
  steal_pacing m_pacing;  // the answers' walks paid for, and a thief refused meanwhile
  std::uint64_t m_last_epoch_try_ns = 0;
  std::uint64_t m_next_peer_wake_ns = 0;  // periodic() may wake a parked peer from then on
  unsigned m_clock_every = 1;             // periodic() reads the clock every this many calls
  unsigned m_clock_countdown = 1;         // calls until the next read
  std::uint64_t m_last_clock_ns = 0;      // the last read
  retired_list m_retired;                 // retired here, not freed yet
  bool m_slept_through = false;           // the last park() ended by its timeout, not a wake-up
  // Spawns staying here until offer_queued() runs (note_spawned_home); reset to 2 by periodic()
  // and idle(), set out of reach once it ran (until the next reset).
  std::uint32_t m_spawns_until_offer = 2;
  group_batch m_gbatch;  // the running tasks' changes to one group's count
  trace_buffer* m_trace = nullptr;  // this worker's trace ring; nullptr: tracing off

  // ---- shared ---------------------------------------------------------------------------------
  /// Bits raised by others (fetch_or, seq_cst) and consumed by the worker (exchange).
  alignas(64) std::atomic<std::uint32_t> m_attention{0};
  /// asleep_futex while parked on this word (futex), asleep_hook while in the application's idle
  /// hook (idle_hook.h), else asleep_awake. seq_cst on both sides: see
  /// mpsc_queue::maybe_nonempty. A waker exchanges it to asleep_awake and wakes the way the old
  /// value names (wake_if_sleeping).
  std::atomic<std::uint32_t> m_sleeping{0};
  /// 1: an inbox of an owned pool may have tasks (post_mail, take_mail). Beside m_sleeping, which
  /// a pusher reads anyway.
  std::atomic<std::uint32_t> m_mail{0};
  /// The thief waiting for an answer, and the blind mark (steal/stealing.h).
  steal_mailbox m_mailbox;
  /// Tasks queued in owned pools, published for thieves choosing a victim (relaxed, a hint).
  std::atomic<std::uint32_t> m_queued{0};
  std::atomic<bool> m_active{true};
  mutex m_incoming_mutex;
  std::vector<pool*> m_incoming GUARDED_BY(m_incoming_mutex);  // handed to us, not adopted yet
  worker_counters m_stats;
  epoch_counters m_epoch;

};

}  // namespace tessera::detail
