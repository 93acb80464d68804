// src/graph/run.cpp — running a task_graph: the run's state, the node task, readying successors.
//
// A run is a run_state (the weights of its tasks and one pending count per node, copied from
// the in-degrees) and node tasks. A node task runs its node's body, then takes one off the
// pending count of each successor; a successor whose count reached zero is ready. The first
// ready one runs next in the same task: in place, in a loop of up to inline_nodes nodes (no call
// into the worker between two nodes of a chain), then as the task's follow-up, renumbered and
// re-annotated (still no allocation and no queue). In a graph without annotations the others
// wait in the task's own list of ready nodes (up to held_nodes), run in place when a node
// readies nothing, and become node tasks on the worker's own queue, from where idle workers
// steal them, when the list is full, a thief asks this worker or a body throws; in an annotated
// graph they are spawned at once. docs/architecture.md, "Task graphs", has the picture.
//
// The run's roots start as one task holding the range of them: it splits off the upper half as
// a new task, again and again, until it holds one root, so a graph with many roots spreads over
// the workers as a parallel_for does.
//
// A node that defers its completion (graph_run::defer, graph_run::parallel_for) gets a deferral:
// a count of its unfinished shares (its body's, one per completion). The node task takes the
// body's share off when the body returns; whichever takes the last one off readies the node's
// successors (from a completion's done: as new node tasks, the first returned to run next).
//
// Every node task holds a weight of its run_state (weighted reference counting: a spawn gives
// half of the spawner's, without a shared write); a destroyed task takes its weight off, and the
// one that brings the total to zero ends the run, so a run whose tasks were dropped (cancel) or
// that stopped at an exception ends too. An ended run's state is kept by the graph
// (graph_data::spare_run) for its next run, which copies the in-degrees over the counts and
// reuses the memory (pages already faulted in); a run finding none kept (the first, or one
// overlapping another) allocates, and of two states given back the later one is freed.
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>
#include <utility>

#include "graph/graph_access.h"
#include "graph/graph_data.h"
#include "memory/resource_memory.h"
#include "runtime/context_access.h"
#include "runtime/scheduler.h"
#include "runtime/worker.h"
#include "tessera/detail/task_access.h"
#include "tessera/graph.h"
#include "util/compiler.h"

namespace tessera::detail {

struct run_state {
  /// The weights of the run's tasks alive (made and not yet destroyed): weighted reference
  /// counting. The first task holds all of it; a node task spawning another gives it half of its
  /// own weight (no shared write: a graph that fans out costs no atomic per spawn), taking a
  /// fresh `weight_refill` from here only when it holds one. A task destroyed takes its weight
  /// off; the one that brings it to zero ends the run (release_weight: the state goes back to
  /// the graph). An increment is made by a holder of weight (relaxed, as shared_ptr's); the
  /// decrement is acq_rel: the one that reaches zero sees every other task's use of the state
  /// before it gives it back.
  /// On a line of its own: written by every worker that destroys a task of the run, it would
  /// otherwise take with it the fields below, which every node task reads.
  alignas(64) std::atomic<std::uint64_t> refs{0};
  alignas(64) graph_data* graph;
  const task_graph* owner;
  std::uint32_t* pending;  // one per node, right after this struct
  std::uint32_t capacity;  // counts the memory has room for (a reused state: >= the nodes)

  /// Takes one off `v`'s pending count: true if that readied it (the caller runs it). acq_rel
  /// on the decrement: each predecessor releases its writes, and the last one acquires them
  /// all (a release sequence of read-modify-writes). A count of one seen by an acquire load is
  /// the caller's alone (nothing else can take it off, and a dynamic node may add to it only
  /// from a node that precedes v, which happened before this), so no write is needed.
  TESSERA_ALWAYS_INLINE bool arrive(std::uint32_t v) noexcept {
    std::atomic_ref<std::uint32_t> p(pending[v]);
    if (p.load(std::memory_order_acquire) == 1) {
#if defined(TESSERA_DEBUG_CHECKS)
      p.store(0, std::memory_order_relaxed);  // for add_dependency's check
#endif
      return true;
    }
    return p.fetch_sub(1, std::memory_order_acq_rel) == 1;
  }
};

/// What a run's first task holds, and what a task holding a weight of one takes anew before it
/// gives half away. The sum of the weights alive stays far below 2^64: each task holds at most
/// weight_refill + 1.
constexpr std::uint64_t weight_refill = std::uint64_t{1} << 32;

void acquire_run(run_state* run) noexcept { run->refs.fetch_add(1, std::memory_order_relaxed); }

void free_run_state(run_state* run) noexcept {
  if (run == nullptr) return;
  run->~run_state();
  ::operator delete(run, std::align_val_t{alignof(run_state)});
}

/// Takes `weight` off the run's total; the last one ends the run: its state goes back to the
/// graph for the next run (graph_data::spare_run).
/// Memory ordering: the decrement reaching zero is acq_rel, so this thread has seen every use of
/// the counts by the run's tasks; the exchange putting the state back releases that, and the
/// next run's exchange taking it acquires it, so the next run's copy of the in-degrees over the
/// counts happens after everything this run did with them. A state displaced by the exchange
/// (another run gave one back meanwhile) is freed: acq_rel orders that after its own giver.
void release_weight(run_state* run, std::uint64_t weight) noexcept {
  if (run->refs.fetch_sub(weight, std::memory_order_acq_rel) != weight) return;
  graph_data* g = run->graph;
  free_run_state(g->spare_run.exchange(run, std::memory_order_acq_rel));
  // release: the graph's owner, reading 0 (acquire), is after everything this run did with it,
  // the state given back included (the graph's destructor frees it).
  g->runs_in_flight.fetch_sub(1, std::memory_order_release);
}

void release_run(run_state* run) noexcept { release_weight(run, 1); }

/// A node task whose body deferred its completion (d: its deferral) takes the body's share off:
/// true if that completed the node without a failure (the caller readies the successors).
bool body_finishes(deferral* d) noexcept;

void graph_access::require_no_runs(const graph_data& d) noexcept {
  if (d.runs_in_flight.load(std::memory_order_acquire) == 0) return;
  std::fputs("tessera: a task_graph destroyed (or assigned to) while a run of it is in flight; "
             "wait for its group first\n",
             stderr);
  std::abort();
}

namespace {

/// Copies node v's annotations into t's header (a graph without any has nothing to copy: its
/// tasks keep make_task's defaults).
TESSERA_ALWAYS_INLINE void apply_annotations(task* t, const graph_data& d, std::uint32_t v) {
  if (d.annotations.empty()) [[likely]] return;
  const node_annotation& a = d.annotations[v];
  task_header& h = hdr(t);
  h.m_data = a.data;
  h.m_data_size = a.data_size;
  h.m_access = a.access;
  h.m_is_resource = a.is_resource;
  h.m_priority = a.priority;
  h.m_target_kind = a.target_kind;
  h.m_target = a.target;
}

/// A node task prefetches the counts of at most this many of its successors before its body.
constexpr std::uint32_t prefetch_successors = 8;

/// A node task runs at most this many nodes in one execution (the first ready successor of
/// each, in place, see node_task::execute) before it hands itself back to the worker as a
/// follow-up, so that the worker's loop (periodic work, mail, pools handed over) runs between.
constexpr unsigned inline_nodes = 32;

/// A node task of a graph without annotations holds at most this many ready nodes besides the
/// one it runs next (see node_task::execute): a node task is then 128 bytes, the allocator's
/// second size class.
constexpr unsigned held_nodes = 11;

/// The task that runs a node of a graph's run (and, while it holds more than one, splits off
/// the run's roots).
class node_task final : public task {
 public:
  node_task(run_state* run, std::uint64_t weight, std::uint32_t node, std::uint32_t roots_begin,
            std::uint32_t roots_end) noexcept
      : m_run(run),
        m_weight(weight),
        m_node(node),
        m_roots_begin(roots_begin),
        m_roots_end(roots_end) {}
  node_task(const node_task&) = delete;
  node_task& operator=(const node_task&) = delete;
  ~node_task() { release_weight(m_run, m_weight); }

  task* execute(context& ctx) override;

 private:
  /// One node with everything a node may need: annotations (an optimistic reader's
  /// validation, the next node's annotations applied to this task), the run's roots to split.
  /// Returns this task as the follow-up for the first ready successor, or nullptr.
  TESSERA_NOINLINE task* execute_general(context& ctx);
  /// Node v's body, then the successors' counts (what they read is prefetched before the
  /// body). Returns the first ready successor (no_node: none); the other ready ones are spawned
  /// (`General`) or held in m_held (spawned when it is full).
  /// `General`: this task may be an optimistic reader; a torn read (ctx.validate() false)
  /// returns `torn` before anything else is done (the guard runs the task again).
  template <bool General>
  TESSERA_ALWAYS_INLINE std::uint32_t run_node(context& ctx, worker& w, const graph_data& d,
                                               graph_run& state, std::uint32_t v, bool& torn);
  void split_roots(context& ctx, worker& w, const graph_data& d);
  /// Spawns a node task for each held node (they become stealable) and empties the list.
  void spawn_held(context& ctx, worker& w, const graph_data& d);
  /// Makes and spawns from this (running) task a node task for `v` (ready), or for the roots
  /// [roots_begin, roots_end) of the run when roots_end > roots_begin + 1. The new task gets
  /// half of this one's weight.
  TESSERA_ALWAYS_INLINE void spawn_node(context& ctx, worker& w, const graph_data& d,
                                        std::uint32_t v, std::uint32_t roots_begin = 0,
                                        std::uint32_t roots_end = 0) {
    if (m_weight < 2) [[unlikely]] {
      // Relaxed: this task holds weight, so the total cannot reach zero meanwhile.
      m_run->refs.fetch_add(weight_refill, std::memory_order_relaxed);
      m_weight += weight_refill;
    }
    const std::uint64_t given = m_weight / 2;
    auto* t = ctx.make_task<node_task>(m_run, given, v, roots_begin, roots_end);
    m_weight -= given;  // after make_task: a throw there leaves the weights as they were
    apply_annotations(t, d, v);
    scheduler::spawn_from(t, w);  // context::spawn, inline
  }

  run_state* m_run;
  std::uint64_t m_weight;  // this task's part of m_run->refs
  std::uint32_t m_node;
  std::uint32_t m_roots_begin;  // roots[m_roots_begin] == m_node while the range is not split
  std::uint32_t m_roots_end;    // ... up to here; begin + 1 == end: this root alone
  /// Ready nodes this task runs after m_node (the last first), in a graph without annotations:
  /// each readied by this task's own arrive, so they are this task's alone; that arrive's
  /// acquire orders their predecessors' writes before them, whether they run here or in a node
  /// task spawn_held made (the spawn publishes the task).
  std::uint32_t m_held_count = 0;
  std::uint32_t m_held[held_nodes];
};

void node_task::spawn_held(context& ctx, worker& w, const graph_data& d) {
  // From the oldest: nearest the graph's roots, the most work behind it, for a thief to take.
  for (std::uint32_t i = 0; i < m_held_count; ++i) spawn_node(ctx, w, d, m_held[i]);
  m_held_count = 0;
}

void node_task::split_roots(context& ctx, worker& w, const graph_data& d) {
  while (m_roots_end - m_roots_begin > 1) {
    const std::uint32_t mid = m_roots_begin + (m_roots_end - m_roots_begin) / 2;
    spawn_node(ctx, w, d, d.roots[mid], mid, m_roots_end);
    m_roots_end = mid;
  }
}

template <bool General>
std::uint32_t node_task::run_node(context& ctx, worker& w, const graph_data& d,
                                  graph_run& state, std::uint32_t v, bool& torn) {
  run_state* const run = m_run;
  const std::uint32_t* const succ_begin = d.succ_begin.data();
  const std::uint32_t* const succ = d.succ.data();
  // The successors' counts are written after the body, and a successor made ready reads its
  // entry of succ_begin next: those lines (each a cache miss in a big graph, the successors
  // being anywhere) are fetched while the body runs.
  const std::uint32_t first = succ_begin[v];
  const std::uint32_t end = succ_begin[v + 1];
  const bool one_successor = end - first == 1;  // a chain's link, a fan-in: the short way
  if (one_successor) {
    const std::uint32_t s = succ[first];
    __builtin_prefetch(&run->pending[s], 1, 3);
    __builtin_prefetch(&succ_begin[s], 0, 3);
  } else {
    const std::uint32_t prefetch_end =
        end - first <= prefetch_successors ? end : first + prefetch_successors;
    for (std::uint32_t i = first; i < prefetch_end; ++i) {
      const std::uint32_t s = succ[i];
      __builtin_prefetch(&run->pending[s], 1, 3);
      __builtin_prefetch(&succ_begin[s], 0, 3);
    }
  }
  const body_record& b = d.body_for(v);
  b.ops->invoke(b.body, ctx, state, v - b.first);
  if constexpr (General) {
    // An optimistic reader acts outside only once its read held; a torn one runs again.
    if (hdr(this).m_is_resource != 0 && !ctx.validate()) [[unlikely]] {
      torn = true;
      return no_node;
    }
  }
  std::vector<task*>& added = graph_access::added(state);
  if (!added.empty()) [[unlikely]] {  // dynamic nodes, or a deferral's null mark
    for (task* t : added) {
      if (t != nullptr) scheduler::spawn_from(t, w);  // each holds its run reference
    }
    added.clear();
    if (deferral* const df = graph_access::take_deferral(state)) {
      if (!body_finishes(df)) return no_node;  // the last completion readies the successors
    }
  }
  // One decrement per successor; the first ready one is the caller's to run next.
  if (one_successor) {
    const std::uint32_t s = succ[first];
    return run->arrive(s) ? s : no_node;
  }
  std::uint32_t next = no_node;
  for (std::uint32_t i = first; i < end; ++i) {
    const std::uint32_t s = succ[i];
    if (!run->arrive(s)) continue;
    // s runs next or soon: its successor list (located by the line prefetched above) is
    // fetched meanwhile, so that its own prefetches above need not wait for it.
    __builtin_prefetch(succ + succ_begin[s], 0, 3);
    if (next == no_node) {
      next = s;
    } else if (General || m_held_count == held_nodes) {
      spawn_node(ctx, w, d, s);
    } else {
      m_held[m_held_count++] = s;  // no task, no weight, no queue: run here unless a thief asks
    }
  }
  return next;
}

task* node_task::execute_general(context& ctx) {
  const graph_data& d = *m_run->graph;
  worker& w = context_access::worker_of(ctx);
  graph_run state = graph_access::make_run(m_run, ctx, m_node);
  bool torn = false;
  const std::uint32_t next = run_node<true>(ctx, w, d, state, m_node, torn);
  if (torn) return nullptr;  // state's destructor discards what the body added
  if (m_roots_end != m_roots_begin) {
    split_roots(ctx, w, d);
    m_roots_begin = m_roots_end = 0;
  }
  if (next == no_node) return nullptr;
  m_node = next;
  apply_annotations(this, d, next);
  return this;  // a follow-up, with the runtime's rules for one (task.h)
}

task* node_task::execute(context& ctx) {
  const graph_data& d = *m_run->graph;
  // An annotated graph's next node goes through the worker (its task takes the node's
  // annotations, which the runtime applies): one node per execution.
  if (!d.annotations.empty() || m_roots_end != m_roots_begin) [[unlikely]] {
    return execute_general(ctx);
  }
  worker& w = context_access::worker_of(ctx);
  std::uint32_t v = m_node;
  graph_run state = graph_access::make_run(m_run, ctx, v);
  // The first ready successor runs next in place, without a trip through the worker (it would
  // be this task as it is, held on the work-first stack to run next), while no thief waits for
  // this worker's answer, no group is cancelled (the worker's checking loop drops the task of a
  // cancelled one), and for at most inline_nodes nodes.
  // A node that readies nothing is followed by the last node held (m_held), which no other
  // task can reach: a thief asking for work gets them all spawned (the worker answers from its
  // pools when this task returns), and so do the rest of the run when a body throws (a node
  // that does not depend on the thrower still runs).
  try {
    for (unsigned left = inline_nodes;;) {
      bool torn = false;  // never set: a graph without annotations has no optimistic reader
      std::uint32_t next = run_node<false>(ctx, w, d, state, v, torn);
      if (next == no_node) {
        if (m_held_count == 0) return nullptr;
        next = m_held[--m_held_count];
      }
      if (--left == 0 || w.steal_requested_by() != worker::no_thief ||
          w.sched().cancellations() != 0) [[unlikely]] {
        if (w.steal_requested_by() != worker::no_thief) spawn_held(ctx, w, d);
        m_node = next;
        return this;  // a follow-up, with the runtime's rules for one (task.h)
      }
      v = next;
      graph_access::set_node(state, v);
    }
  } catch (...) {
    spawn_held(ctx, w, d);
    throw;
  }
}

}  // namespace

struct deferral {
  run_state* run;
  std::uint32_t node;
  /// Shares not finished: the body's, and one per completion given. acq_rel decrements: the
  /// one that reaches zero sees every share's writes before it readies the successors.
  std::atomic<std::uint32_t> shares{1};
  /// A completion was abandoned (release; read after the last decrement, which orders it).
  std::atomic<bool> failed{false};
};

namespace {

/// Takes one share off; true if it was the last one (the caller then owns d, to free).
bool take_share(deferral* d) noexcept {
  return d->shares.fetch_sub(1, std::memory_order_acq_rel) == 1;
}

/// Frees d (its run's weight of one with it).
void free_deferral(deferral* d) noexcept {
  run_state* const run = d->run;
  delete d;
  release_run(run);
}

}  // namespace

bool body_finishes(deferral* d) noexcept {
  if (!take_share(d)) return false;
  const bool ok = !d->failed.load(std::memory_order_relaxed);
  free_deferral(d);  // the node task's own weight keeps the run alive
  return ok;
}

deferral* defer_node(run_state* run, deferral* existing, std::uint32_t node) {
  if (existing != nullptr) {
    // Relaxed: the body's share is held, so the count cannot reach zero meanwhile.
    existing->shares.fetch_add(1, std::memory_order_relaxed);
    return existing;
  }
  if (node == no_node) {
    throw std::logic_error("tessera: graph_run::defer in a node added by graph_run::add");
  }
  auto* d = new deferral{run, node};
  d->shares.store(2, std::memory_order_relaxed);  // the body's and the completion's
  acquire_run(run);  // the deferral's weight: the run lives until the node completed
  return d;
}

void abandon_deferral(deferral* d) noexcept {
  d->failed.store(true, std::memory_order_relaxed);  // ordered by the decrement's release
  if (take_share(d)) free_deferral(d);  // failed: nothing readied
}

task* finish_deferral(context& ctx, deferral* d) {
  if (!take_share(d)) return nullptr;
  run_state* const run = d->run;
  const std::uint32_t v = d->node;
  const bool ok = !d->failed.load(std::memory_order_relaxed);
  task* next = nullptr;
  if (ok) {
    const graph_data& g = *run->graph;
    worker& w = context_access::worker_of(ctx);
    try {
      for (std::uint32_t i = g.succ_begin[v]; i < g.succ_begin[v + 1]; ++i) {
        const std::uint32_t s = g.succ[i];
        if (!run->arrive(s)) continue;
        auto* t = ctx.make_task<node_task>(run, 1, s, 0, 0);
        acquire_run(run);  // t's weight of one
        apply_annotations(t, g, s);
        if (next == nullptr) {
          next = t;
        } else {
          scheduler::spawn_from(t, w);
        }
      }
    } catch (...) {  // no memory for a node task: the run stops here, as after a throw
      if (next != nullptr) ctx.runtime().discard(next);
      free_deferral(d);
      throw;
    }
  }
  free_deferral(d);  // after the tasks took their weights: the run stays alive
  return next;
}

void add_dependency(run_state* run, const task_graph* graph, std::uint32_t x) {
  if (graph != run->owner || x >= run->graph->size()) {
    throw std::logic_error("tessera: graph_run::dynamic_node::before with a node of another graph");
  }
  // Relaxed: the caller precedes x, so this increment comes before x's last decrement.
  const std::uint32_t was =
      std::atomic_ref<std::uint32_t>(run->pending[x]).fetch_add(1, std::memory_order_relaxed);
#if defined(TESSERA_DEBUG_CHECKS)
  if (was == 0) {
    std::atomic_ref<std::uint32_t>(run->pending[x]).fetch_sub(1, std::memory_order_relaxed);
    throw std::logic_error("tessera: graph_run::dynamic_node::before(" +
                           run->graph->describe(x) + "), which is ready or ran already");
  }
#else
  (void)was;
#endif
}

task* finish_dynamic_node(context& ctx, graph_run& run, std::uint32_t before) {
  run_state* const state = graph_access::state(run);
  worker& w = context_access::worker_of(ctx);
  std::vector<task*>& added = graph_access::added(run);
  for (task* t : added) {
    if (t != nullptr) scheduler::spawn_from(t, w);  // null: a refused defer()'s mark
  }
  added.clear();
  if (before == no_node || !state->arrive(before)) return nullptr;
  auto* t = ctx.make_task<node_task>(state, 1, before, 0, 0);
  acquire_run(state);  // t's weight of one
  apply_annotations(t, *state->graph, before);
  return t;  // runs in this task's place
}

namespace {

/// Starts a run: the state, and the task holding every root. `ctx`: the running task's
/// context, or nullptr from outside.
void spawn_run(runtime& rt, context* ctx, task_graph& graph, group g) {
  graph_data& d = graph_access::data(graph);
  d.prepare();  // throws on a cycle
  const std::uint32_t n = d.size();
  if (d.roots.empty()) return;  // an empty graph: nothing to run
#if defined(TESSERA_DEBUG_CHECKS)
  for (std::uint32_t v = 0; v < d.annotations.size(); ++v) {
    if (d.annotations[v].is_resource != 0 && !is_live_resource(d.annotations[v].data)) {
      throw std::logic_error("tessera: spawn of a task_graph whose " + d.describe(v) +
                             " is annotated with memory that is not a live resource "
                             "(annotate_data is for other memory)");
    }
  }
#endif
  // A state an ended run gave back (acquire: see release_weight), if it has room for the counts;
  // a graph that grew since frees it.
  run_state* run = d.spare_run.exchange(nullptr, std::memory_order_acquire);
  if (run != nullptr && run->capacity < n) {
    free_run_state(run);
    run = nullptr;
  }
  if (run == nullptr) {
    void* mem = ::operator new(sizeof(run_state) + sizeof(std::uint32_t) * std::size_t{n},
                               std::align_val_t{alignof(run_state)});
    run = ::new (mem) run_state();
    run->pending = reinterpret_cast<std::uint32_t*>(static_cast<char*>(mem) + sizeof(run_state));
    run->capacity = n;
  }
  run->refs.store(weight_refill, std::memory_order_relaxed);  // the first task's weight
  run->graph = &d;
  run->owner = &graph;
  std::memcpy(run->pending, d.in_degree.data(), sizeof(std::uint32_t) * std::size_t{n});
  d.runs_in_flight.fetch_add(1, std::memory_order_relaxed);  // the spawn below publishes it
  node_task* t;
  try {
    t = rt.make_task<node_task>(run, weight_refill, d.roots[0], 0,
                                static_cast<std::uint32_t>(d.roots.size()));
  } catch (...) {
    release_weight(run, weight_refill);
    throw;
  }
  apply_annotations(t, d, d.roots[0]);
  if (g.valid()) t->annotate(g);
  // A refused spawn (after stop(), a stale group) destroyed t, which released the run.
  if (ctx != nullptr) {
    ctx->spawn(t);
  } else {
    rt.spawn(t);
  }
}

}  // namespace
}  // namespace tessera::detail

namespace tessera {

void graph_run::discard_added() noexcept {
  // Added but not spawned: the node threw (or was torn). Their destructors release the run.
  for (task* t : m_added) {
    if (t != nullptr) m_ctx->runtime().discard(t);  // null: defer()'s mark
  }
  m_added.clear();
  // A deferral the node task did not take: the body threw, so the node fails.
  if (m_deferral != nullptr) detail::abandon_deferral(std::exchange(m_deferral, nullptr));
}

void graph_run::completion::done(context& ctx) {
  if (task* t = done_then(ctx)) ctx.spawn(t);
}

task* graph_run::completion::done_then(context& ctx) {
  if (m_d == nullptr) {
    throw std::logic_error("tessera: graph_run::completion::done on a completion that is done, "
                           "moved from or empty");
  }
  return detail::finish_deferral(ctx, std::exchange(m_d, nullptr));
}

graph_run::dynamic_node& graph_run::dynamic_node::before(graph_node x) {
  if (*m_before != detail::no_node) {
    throw std::logic_error("tessera: graph_run::dynamic_node::before called twice");
  }
  detail::add_dependency(detail::graph_access::state(*m_run), x.graph(), x.index());
  *m_before = x.index();
  return *this;
}

void runtime::spawn(task_graph& graph, group g) { detail::spawn_run(*this, nullptr, graph, g); }

void context::spawn(task_graph& graph, group g) {
  detail::spawn_run(*m_runtime, this, graph, g);
}

}  // namespace tessera
