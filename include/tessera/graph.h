// tessera/graph.h — task graphs: tasks that run after others, built once and run many times.
//
// A task_graph holds nodes (a body each, with the annotations a task takes) and edges ("b runs
// after a"). A run spawns the graph into a group: every node of it runs as an ordinary tessera
// task of that group, so waiting, continuing, cancelling and exceptions are the group's own
// (group.h). A run never blocks a worker and costs one decrement per edge.
//
//   tessera::task_graph graph;
//   auto load  = graph.add([](tessera::context&) { load_input(); });
//   auto left  = graph.add([](tessera::context&) { sort_left(); });
//   left.annotate(tessera::priority::high);
//   auto right = graph.add([](tessera::context&) { sort_right(); });
//   auto merge = graph.add([](tessera::context&) { merge_halves(); }).name("merge");
//   graph.precede(load, left);  graph.precede(load, right);      // left, right after load
//   left.precede(merge);        right.precede(merge);            // merge after both
//   for (int round = 0; round < 3; ++round) {
//     tessera::group g = rt.make_group();
//     rt.spawn(graph, g);        // from a task: ctx.spawn(graph, g); ctx.when_done(g, next);
//     rt.wait(g);                // rethrows a node's exception
//   }
//
// Nodes. A body is `void(context&)`, or `void(context&, graph_run&)` for a node that adds work
// while the graph runs (graph_run::add, below). Bodies are called through a const reference, on
// many threads at once when runs overlap: their call operator must be const (a `mutable` lambda
// does not compile). `add_many(n, body)` adds n nodes that share one body, called with the
// node's number 0..n-1 among them: a node then costs the graph 12 bytes (its body's index, its
// successor list's start, its in-degree) and an edge 4 (8 until the next spawn or validate()),
// and a run 4 bytes per node, so a graph of 10 M nodes fits in a few hundred megabytes. Node
// handles (graph_node) take the annotations of a task (task.h): data and
// resources (prefetched, and synchronized by the resource's primitive), priority, a worker or a
// NUMA node to run on, and an optional name for error messages.
//
// Running. runtime::spawn(graph, g) and context::spawn(graph, g) start a run whose node tasks
// all join group g (group{} from a task: the running task's group). Each node runs exactly once
// per run, after all of its predecessors finished. Runs of one graph are independent of each
// other (each has its own counts), also when they overlap. A node readied by a completing node
// runs on that node's worker, or where its annotations place it: one of them next in the
// completing node's task (no queue), the others spawned onto the worker's own queue (stealable)
// or, in a graph without annotations, a few kept in the completing node's task to run there
// later (spawned as soon as another worker asks this one for work, or a node throws).
//
// Errors. A cycle makes spawn (and validate()) throw std::invalid_argument naming a node on the
// cycle (and its name if it has one); nothing of the run is spawned then. A node that throws:
// its successors do not run (nor anything after them), nodes that do not depend on it finish,
// and the group's waiter gets the first exception (as for any task of a group).
// runtime::cancel(g) drops the run's nodes that have not started (running ones finish; the
// nodes after them are dropped as they are readied); g completes as usual.
//
// Lifetime and threads. Build a graph (add, precede, annotate) from one thread; it is not
// changed by running it. Changing a graph while a run of it is in flight throws
// std::logic_error; destroying one then stops the process with a message: wait for the runs
// (or for their groups' continuations) first. Spawning is thread-safe: the first spawn after a
// change prepares the successor lists under a mutex, later ones only read (validate() prepares
// them ahead of time). A run's own memory (one 4-byte count per node) is given back to the graph
// when its last node task is destroyed, whether it ran, threw or was dropped by a
// cancellation; the graph keeps one such block for its next run (which resets the counts and
// reuses the pages instead of faulting in new ones) and frees it when it is destroyed.
//
// Memory ordering: everything a node wrote before it returned happens-before each of its
// successors starts (a successor readied by several predecessors sees all their writes). What
// was written before spawn(graph, g) happens-before every node of that run starts; everything
// written by the run's nodes happens-before wait(g) returns and before a when_done continuation
// of g starts (group.h).
//
// Dynamic work. A node that takes a graph_run& may add nodes while it runs: `run.add(body)` runs
// body after the current node (it is spawned when the current node returns; a node that throws
// spawns none of them), and `.before(x)` makes node x of the graph wait for it too. x must not
// have been readied yet, which holds when the current node precedes x (directly or through other
// nodes); with TESSERA_DEBUG_CHECKS, x already readied throws std::logic_error. A build phase
// deciding how many probe tasks to make:
//
//   auto build = graph.add([&](tessera::context&, tessera::graph_run& run) {
//     build_table();
//     for (std::size_t m = 0; m < morsels(); ++m)
//       run.add([m](tessera::context&) { probe(m); }).before(aggregate);
//   });
//   build.precede(aggregate);
//
// Deferred completion. A node whose work goes on after its body returns (a loop it started,
// tasks it spawned) may say so: then it is complete, and its successors are readied, when that
// work finished, and no task waits for it. `run.parallel_for(first, last, body)` is the usual
// form: a loop split by the runtime at its own grain (as tessera::parallel_for from a task),
// whose last piece to finish readies the node's successors, the first of them running in that
// piece's place. The general form is `run.defer()`: it gives a completion (move-only) to hand to
// the work; the node is complete once its body returned and every completion it gave was
// finished with `done(ctx)` (from any task; `done_then(ctx)` returns the first successor's task
// for an execute to return). A completion destroyed without done() (the task holding it threw
// or was dropped by a cancellation) fails the node: its successors never run, as after a throw.
// The deferred work must be in the run's group (a task spawned from the node joins it; the
// loop's pieces do), so that the group's waiter gets its exceptions and cancel(g) drops it:
//
//   auto bounds = graph.add([&](tessera::context&, tessera::graph_run& run) {
//     run.parallel_for(0, morsels, [&](std::size_t m) { bound(m); });  // returns at once
//   });
//   bounds.precede(choose);   // choose starts after the loop's last piece finished
//   auto io = graph.add([&](tessera::context& ctx, tessera::graph_run& run) {
//     ctx.spawn([c = std::make_shared<tessera::graph_run::completion>(run.defer())](
//                   tessera::context& ctx) { read_block(); c->done(ctx); });
//   });
//
// Memory ordering of a deferred node: everything its body wrote, and everything the deferred
// work wrote before its done() (for a loop: every piece), happens-before each successor starts
// (each share is taken off with an acq_rel read-modify-write; the last one readies the
// successors). defer() is for nodes of the graph (std::logic_error in a node added by
// graph_run::add); an optimistic reader must validate() before it defers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <concepts>
#include <memory>
#include <new>
#include <span>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "tessera/context.h"
#include "tessera/group.h"
#include "tessera/ids.h"
#include "tessera/loop_options.h"
#include "tessera/parallel_for.h"
#include "tessera/runtime.h"
#include "tessera/task.h"

namespace tessera {

class task_graph;
class graph_run;

namespace detail {
struct run_state;
struct graph_data;
struct graph_access;  // the runtime's way in (src/graph/)
template <class F>
class dynamic_node_task;

/// How a graph calls and destroys a body it holds (one per body type).
struct graph_body_ops {
  /// Calls the body at `body` for node number `i` of its add_many (0 for add).
  void (*invoke)(const void* body, context& ctx, graph_run& run, std::uint32_t i);
  void (*destroy)(void* body) noexcept;
};

template <class F>
void invoke_graph_body(const void* body, context& ctx, graph_run& run, std::uint32_t i) {
  const F& f = *static_cast<const F*>(body);
  if constexpr (std::invocable<const F&, context&, graph_run&, std::uint32_t>) {
    f(ctx, run, i);
  } else if constexpr (std::invocable<const F&, context&, std::uint32_t>) {
    f(ctx, i);
  } else if constexpr (std::invocable<const F&, context&, graph_run&>) {
    f(ctx, run);
  } else {
    f(ctx);
  }
}

template <class F>
inline constexpr graph_body_ops graph_body_ops_of{
    &invoke_graph_body<F>, [](void* body) noexcept { static_cast<F*>(body)->~F(); }};

/// The run's reference for a dynamic node task made by graph_run::add (released by the task's
/// destructor, whether it ran or was dropped).
void acquire_run(run_state* run) noexcept;
void release_run(run_state* run) noexcept;
/// A dynamic node finished (its graph_run `run` holds what it added): spawns those, readies
/// `before` (a node index, or no_node) and returns the follow-up to run next, or nullptr.
task* finish_dynamic_node(context& ctx, graph_run& run, std::uint32_t before);
/// graph_run::dynamic_node::before: makes node `x` of the run's graph wait for one more
/// completion. Throws std::logic_error for a node of another graph and, with debug checks, for
/// a node already readied.
void add_dependency(run_state* run, const task_graph* graph, std::uint32_t x);

inline constexpr std::uint32_t no_node = 0xFFFFFFFF;

/// A node's deferred completion (graph_run::defer; in src/graph/run.cpp): how many of the
/// node's shares are not finished (its body's and one per completion), whether one failed.
struct deferral;
/// graph_run::defer: the node's deferral, made at the first call (holding the body's share)
/// with one more share for the completion. std::logic_error in a node added by graph_run::add.
deferral* defer_node(run_state* run, deferral* existing, std::uint32_t node);
/// A completion ended without done(): the node failed (its successors never run).
void abandon_deferral(deferral* d) noexcept;
/// A completion's done(): takes its share off; the last share readies the node's successors
/// (if none failed) and returns the first ready one's task for the caller to run next (or
/// nullptr), the others spawned from ctx's worker.
task* finish_deferral(context& ctx, deferral* d);
}  // namespace detail

/// A graph body: `void(context&)` or `void(context&, graph_run&)`, callable through a const
/// reference (runs of a graph may call it on several threads at once).
template <class F>
concept graph_body = std::move_constructible<F> && std::is_nothrow_destructible_v<F> &&
                     (std::invocable<const F&, context&> ||
                      std::invocable<const F&, context&, graph_run&>);

/// A body of add_many: `void(context&, std::uint32_t i)` or
/// `void(context&, graph_run&, std::uint32_t i)`, i being the node's number among the n.
template <class F>
concept graph_range_body = std::move_constructible<F> && std::is_nothrow_destructible_v<F> &&
                           (std::invocable<const F&, context&, std::uint32_t> ||
                            std::invocable<const F&, context&, graph_run&, std::uint32_t>);

/// A node of a task_graph: a handle (the graph and the node's index), cheap to copy, valid as
/// long as the graph. The annotations are those of task.h, applied to the node's task in every
/// run; each setter returns the handle, to chain.
class graph_node {
 public:
  graph_node() = default;

  std::uint32_t index() const noexcept { return m_index; }
  bool valid() const noexcept { return m_graph != nullptr; }
  task_graph* graph() const noexcept { return m_graph; }

  graph_node& annotate(priority p);
  graph_node& annotate(worker_id w);
  graph_node& annotate(numa_node_id n);
  template <class T>
  graph_node& annotate_resource(T* object, access mode, std::size_t bytes = sizeof(T)) {
    set_data(object, bytes, mode, true);
    return *this;
  }
  graph_node& annotate_data(const void* data, std::size_t bytes, access mode = access::read) {
    set_data(data, bytes, mode, false);
    return *this;
  }
  /// A name for error messages (a cycle through this node names it).
  graph_node& name(std::string_view name);

  /// `successor` runs after this node (task_graph::precede(*this, successor)).
  graph_node& precede(graph_node successor);
  /// This node runs after `predecessor`.
  graph_node& succeed(graph_node predecessor);

  friend bool operator==(const graph_node& a, const graph_node& b) noexcept {
    return a.m_graph == b.m_graph && a.m_index == b.m_index;
  }

 private:
  friend class task_graph;
  graph_node(task_graph* g, std::uint32_t i) noexcept : m_graph(g), m_index(i) {}
  void set_data(const void* data, std::size_t bytes, access mode, bool resource);

  task_graph* m_graph = nullptr;
  std::uint32_t m_index = 0;
};

class task_graph {
 public:
  task_graph();
  task_graph(task_graph&&) noexcept;
  task_graph& operator=(task_graph&&) noexcept;
  task_graph(const task_graph&) = delete;
  task_graph& operator=(const task_graph&) = delete;
  /// Destroys the bodies. With a run in flight it stops the process with a message.
  ~task_graph();

  /// Adds a node running `body` (moved into the graph).
  template <graph_body F>
  graph_node add(F body) {
    return add_body(std::move(body), 1);
  }
  /// Adds `count` nodes sharing `body`, which is called with the node's number i (0..count-1);
  /// returns the first (the others are node(first.index() + i)).
  template <graph_range_body F>
  graph_node add_many(std::uint32_t count, F body) {
    return add_body(std::move(body), count);
  }
  /// The node with this index (0 .. size()-1; std::out_of_range beyond).
  graph_node node(std::uint32_t index);

  /// `after` runs after `before` finished. An edge given twice counts twice (harmless); an edge
  /// from a node to itself is a cycle. std::invalid_argument for a node of another graph.
  void precede(graph_node before, graph_node after);
  /// Every node of `after` runs after every node of `before` (|before| x |after| edges).
  void precede(std::span<const graph_node> before, std::span<const graph_node> after);
  void precede(graph_node before, std::span<const graph_node> after) {
    precede(std::span<const graph_node>(&before, 1), after);
  }
  void precede(std::span<const graph_node> before, graph_node after) {
    precede(before, std::span<const graph_node>(&after, 1));
  }
  /// Room for this many nodes and edges in all (saves the growth while building a big graph).
  void reserve(std::size_t nodes, std::size_t edges);

  std::uint32_t size() const noexcept;
  std::size_t edge_count() const noexcept;
  /// Prepares the successor lists and checks for cycles now instead of at the next spawn:
  /// throws std::invalid_argument naming a node on a cycle. Thread-safe, as spawn is.
  void validate();

 private:
  friend class graph_node;
  friend struct detail::graph_access;

  template <class F>
  graph_node add_body(F&& body, std::uint32_t count) {
    using B = std::decay_t<F>;
    static_assert(alignof(B) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__,
                  "graph bodies may be aligned at most as operator new aligns");
    void* mem = allocate_body(sizeof(B));
    try {
      ::new (mem) B(std::forward<F>(body));
    } catch (...) {
      free_body(mem);
      throw;
    }
    return commit_body(mem, &detail::graph_body_ops_of<B>, count);
  }
  void* allocate_body(std::size_t bytes);
  void free_body(void* mem) noexcept;
  graph_node commit_body(void* mem, const detail::graph_body_ops* ops, std::uint32_t count);
  void set_priority(std::uint32_t i, priority p);
  void set_target(std::uint32_t i, std::uint8_t kind, std::uint16_t value);
  void set_data(std::uint32_t i, const void* data, std::size_t bytes, access mode, bool resource);
  void set_name(std::uint32_t i, std::string_view name);
  /// Throws std::logic_error while a run is in flight.
  void require_idle(const char* what) const;

  std::unique_ptr<detail::graph_data> m_data;
};

/// What a running node (one whose body takes a graph_run&) sees of its run: it may add nodes.
/// Valid only during the body's call, on its thread.
class graph_run {
 public:
  /// A node added by add(): annotate it as a task, or make a node of the graph wait for it.
  class dynamic_node {
   public:
    dynamic_node& annotate(priority p) noexcept {
      m_task->annotate(p);
      return *this;
    }
    dynamic_node& annotate(worker_id w) noexcept {
      m_task->annotate(w);
      return *this;
    }
    dynamic_node& annotate(numa_node_id n) noexcept {
      m_task->annotate(n);
      return *this;
    }
    template <class T>
    dynamic_node& annotate_resource(T* object, access mode, std::size_t bytes = sizeof(T)) {
      m_task->annotate_resource(object, mode, bytes);
      return *this;
    }
    dynamic_node& annotate_data(const void* data, std::size_t bytes,
                                access mode = access::read) noexcept {
      m_task->annotate_data(data, bytes, mode);
      return *this;
    }
    /// Node `x` of the running graph also waits for this one. At most once per dynamic node
    /// (std::logic_error on a second call). x must not have been readied yet (see the top of
    /// this file).
    dynamic_node& before(graph_node x);

   private:
    friend class graph_run;
    dynamic_node(task* t, std::uint32_t* before, graph_run* run) noexcept
        : m_task(t), m_before(before), m_run(run) {}
    task* m_task;
    std::uint32_t* m_before;
    graph_run* m_run;
  };

  /// A share of the running node's completion (defer()): move-only. done() finishes it; one
  /// destroyed (or assigned over) without done() says the work failed or was dropped, and the
  /// node's successors then never run.
  class completion {
   public:
    completion() noexcept = default;
    completion(completion&& other) noexcept : m_d(other.m_d) { other.m_d = nullptr; }
    completion& operator=(completion&& other) noexcept {
      if (this != &other) {
        if (m_d != nullptr) detail::abandon_deferral(m_d);
        m_d = other.m_d;
        other.m_d = nullptr;
      }
      return *this;
    }
    completion(const completion&) = delete;
    completion& operator=(const completion&) = delete;
    ~completion() {
      if (m_d != nullptr) detail::abandon_deferral(m_d);
    }
    /// Not done, moved from or default-made.
    bool valid() const noexcept { return m_d != nullptr; }
    /// The work is done: if it was the node's last share, the node is complete and its
    /// successors whose counts reach zero are spawned from ctx's worker. Call it from a task
    /// (ctx: its context), once: std::logic_error if !valid().
    void done(context& ctx);
    /// done(), for a task's execute to return what this returns: the first successor readied
    /// (its node task, to run in the caller's place, as a follow-up) or nullptr.
    [[nodiscard]] task* done_then(context& ctx);

   private:
    friend class graph_run;
    explicit completion(detail::deferral* d) noexcept : m_d(d) {}
    detail::deferral* m_d = nullptr;
  };

  graph_run(const graph_run&) = delete;
  graph_run& operator=(const graph_run&) = delete;
  /// Frees what was added and not spawned, and a deferral the body did not hand back (the node
  /// threw). Inline: every node makes one, and nearly all add and defer nothing.
  ~graph_run() {
    if (!m_added.empty()) [[unlikely]] discard_added();
  }

  /// Defers the running node's completion (see "Deferred completion" at the top of this file):
  /// the node is complete, and its successors readied, once its body returned and every
  /// completion defer() gave finished with done(). std::logic_error in a node added by add().
  [[nodiscard]] completion defer() {
    // A null entry in m_added marks the deferral: the node task looks at m_added after every
    // body anyway, so a node that defers nothing pays nothing more.
    if (m_deferral == nullptr) m_added.push_back(nullptr);
    m_deferral = detail::defer_node(m_run, m_deferral, m_node);
    return completion(m_deferral);
  }

  /// Starts a loop over [first, last) whose end completes the running node: returns at once,
  /// and the node's successors are readied by the loop's last piece to finish (no task waits).
  /// The body takes the forms of tessera::parallel_for's (`body(i)`, `body(first, last)`,
  /// `body(ctx, first, last)`); the runtime splits the range in halves down to
  /// options.grain (0: about 16 pieces per active worker), the pieces being tasks of the run's
  /// group (stealable, cancelled with it). A piece that throws: the pieces not started are
  /// skipped, the node's successors never run, the group's waiter gets the exception. A stop
  /// requested through options.stop skips the pieces not started and completes the node.
  /// Tasks a piece spawns are not waited for: give them a completion (defer()) if the node's
  /// successors need their work. first > last: std::invalid_argument; an empty range defers
  /// nothing.
  template <class Body>
    requires loop_body<std::decay_t<Body>>
  void parallel_for(std::size_t first, std::size_t last, Body&& body, loop_options options = {});

  /// Adds a node running `body` (`void(context&)` or `void(context&, graph_run&)`; called once,
  /// so it may be mutable) after the current node: it is spawned into the run's group when the
  /// current node returns.
  template <class F>
    requires std::invocable<F&, context&> || std::invocable<F&, context&, graph_run&>
  dynamic_node add(F&& body);

  /// The index of the running node in its graph, or detail::no_node in a node added by add().
  std::uint32_t node() const noexcept { return m_node; }

 private:
  friend struct detail::graph_access;
  template <class F>
  friend class detail::dynamic_node_task;
  graph_run(detail::run_state* run, context& ctx, std::uint32_t node) noexcept
      : m_run(run), m_ctx(&ctx), m_node(node) {}
  void discard_added() noexcept;

  detail::run_state* m_run;
  context* m_ctx;
  std::uint32_t m_node;
  detail::deferral* m_deferral = nullptr;  // the running node's, while its body runs
  std::vector<task*> m_added;  // and a null entry once m_deferral is set (see defer())
};

namespace detail {
/// The task of a node added while the graph runs (graph_run::add).
template <class F>
class dynamic_node_task final : public task {
 public:
  dynamic_node_task(F f, run_state* run) : m_f(std::move(f)), m_run(run) {}
  dynamic_node_task(const dynamic_node_task&) = delete;
  dynamic_node_task& operator=(const dynamic_node_task&) = delete;
  ~dynamic_node_task() { release_run(m_run); }

  task* execute(context& ctx) override {
    graph_run run(m_run, ctx, no_node);
    if constexpr (std::invocable<F&, context&, graph_run&>) {
      m_f(ctx, run);
    } else {
      m_f(ctx);
    }
    return finish_dynamic_node(ctx, run, m_before);
  }
  std::uint32_t* before_slot() noexcept { return &m_before; }

 private:
  F m_f;
  run_state* m_run;
  std::uint32_t m_before = no_node;
};
}  // namespace detail

template <class F>
  requires std::invocable<F&, context&> || std::invocable<F&, context&, graph_run&>
graph_run::dynamic_node graph_run::add(F&& body) {
  using T = detail::dynamic_node_task<std::decay_t<F>>;
  T* t = m_ctx->make_task<T>(std::forward<F>(body), m_run);  // holds a run reference from here
  detail::acquire_run(m_run);
  try {
    m_added.push_back(t);
  } catch (...) {
    m_ctx->runtime().discard(t);  // releases the reference
    throw;
  }
  return dynamic_node(t, t->before_slot(), this);
}

namespace detail {
/// What the pieces of one graph_run::parallel_for share: a loop's state (parallel_for.h) whose
/// hooks take the indices each piece ran off a count and complete the node with the last.
template <class Body>
struct graph_loop_state : loop_state<Body> {
  template <class B>
  graph_loop_state(B&& b, std::size_t g, const loop_options& o, std::size_t n,
                   graph_run::completion c)
      : loop_state<Body>(std::forward<B>(b), g, o), remaining(n), done(std::move(c)) {}
  /// Indices not run yet. Each piece takes off the indices it ran (acq_rel): the one that
  /// brings it to zero sees every piece's writes and finishes `done`. A piece skipped after a
  /// throw never takes its indices off, so a failed loop never completes its node; the state
  /// freed with `done` still held (the last piece destroyed) fails the node.
  std::atomic<std::size_t> remaining;
  graph_run::completion done;

  task* ran(context& ctx, std::size_t n) {
    if (remaining.fetch_sub(n, std::memory_order_acq_rel) != n) return nullptr;
    return done.done_then(ctx);  // the node's successors: the first runs in this piece's place
  }
  /// Pieces skipped after a stop request count as done: a stopped loop completes its node.
  task* stopped(context& ctx, std::size_t n) { return ran(ctx, n); }
};
}  // namespace detail

template <class Body>
  requires loop_body<std::decay_t<Body>>
void graph_run::parallel_for(std::size_t first, std::size_t last, Body&& body,
                             loop_options options) {
  if (!detail::loop_range_ok(first, last)) return;
  using B = std::decay_t<Body>;
  static_assert(std::is_nothrow_destructible_v<B>, "a loop body's destructor must not throw");
  const std::size_t grain =
      detail::loop_grain(first, last, options.grain, m_ctx->runtime().active_workers());
  auto* state = new detail::graph_loop_state<B>(std::forward<Body>(body), grain, options,
                                                last - first, defer());
  task* root;
  try {
    root = m_ctx->make_task<detail::loop_piece<detail::graph_loop_state<B>>>(state, first, last);
  } catch (...) {
    delete state;  // its completion fails the node; the exception fails it too
    throw;
  }
  root->annotate(options.priority);
  m_ctx->spawn(root);  // into the running node's group (refused: root and state destroyed)
}

}  // namespace tessera
