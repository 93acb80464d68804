// tessera/runtime.h — starting and stopping the workers; the entry points of the API.
//
// A runtime owns one worker thread per CPU it was given (pinned with hwloc where allowed), each
// with its own task pools and task allocator. Tasks are spawned from workers or from any other
// thread; the runtime routes them by their annotations (see task.h) and runs them.
//
//   tessera::runtime rt({.workers = 4});
//   tessera::group g = rt.make_group();
//   rt.spawn([](tessera::context& ctx) { std::printf("on %u\n", ctx.worker().value); }, g);
//   rt.wait(g);
//   rt.stop();                 // or let the destructor do it
//
// Lifetime: stop() (called by the destructor too) first drains: it waits until every task
// spawned before or during stop() — including the tasks those tasks spawn — has run, then joins
// the workers. Spawning from a non-worker thread after stop() began throws std::logic_error.
// Retired resources are all released by stop(). A task that never finishes (one that returns
// itself until a flag nobody sets is set) makes stop() wait for ever: stop() cancels nothing.
// Cancel its group first (cancel(g): a task that returns itself is dropped at its next turn),
// or let it look at a flag of yours that you set before stop().
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "tessera/context.h"
#include "tessera/detail/task_access.h"
#include "tessera/detail/task_cache.h"
#include "tessera/detail/task_destroyers.h"
#include "tessera/group.h"
#include "tessera/ids.h"
#include "tessera/idle_hook.h"
#include "tessera/resource.h"
#include "tessera/statistics.h"
#include "tessera/task.h"
#include "tessera/trace.h"

namespace tessera {

class task_graph;
namespace detail {
class scheduler;
void* allocate_task_memory(std::size_t bytes, bool system);
void free_task_block(void* p, std::uint8_t block) noexcept;

/// make_task's allocation: a block and what the task records of it (task::m_block). A pop from
/// the thread's cache inline (the block is then a compile-time constant); refills and the
/// system allocator out of line.
struct task_block {
  void* memory;
  std::uint8_t block;
};
template <std::size_t Bytes>
task_block allocate_task_block(bool system) {
  if constexpr (task_cache_inline && Bytes <= task_cache::max_block) {
    if (!system) {
      constexpr unsigned c = task_cache::size_class(Bytes);
      if (void* p = task_cache_pop(c)) return {p, static_cast<std::uint8_t>(c)};
    }
  }
  return {allocate_task_memory(Bytes, system), task_cache::block_of(Bytes, system)};
}

// TESSERA_DEBUG_CHECKS changes tessera's types (task.h), so the library and the code that
// includes its headers must agree on it (the CMake target tessera::tessera and `pkg-config
// --cflags tessera` pass it). runtime's constructor takes a type named after the including
// code's setting, which the library defines for its own setting only: a mismatch is a link
// error that names the switch (rather than a program that links and fails at its first spawn
// with a misleading error).
#if defined(TESSERA_DEBUG_CHECKS)
struct compiled_with_TESSERA_DEBUG_CHECKS {};
using build_switches = compiled_with_TESSERA_DEBUG_CHECKS;
#else
struct compiled_without_TESSERA_DEBUG_CHECKS {};
using build_switches = compiled_without_TESSERA_DEBUG_CHECKS;
#endif
}  // namespace detail

/// Where task descriptors come from.
enum class task_allocator : std::uint8_t {
  pool,    ///< per-worker free lists refilled in batches from per-NUMA-node heaps ([MxTasks] §5.2)
  system,  ///< operator new/delete (for comparison)
};

/// Where resources (make_resource) live.
enum class resource_memory : std::uint8_t {
  /// The task allocator's blocks (objects of up to 4 KiB with the runtime's 64-byte header; larger
  /// ones from operator new): 2 MiB chunks advised for transparent huge pages, so that a
  /// structure of many resources (a tree's nodes) takes one TLB entry per 2 MiB, and a prefetch
  /// of a node does not wait for a page walk first. Freed blocks are kept for the process's next
  /// tasks and resources; release_free_memory() returns what is wholly free to the system.
  pool,
  /// operator new, 64-byte aligned: the process's heap and its pages.
  heap,
};

/// Returns to the operating system the memory of the task allocator's pool (task descriptors,
/// and resources in resource_memory::pool) that nothing uses: each 2 MiB chunk whose blocks are
/// all free and cached by no thread. The calling thread's cached blocks are given back first;
/// those other threads (workers) cache, up to 2,048 per size class each, keep their chunks, as
/// does one block in use: to include them, run release_thread_cache() in a task on each worker
/// (worker_id targets, one group) and this after them (context::when_done), as
/// tessera-kv-server's MEMORY PURGE does. A retired resource is free once reclaimed. Returns the
/// bytes given back. For a process that freed much at once (a store emptied); the pool takes new
/// memory from the system again as it needs it. Thread-safe, also from a task: it sorts the free
/// blocks (tens of milliseconds for millions) and holds the allocator's locks only to take them
/// out and to put the rest back.
std::size_t release_free_memory() noexcept;

/// Gives the calling thread's cached pool blocks (kept for its next tasks and resources) to the
/// pool's shared heaps, where release_free_memory() can see them. Cheap; the thread takes blocks
/// from the heaps again as it needs them.
void release_thread_cache() noexcept;

/// The CPUs a runtime's workers take when runtime_options::cpus is empty, worker 0's first: every
/// CPU the process may run on (its main thread's affinity mask, as taskset or numactl set it,
/// read once per process), NUMA node by node, and within a node one hardware thread of each
/// core before a second one of any core. So `workers = n` puts n workers on n distinct cores of
/// the first node while it has them (SMT siblings share a core's caches and fill buffers, which
/// tessera's prefetching keeps busy). Pin your own threads to these to compare on the same CPUs.
std::vector<unsigned> default_worker_cpus();

/// Bytes of the last-level cache above the first of default_worker_cpus() (hwloc: the largest
/// data or unified cache among that CPU's ancestors, the one a runtime's first workers share),
/// read once per process; 0 when hwloc does not report one. What a structure's "fits in the
/// caches" budget can follow (kv::tree_options::coupled_leaf_bytes).
std::size_t last_level_cache_bytes();

struct runtime_options {
  /// Number of workers; default: one per CPU the process may run on. Ignored if `cpus` is set.
  /// Worker i runs on default_worker_cpus()[i], wrapping around when there are more workers.
  std::optional<unsigned> workers{};
  /// Explicit OS CPU indices, one worker each, in this order. A CPU the machine does not have
  /// throws std::invalid_argument; one this process may not use runs its worker unpinned.
  std::vector<unsigned> cpus{};
  /// Pin each worker to its CPU with hwloc; if the OS refuses, run unpinned (said once on stderr).
  /// An unpinned worker may run on every CPU the process may run on (not only on those of the
  /// thread that made the runtime).
  bool pin = true;
  /// Task pools (synchronization domains) per worker, 1-64; whole pools are the unit of
  /// stealing.
  unsigned pools_per_worker = 4;
  /// Prefetch distance in tasks (0: no prefetching), at most max_prefetch_distance: how many
  /// tasks ahead of its run a task's annotated data is requested. Changeable at run time
  /// (set_prefetch_distance).
  unsigned prefetch_distance = 2;
  /// Each worker adapts its distance to the tasks it runs: now and then it runs a few hundred
  /// tasks at twice or half its distance (1 .. max_prefetch_distance) and keeps the one that ran
  /// them faster, starting from prefetch_distance (and again from each set_prefetch_distance).
  /// Short tasks on data in DRAM need a longer distance than long ones ([MxTasks] §3.3 leaves
  /// the distance to tuning and names this as an extension). false: every worker keeps the
  /// distance set. A distance of 0 stays 0 either way.
  bool adapt_prefetch_distance = true;
  task_allocator allocator = task_allocator::pool;
  /// Where make_resource places its resources. Under AddressSanitizer the default is the heap, so
  /// that LeakSanitizer sees a resource that is never retired (the pool's blocks are not
  /// malloc's); name `pool` to test the pool there.
#if defined(__SANITIZE_ADDRESS__)
  resource_memory resources = resource_memory::heap;
#else
  resource_memory resources = resource_memory::pool;
#endif
  /// Tasks between two of a worker's periodic rounds (and one whenever it is idle): publishing
  /// its epoch counts, flushing its group batch, draining inboxes that have mail, publishing its
  /// queue length for thieves.
  unsigned epoch_interval_tasks = 50;
  /// The global epoch advances at most this often (at most one hour).
  std::chrono::microseconds epoch_period{1000};
  /// Idle workers look for work this long before they park. With more active workers than CPUs
  /// (distinct CPUs of `cpus`, at most those the process may run on) they park after a poll of
  /// about a microsecond instead: a spinning worker then holds a CPU that a worker with work
  /// needs. (200 µs: on a 16-core VM, 16 workers handing tasks round-robin parked and woke each
  /// other in convoys with 50 µs, 10.7 µs of worker time per task; 1.2 µs with 200.)
  std::chrono::microseconds spin_before_park{200};
  /// An application's wait for its own events in place of the idle workers' park, polled while
  /// they spin (idle_hook.h: an event loop on the workers). Empty: none.
  idle_hook idle{};
  /// Report (to stderr) the first exception that nobody waits for (see take_unhandled_exceptions)
  /// and, when the runtime is destroyed, groups that were never waited for.
  bool report_unhandled_exceptions = true;
  /// A timeline of the workers' tasks, steals and parking, written when the runtime stops
  /// (trace.h). Off unless `trace.file` or the environment variable TESSERA_TRACE names a file.
  trace_options trace{};
};

class runtime {
 public:
  explicit runtime(runtime_options options = {})
      : runtime(std::move(options), detail::build_switches{}) {}
  runtime(const runtime&) = delete;
  runtime& operator=(const runtime&) = delete;
  ~runtime();

  /// Drains all tasks, joins the workers, releases retired resources. Idempotent. From one of the
  /// runtime's own tasks it throws std::logic_error (the task would wait for itself); the
  /// destructor, which cannot throw, stops the process with a message then.
  void stop();
  bool running() const noexcept;

  // ---- tasks ---------------------------------------------------------------------------------
  /// Allocates a task with the configured allocator. Ownership passes to the runtime at spawn.
  template <task_type T, class... Args>
  T* make_task(Args&&... args) {
    const detail::task_block mem = detail::allocate_task_block<sizeof(T)>(m_system_allocator);
    T* t;
    try {
      t = ::new (mem.memory) T(std::forward<Args>(args)...);
    } catch (...) {
      detail::free_task_block(mem.memory, mem.block);
      throw;
    }
    static_assert(sizeof(T) < 65536, "task types must be smaller than 64 KiB");
    static_assert(sizeof(T) % 2 == 0, "bit 0 of task_header::m_bytes carries validates_first");
    // Blocks are aligned as operator new's (16 bytes); keep cache-line-aligned data in a
    // resource (make_resource, up to 64) and point to it from the task.
    static_assert(alignof(T) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__,
                  "task types may be aligned at most as operator new aligns (16 bytes on x86-64)");
    // The runtime destroys tasks where nothing can take an exception (after execute).
    static_assert(std::is_nothrow_destructible_v<T>, "a task's destructor must not throw");
    set_task_block(t, sizeof(T), validates_first_v<T>, mem.block, detail::destroyer_of<T>());
    return t;
  }
  /// Wraps a callable (`void(context&)` or `task*(context&)`) as a task to annotate and spawn.
  template <task_function F>
  function_task<std::decay_t<F>>* make_task_from(F&& f) {
    return make_task<function_task<std::decay_t<F>>>(std::forward<F>(f));
  }
  /// Frees a task that was made but never spawned.
  void discard(task* t) noexcept;

  /// Schedules `t` by its annotations. Thread-safe. From inside a task it does what
  /// context::spawn does (`t`, unless annotated with a group, joins the running task's group);
  /// context::spawn saves finding the calling worker.
  /// A refused spawn throws, and who owns `t` then depends on why: if `t` itself is unfit
  /// (nullptr: std::invalid_argument; with debug checks, a task handed over already, or one
  /// annotated with memory that is not a live resource: std::logic_error), `t` is still yours
  /// (runtime::discard it); if the runtime cannot take it (spawned from outside after stop()
  /// began, or, with debug checks, into a stale group or from an optimistic reader before
  /// context::validate() returned true: std::logic_error), `t` was the runtime's from the call
  /// and has been destroyed.
  void spawn(task* t);
  void spawn(task* t, group g) {
    t->annotate(g);
    spawn(t);
  }
  template <task_function F>
  void spawn(F&& f, group g = {}) {
    auto* t = make_task<function_task<std::decay_t<F>>>(std::forward<F>(f));
    t->annotate(g);
    spawn(t);
  }
  /// Starts a run of `graph` (graph.h) whose node tasks all join `g`: wait(g), when_done, cancel
  /// and detach work on it as on any group. Throws std::invalid_argument, spawning nothing, if
  /// the graph has a cycle.
  void spawn(task_graph& graph, group g = {});

  // ---- groups --------------------------------------------------------------------------------
  group make_group();
  /// Blocks the calling thread (which must not be one of this runtime's workers) without spinning
  /// until every task of `g` finished, then closes `g`. Rethrows the first exception a task of `g`
  /// threw. A handle of another runtime's group is stale here (std::logic_error).
  void wait(group g);
  /// Closes `g` without waiting for it: its slot is freed when its last task finishes, and an
  /// exception of its tasks goes where one of a task without a group goes (stderr once, then
  /// take_unhandled_exceptions()). This is the one wait a group allows; from any thread, also
  /// from a task. A group must be waited for, continued (context::when_done) or detached: one
  /// that is none of these keeps its slot and its exceptions until the runtime is destroyed,
  /// which then says how many there were on stderr. Throws std::logic_error as wait() does.
  void detach(group g);
  /// Cancels `g`: each task of g that has not started is dropped (destroyed without running,
  /// counted as done), those spawned into g later too; a running task finishes (it may look at
  /// context::cancelled() and cut its work short), and a loop that holds g skips its pieces not
  /// started. g still completes as any group does, and still needs its one wait, when_done or
  /// detach: wait(g) returns (rethrowing an exception a task threw before), a continuation runs.
  /// From any thread, a task included. Asynchronous: each worker looks between two tasks, so a
  /// task a worker takes before it has looked (one queued already, or one reaching it from
  /// another thread in that moment) may still start. Returns false if g had completed (its handle
  /// may be stale by now) or was cancelled already; group{} throws std::logic_error.
  bool cancel(group g);
  /// Blocks the calling thread (which must not be one of this runtime's workers) without
  /// spinning until no task is queued or running anywhere; the last worker to go idle wakes it.
  /// Exceptions of grouped tasks stay with their groups.
  void wait_idle();
  /// Exceptions that nobody waits for, since the last call: thrown by tasks without a group, of
  /// a detached group, or of a group given to when_done whose continuation is in no group.
  std::vector<std::exception_ptr> take_unhandled_exceptions();

  // ---- resources -----------------------------------------------------------------------------
  /// Creates a resource object with the runtime's header in front (see resource.h). Hints with a
  /// value outside its enum, or a read_ratio outside 0.0 .. 1.0, throw std::invalid_argument.
  template <class T, class... Args>
  T* make_resource(const resource_hints& hints, Args&&... args) {
    static_assert(alignof(T) <= 64, "resources are at most 64-byte aligned");
    // Freed where nothing can take an exception (reclamation, stop()).
    static_assert(std::is_nothrow_destructible_v<T>, "a resource's destructor must not throw");
    auto* h = allocate_resource(sizeof(T), hints);
    T* obj;
    try {
      obj = ::new (h->object()) T(std::forward<Args>(args)...);
    } catch (...) {
      free_resource(h);
      throw;
    }
    if constexpr (!std::is_trivially_destructible_v<T>) {
      h->destroy = [](void* p) { static_cast<T*>(p)->~T(); };
    }
    return obj;
  }
  /// Deletes a resource once no task can still read it (epoch-based reclamation, [MxTasks] §4.4):
  /// once every task whose operation began before the retire has finished (an operation is a
  /// task spawned from outside any task, with everything it spawns and returns). Such tasks may
  /// still be queued on it, or hold a pointer to it; a task of an operation that begins later
  /// must not reach it (unlink it from your structure before retiring it). A second retire of
  /// the same resource throws std::logic_error; after stop() the resource is freed at once. Any
  /// thread may retire (one that is not a worker hands the resource to the next worker that
  /// looks). The destructor runs on a worker, or in stop() on the stopping thread: it may retire
  /// other resources, but must not spawn tasks. nullptr does nothing; a pointer that
  /// make_resource did not return (or a resource freed already) throws std::invalid_argument.
  template <class T>
  void retire_resource(T* object) {
    if (object == nullptr) return;
    retire(detail::resource_header::of(object));
  }
  /// Frees a resource at once. Only for objects no task can reach anymore and no queued task
  /// names (never published, or the runtime is idle); otherwise use retire_resource. nullptr
  /// does nothing. With TESSERA_DEBUG_CHECKS, a resource destroyed or retired already, or memory
  /// make_resource did not return, stops the process with a message.
  template <class T>
  void destroy_resource(T* object) noexcept {
    if (object == nullptr) return;
    free_resource(detail::resource_header::of(object));
  }
  /// The primitive chosen for a resource.
  template <class T>
  static primitive primitive_of(T* object) noexcept {
    return detail::resource_header::of(object)->prim;
  }
  /// Moves a resource's serialization domain to the pool of `w`, at once. Only for resources that
  /// no queued or running task names, and that no other thread spawns a task on meanwhile (e.g.
  /// right after creation, before it is published). From a task on the resource itself it throws
  /// std::logic_error: a task spawned on the resource after the move would run in the new pool
  /// beside the one still running. nullptr, memory make_resource did not return and a retired
  /// resource are refused (std::invalid_argument, std::logic_error), as is an unknown worker
  /// (std::out_of_range).
  template <class T>
  void move_resource(T* object, worker_id w) {
    move(object == nullptr ? nullptr : detail::resource_header::of(object), w);
  }

  // ---- configuration and introspection -------------------------------------------------------
  unsigned workers() const noexcept;
  unsigned active_workers() const noexcept;
  /// Grows or shrinks the set of workers that run tasks (1 .. workers()) without losing tasks.
  void set_active_workers(unsigned n);
  /// The distance set (runtime_options::prefetch_distance, set_prefetch_distance); with
  /// adapt_prefetch_distance each worker starts from it and may run at another.
  unsigned prefetch_distance() const noexcept;
  /// Sets the distance; each worker takes it up within its next epoch_interval_tasks tasks (at
  /// once when idle) and adapts from there or not, as runtime_options::adapt_prefetch_distance
  /// says. Above max_prefetch_distance throws std::invalid_argument.
  void set_prefetch_distance(unsigned d);
  static constexpr unsigned max_prefetch_distance = 16;
  /// The OS CPU a worker runs on, and its NUMA node.
  unsigned cpu_of(worker_id w) const;
  numa_node_id node_of(worker_id w) const;
  /// Every worker is pinned to its CPU (false with pin = false, or if a pin was refused). Final
  /// once the constructor returned.
  bool pinned() const noexcept;
  runtime_statistics statistics() const;
  /// The worker this thread is, if it is one of this runtime's workers.
  std::optional<worker_id> current_worker() const noexcept;

  detail::scheduler& internals() noexcept { return *m_scheduler; }

 private:
  /// Defined for the library's own build switches only (detail::build_switches).
  runtime(runtime_options options, detail::build_switches);
  static void set_task_block(task* t, std::size_t bytes, bool validates_first, std::uint8_t block,
                             std::uint16_t destroyer) noexcept {
    // bytes is a multiple of 8 (a task holds a vtable pointer): bit 0 is free for the flag
    constexpr std::uint16_t validates_first_bit = detail::task_header::validates_first_bit;
    detail::hdr(t).m_bytes =
        static_cast<std::uint16_t>(bytes | (validates_first ? validates_first_bit : 0));
    detail::hdr(t).m_block = block;
    detail::hdr(t).m_destroyer = destroyer;
  }
  detail::resource_header* allocate_resource(std::size_t bytes, const resource_hints& hints);
  void free_resource(detail::resource_header* h) noexcept;
  void retire(detail::resource_header* h);
  void move(detail::resource_header* h, worker_id w);

  std::unique_ptr<detail::scheduler> m_scheduler;
  bool m_system_allocator = false;
};

/// Stops a runtime when it leaves scope (the runtime's destructor does the same; the guard is for
/// runtimes held by pointer or owned elsewhere).
class runtime_guard {
 public:
  explicit runtime_guard(runtime& rt) noexcept : m_rt(&rt) {}
  runtime_guard(const runtime_guard&) = delete;
  runtime_guard& operator=(const runtime_guard&) = delete;
  ~runtime_guard() { m_rt->stop(); }

 private:
  runtime* m_rt;
};

// ---- context inline members ------------------------------------------------------------------
template <task_type T, class... Args>
T* context::make_task(Args&&... args) {
  return m_runtime->make_task<T>(std::forward<Args>(args)...);
}
template <task_function F>
function_task<std::decay_t<F>>* context::make_task_from(F&& f) {
  return make_task<function_task<std::decay_t<F>>>(std::forward<F>(f));
}
template <task_function F>
void context::spawn(F&& f) {
  spawn(make_task_from(std::forward<F>(f)));
}
template <task_function F>
void context::when_done(group g, F&& continuation) {
  task* t = make_task_from(std::forward<F>(continuation));
  try {
    when_done(g, t);
  } catch (...) {
    m_runtime->discard(t);
    throw;
  }
}

}  // namespace tessera
