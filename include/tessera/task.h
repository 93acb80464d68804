// tessera/task.h — the unit of work: a small run-to-completion object with annotations.
//
// A task is a user type deriving from tessera::task with an `execute` method. It is allocated
// through the runtime (runtime::make_task), annotated with what it touches and where it should
// run, and spawned. It never blocks: to continue later it returns a follow-up (itself,
// re-annotated, e.g. for the next tree node, or another task), which costs no allocation.
//
//   struct hello final : tessera::task {
//     tessera::task* execute(tessera::context&) override { std::puts("hi"); return nullptr; }
//   };
//   auto* t = rt.make_task<hello>();
//   t->annotate(tessera::priority::high);
//   rt.spawn(t);
//
// Invariants: a task is owned by the runtime from spawn until execute returns something other
// than `this`; then it is destroyed and its memory reused. A task is executed by one worker at a
// time. Under optimistic reading (see resource.h) a task may be executed more than once: the
// runtime restores its bytes to the state they had when it was dequeued before each retry, so
// execute must not act outside the task (spawn, write shared memory, call back) before
// context::validate() returned true, and must not keep owning pointers that execute changes.
// That copy costs a few nanoseconds per read; a task type that validates before it changes
// anything, itself included, can say so (`validates_first`, below) and the runtime takes none.
//
// Destruction: task's destructor is protected and not virtual. The runtime runs the destructor
// of the type make_task created (registered once per type), and for a trivially destructible
// type (pointers and numbers only, the common case) runs nothing at all. Mark task types `final`
// (a non-final one with a public destructor draws GCC's -Wnon-virtual-dtor, rightly: nobody may
// delete a task through a base pointer).
#pragma once

#include <atomic>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "tessera/group.h"
#include "tessera/ids.h"
#include "tessera/resource.h"

namespace tessera {

class context;
class runtime;
class task;
namespace detail {
struct task_access;
}  // namespace detail

namespace detail {
/// Throws std::logic_error: a spawned task's group was changed (task::annotate(group), debug
/// checks only).
[[noreturn]] void group_changed_after_spawn();

/// The runtime's part of every task: queue link, annotations, allocator and epoch bookkeeping.
/// Plain data; the runtime reaches it through task_access (tessera/detail/task_access.h), the
/// one friend it has besides `task`, which reads and writes the annotations.
struct task_header {
  enum : std::uint8_t { target_none = 0, target_worker = 1, target_node = 2 };
  static constexpr std::uint8_t unspawned_slot = 0xFF;
  static constexpr std::uint16_t validates_first_bit = 1;
  static constexpr std::uint32_t saturate(std::size_t bytes) noexcept {
    return bytes > UINT32_MAX ? UINT32_MAX : static_cast<std::uint32_t>(bytes);
  }

  std::atomic<tessera::task*> m_next{nullptr};  // queue link, owned by the queue holding the task
  const void* m_data = nullptr;
  group m_group{};
  std::uint32_t m_data_size = 0;  // saturated at 4 GiB - 1: only the first KiB is prefetched
  std::uint16_t m_target = 0;
  // sizeof the most derived type, a multiple of 8 (the vtable pointer), for the copy an
  // optimistic read restores the task from; bit 0: the type validates first (no copy).
  std::uint16_t m_bytes = 0;
  std::uint8_t m_priority = static_cast<std::uint8_t>(priority::normal);
  std::uint8_t m_access = 0;
  std::uint8_t m_is_resource = 0;
  std::uint8_t m_target_kind = target_none;
  std::uint8_t m_block = 0;  // the allocator's size class of the block, or new_block
  // reclamation epoch the task's operation started in (0..3); with debug checks,
  // unspawned_slot until the task is spawned, so that a second spawn is caught
#if defined(TESSERA_DEBUG_CHECKS)
  std::uint8_t m_epoch_slot = unspawned_slot;
#else
  std::uint8_t m_epoch_slot = 0;
#endif
  std::uint16_t m_destroyer = 0;  // 0: trivially destructible, else see task_destroyers.h
};

/// A separate, non-polymorphic base holding the header, so that `task` itself has no friends:
/// its destructor is protected and not virtual, and a friend would make it "accessible" (GCC's
/// -Wnon-virtual-dtor would then warn on every final task type a user writes).
class task_state {
 protected:
  task_state() = default;
  ~task_state() = default;

 private:
  friend class tessera::task;
  friend struct task_access;
  task_header m_header;
};
}  // namespace detail

class task : public detail::task_state {
 public:
  task() = default;
  task(const task&) = delete;
  task& operator=(const task&) = delete;

  /// Runs the task. Returns nullptr when done, `this` to be scheduled again (after changing the
  /// annotations), or another task to be scheduled in its place (this one is then destroyed).
  /// A follow-up with a data annotation is queued like a spawn, so its data is prefetched while
  /// other tasks run. One without data, of normal priority and placed nowhere else, runs next on
  /// this worker without a queue round-trip (scheduler bypass), unless a more urgent task is
  /// queued or waits in the prefetch window (one of high or low priority is queued at the back of
  /// its priority's queue, like a spawn); after 64 such
  /// follow-ups in a row (each returned by the one before) the next is queued at the back, so a
  /// task that keeps returning itself, or a new task, cannot starve the others. (A task that
  /// polls by spawning a fresh copy of itself each time instead can: a spawned child without
  /// data runs next, before anything queued. Poll by returning `this`.)
  virtual task* execute(context& ctx) = 0;

  // ---- annotations ---------------------------------------------------------------------------
  task& annotate(priority p) noexcept {
    m_header.m_priority = static_cast<std::uint8_t>(p);
    return *this;
  }
  /// Run on this worker. Wins over every other placement rule but one: a task on a resource
  /// serialized by scheduling (primitive::scheduling, or a writer under optimistic_scheduled)
  /// runs in that resource's pool, wherever that is. An id beyond the runtime's workers wraps
  /// around (w % workers), so code that partitions by worker runs unchanged on a smaller
  /// runtime. While worker w is inactive (runtime::set_active_workers), a task targeted at it
  /// runs on the active worker that holds w's pools.
  task& annotate(worker_id w) noexcept {
    m_header.m_target_kind = detail::task_header::target_worker;
    m_header.m_target = w.value;
    return *this;
  }
  /// Run on some worker of this NUMA node; a node without workers (or no such node) places the
  /// task as if it had no target. The task goes to the pools of one of the node's workers; after
  /// set_active_workers shrank the runtime, an inactive worker's pools are held by an active
  /// worker that may be on another node.
  task& annotate(numa_node_id n) noexcept {
    m_header.m_target_kind = detail::task_header::target_node;
    m_header.m_target = n.value;
    return *this;
  }
  /// Bind to a group (see group.h); children spawned by this task join the same group. Before
  /// the spawn only: from its spawn on a task counts in its group until it is done, also when it
  /// returns itself. To go on in another group, return (or spawn) a new task annotated with it.
  /// With TESSERA_DEBUG_CHECKS, changing a spawned task's group throws std::logic_error (from
  /// execute, it reaches the task's group's waiter); without, the counts of both groups go wrong
  /// and a wait may never return.
#if defined(TESSERA_DEBUG_CHECKS)
  task& annotate(group g) {
    if (g != m_header.m_group &&
        m_header.m_epoch_slot != detail::task_header::unspawned_slot) [[unlikely]]
      detail::group_changed_after_spawn();
    m_header.m_group = g;
    return *this;
  }
#else
  task& annotate(group g) noexcept {
    m_header.m_group = g;
    return *this;
  }
#endif
  /// The task touches `bytes` bytes of the resource `object` (created by make_resource) with
  /// `mode`. The runtime synchronizes the task with the resource's primitive and prefetches the
  /// header line and the bytes. Any other memory is an error (std::logic_error at the spawn with
  /// debug checks, undefined without): use annotate_data for it.
  template <class T>
  task& annotate_resource(T* object, access mode, std::size_t bytes = sizeof(T)) noexcept {
    m_header.m_data = object;
    m_header.m_data_size = detail::task_header::saturate(bytes);
    m_header.m_access = static_cast<std::uint8_t>(mode);
    m_header.m_is_resource = 1;
    return *this;
  }
  /// The task touches `bytes` bytes at `data` (any memory): prefetched, not synchronized.
  task& annotate_data(const void* data, std::size_t bytes, access mode = access::read) noexcept {
    m_header.m_data = data;
    m_header.m_data_size = detail::task_header::saturate(bytes);
    m_header.m_access = static_cast<std::uint8_t>(mode);
    m_header.m_is_resource = 0;
    return *this;
  }
  /// Drops the data annotation and the placement target (priority and group stay).
  task& clear_annotations() noexcept {
    m_header.m_data = nullptr;
    m_header.m_data_size = 0;
    m_header.m_is_resource = 0;
    m_header.m_target_kind = detail::task_header::target_none;
    return *this;
  }

  // ---- read back -----------------------------------------------------------------------------
  enum priority priority() const noexcept {
    return static_cast<enum priority>(m_header.m_priority);
  }
  const void* data() const noexcept { return m_header.m_data; }
  std::size_t data_size() const noexcept { return m_header.m_data_size; }
  access mode() const noexcept { return static_cast<access>(m_header.m_access); }
  bool has_resource() const noexcept { return m_header.m_is_resource != 0; }
  group task_group() const noexcept { return m_header.m_group; }

 protected:
  /// Not virtual, and not public: the runtime owns every task it made and destroys it through
  /// what make_task recorded of its type (nothing to call for a trivially destructible type, see
  /// detail/task_destroyers.h). A task that was made but never spawned goes back through
  /// runtime::discard.
  ~task() = default;
};

/// A type the runtime can allocate and run as a task.
template <class T>
concept task_type = std::derived_from<T, task> && !std::is_abstract_v<T>;

/// A task type may declare `static constexpr bool validates_first = true;`. It promises that
/// under optimistic reading its execute changes nothing of the task (its fields, its
/// annotations) before context::validate() returned true, as it already may not act outside
/// before then, and returns at once when validate() returns false: read, validate, then change,
/// as in optimistic lock coupling. The runtime then reruns a failed read as the task is, without
/// the copy it takes of every other task before an optimistic read. With TESSERA_DEBUG_CHECKS
/// the copy is taken anyway and compared (at the first validate() and at the end of a run that
/// did not validate): a task that changed first fails with std::logic_error, delivered like an
/// exception it threw.
///
///   class lookup final : public tessera::task {
///    public:
///     static constexpr bool validates_first = true;
///     tessera::task* execute(tessera::context& ctx) override {
///       node* next = child_for(*m_node, m_key);  // reads only
///       if (!ctx.validate()) return nullptr;     // torn: rerun as is
///       m_node = next;                           // now change
///       annotate_resource(next, tessera::access::read);
///       return this;
///     }
///     ...
///   };
template <class T>
inline constexpr bool validates_first_v = requires {
  requires T::validates_first;
};

/// Callables accepted by runtime::spawn(F): `void(context&)` or `task*(context&)`.
template <class F>
concept task_function = std::invocable<F&, context&> &&
    (std::is_void_v<std::invoke_result_t<F&, context&>> ||
     std::convertible_to<std::invoke_result_t<F&, context&>, task*>);

/// Wraps a callable as a task (what runtime::spawn(F) allocates).
template <task_function F>
class function_task final : public task {
 public:
  explicit function_task(F f) : m_f(std::move(f)) {}
  task* execute(context& ctx) override {
    if constexpr (std::is_void_v<std::invoke_result_t<F&, context&>>) {
      m_f(ctx);
      return nullptr;
    } else {
      return m_f(ctx);
    }
  }

 private:
  F m_f;
};

}  // namespace tessera
