// tessera/context.h — what a running task sees of the runtime.
//
// A context is handed to task::execute and is valid only during that call.
//
//   tessera::task* execute(tessera::context& ctx) override {
//     auto* child = ctx.make_task<child_task>(m_node->left);
//     ctx.spawn(child);            // joins this task's group
//     return nullptr;
//   }
#pragma once

#include <cstdint>
#include <span>
#include <utility>

#include "tessera/group.h"
#include "tessera/ids.h"
#include "tessera/task.h"

namespace tessera {

class runtime;
class task_graph;
namespace detail {
class worker;
struct resource_header;
struct context_access;
}  // namespace detail

class context {
 public:
  /// Not copyable: a context is the running task's view of its worker, valid only during
  /// execute. A copy kept for later would spawn from another thread as if it were that worker.
  context(const context&) = delete;
  context& operator=(const context&) = delete;

  /// The worker running the task (kept in the context: one load, no call).
  worker_id worker() const noexcept { return worker_id{m_worker_index}; }
  numa_node_id node() const noexcept;
  tessera::runtime& runtime() const noexcept { return *m_runtime; }

  /// Allocates a task from this worker's allocator.
  template <task_type T, class... Args>
  T* make_task(Args&&... args);
  /// Wraps a callable (`void(context&)` or `task*(context&)`) as a task to annotate and spawn.
  template <task_function F>
  function_task<std::decay_t<F>>* make_task_from(F&& f);

  /// Spawns `t`. Without a group annotation, it joins the group of the running task.
  void spawn(task* t);
  /// Spawns every task of `tasks`, in order, as spawn(t) would each (same placement, groups,
  /// order in the queues and memory ordering: what the caller wrote before the call
  /// happens-before each task's run), in one call. Tasks that stay on this worker and carry a
  /// data annotation (a traversal's first steps, a batch of requests) are counted in their group
  /// and epoch once and queued as one chain, so the prefetch window fills from them as from single
  /// spawns; any other task takes spawn()'s own path. An empty span spawns nothing.
  ///
  /// With debug checks (TESSERA_DEBUG_CHECKS) every task is checked before any is spawned: one
  /// that make_task did not make, that was spawned already (or is named twice in the span), or that
  /// names a resource make_resource did not make throws as spawn() does, and then none was spawned
  /// (all stay the caller's). A
  /// call by an optimistic reader before validate() returned true frees every task and throws
  /// std::logic_error. A task given a group that is stale is refused as spawn() refuses it (freed,
  /// std::logic_error); the tasks before it were spawned, those after it stay the caller's.
  void spawn(std::span<task* const> tasks);
  template <task_function F>
  void spawn(F&& f);
  /// Starts a run of `graph` (graph.h) whose node tasks join `g` (group{}: the running task's
  /// group). Continue after it with when_done(g, ...); never blocks.
  void spawn(task_graph& graph, group g = {});

  /// Registers `continuation` to be spawned when group `g` completes and closes `g` (this is the
  /// one wait a group allows). Never blocks. The continuation joins its own group annotation, or
  /// else the running task's group. Throws std::logic_error if `g` is stale or was waited for
  /// already, or if the continuation would be in `g` itself (it would wait for itself); the
  /// continuation then stays the caller's (runtime::discard it), and nothing else changed.
  /// If a task of `g` threw, the continuation runs all the same (it cannot tell), and the first
  /// exception goes to the continuation's group, whose wait rethrows it (with no group, to
  /// runtime::take_unhandled_exceptions()): a result the continuation computes from a failed
  /// group reaches nobody unchecked.
  void when_done(group g, task* continuation);
  /// when_done with a callable as the continuation (if registering throws, its task is freed).
  template <task_function F>
  void when_done(group g, F&& continuation);

  /// Under optimistic reading: true if nothing was written to the resource since the task
  /// started. Call it before acting outside the task (a spawn, a callback); if it returns
  /// false, return immediately: the runtime restores the task and runs it again. What a run
  /// that fails validation returns is dropped; a new task it returns (made in that run, never
  /// one a rerun could return again) is freed. Under every other primitive it returns true, and
  /// so it does in the run that ends a read that writers overlapped 8 times in a row: that run
  /// keeps the writers out (the resource's latch, or its pool), so it cannot tear.
  ///
  /// With debug checks (TESSERA_DEBUG_CHECKS: the dev, asan and tsan presets) a spawn, a
  /// when_done or a loop started by a reader before validate() returned true is refused with
  /// std::logic_error (a spawned task is freed, a continuation stays the caller's).
  ///
  /// Once validate() returned true the run is final, since the task may have acted on what it
  /// read: the runtime never runs it again, and keeps what it returns or throws. A later call
  /// in the same run that returns false says only that what the task read since is torn; the
  /// task must then not act on it, and goes on by itself (e.g. returns itself, re-annotated,
  /// to read again in a run of its own).
  bool validate() const noexcept;

  /// True once the running task's group was cancelled (runtime::cancel): a long task may look
  /// now and then and stop early. The group's tasks that had not started are not run at all.
  bool cancelled() const noexcept;

  /// The running task is annotated as a writer of a resource whose primitive excludes other
  /// writers (anything but primitive::none; an optimistic reader is not writing). Useful in
  /// assertions. It answers for the task's annotation as it is now: after re-annotating itself
  /// during a run, a task is answered for the new resource, which the runtime protects only in
  /// the task's next run.
  bool writing() const noexcept;

 private:
  friend struct detail::context_access;  // the runtime's way in (src/runtime/context_access.h)
  context(class runtime* rt, detail::worker* w, std::uint16_t index)
      : m_runtime(rt), m_worker(w), m_worker_index(index) {}

  class runtime* m_runtime;
  detail::worker* m_worker;
  task* m_current = nullptr;
  std::uint64_t m_read_version = 0;  // version seen at start under optimistic reading
  const detail::resource_header* m_read_header = nullptr;  // the resource that read started on
  bool m_validating = false;                               // running as an optimistic reader
  bool m_validated = false;                                // validate() succeeded during this run
  // worker()'s answer, kept here: one load from the context (a register inside execute), not two
  // through the worker, and no call for code built without link-time optimization. Last, in the
  // padding: the worker's layout does not change. (A copy of the runtime's allocator choice here,
  // for make_task, measured 0.5 ns per task slower on the tree; see docs/performance-notes.md.)
  std::uint16_t m_worker_index;
};

}  // namespace tessera
