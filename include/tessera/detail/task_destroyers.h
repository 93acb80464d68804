// tessera/detail/task_destroyers.h — how the runtime runs the destructor of a finished task.
//
// task's destructor is not virtual. make_task<T> records in the task (task::m_destroyer) either 0,
// for a trivially destructible T (the common case: a task that holds pointers and numbers), so
// nothing is called when the task is done, or the index of a function that runs ~T(), registered
// once per type. The runtime then destroys a task with one test, and a call only when there is a
// destructor to run.
//
// Thread-safety: registration takes a mutex; an entry is written before the first task of its
// type is made, and a spawn orders that before the task's destruction on any worker, so the
// lookup is a plain load.
#pragma once

#include <cstdint>
#include <type_traits>

namespace tessera {
class task;
namespace detail {

using task_destroy_fn = void (*)(task*) noexcept;

/// Index 0 is unused (it means "nothing to run").
inline constexpr std::size_t max_task_destroyers = 65536;
extern task_destroy_fn task_destroyers[max_task_destroyers];

/// Registers `fn` and returns its index (>= 1). Aborts with a message once there are more than
/// max_task_destroyers - 1 task types with a non-trivial destructor.
std::uint16_t register_task_destroyer(task_destroy_fn fn);

/// What make_task<T> records in task::m_destroyer.
template <class T>
std::uint16_t destroyer_of() {
  if constexpr (std::is_trivially_destructible_v<T>) {
    return 0;
  } else {
    static const std::uint16_t index =
        register_task_destroyer([](task* t) noexcept { static_cast<T*>(t)->~T(); });
    return index;
  }
}

/// Runs the destructor of `t` if it has one to run.
inline void run_task_destructor(task* t, std::uint16_t destroyer) noexcept {
  if (destroyer != 0) task_destroyers[destroyer](t);
}

}  // namespace detail
}  // namespace tessera
