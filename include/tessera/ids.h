// tessera/ids.h — small value types shared by the whole API.
//
// Worker ids and NUMA node ids are distinct types so that a call such as
// `t->annotate(worker_id{3})` can never be confused with `t->annotate(numa_node_id{3})`
// (the original MxTasking overloaded uint16_t/uint8_t and silently picked the wrong one).
//
//   auto* t = rt.make_task<my_task>();
//   t->annotate(tessera::worker_id{1}).annotate(tessera::priority::high);
//   rt.spawn(t);
#pragma once

#include <compare>
#include <cstdint>

namespace tessera {

/// Index of a worker thread, 0 .. runtime::workers()-1.
struct worker_id {
  std::uint16_t value = 0;
  constexpr explicit worker_id(std::uint16_t v) : value(v) {}
  constexpr worker_id() = default;
  friend constexpr auto operator<=>(worker_id, worker_id) = default;
};

/// A NUMA node as numbered by the operating system (libnuma / hwloc OS index).
struct numa_node_id {
  std::uint16_t value = 0;
  constexpr explicit numa_node_id(std::uint16_t v) : value(v) {}
  constexpr numa_node_id() = default;
  friend constexpr auto operator<=>(numa_node_id, numa_node_id) = default;
};

/// Scheduling priority. A worker picks a task of a higher priority before one of a lower
/// priority among those in its queues. Bounded exceptions: a task that arrives from another
/// thread waits in an inbox until the worker next looks (every `epoch_interval_tasks` tasks, or
/// at once when its queues run dry); and the tasks already taken
/// into the prefetch window (up to prefetch_distance + 1, the distance in force when they were
/// taken: lowering it does not put tasks back) run first.
enum class priority : std::uint8_t { high = 0, normal = 1, low = 2 };
inline constexpr unsigned priority_count = 3;

/// How a task touches the data object it names.
enum class access : std::uint8_t { read = 0, write = 1 };

}  // namespace tessera
