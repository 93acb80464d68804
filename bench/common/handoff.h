// bench/common/handoff.h — how long one CPU takes to hand a cache line to another: the floor
// under every figure that crosses workers (a spawn onto another worker, a steal, a shared
// counter, a batch handed out).
//
// On a VM that floor is not fixed. On the 2-core AMD VM our figures come from it was 27 ns one
// way for minutes, then 160 ns for minutes (the host had moved a virtual CPU), and the spawn
// benchmark's round-robin at 2 workers went from 200 to 780 ns per task with it. tessera-bench
// measures it before and after a run and prints it under the table, so that a figure at 2 or
// more workers can be read against it.
//
//   std::optional<double> ns = handoff_ns(0, 1);  // nullopt: a thread could not be pinned
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>

namespace tessera::bench {

struct handoff_limits {
  std::uint64_t round_trips = 100'000;    ///< at most, per block of the three
  std::chrono::milliseconds budget{20};  ///< at most, for all three blocks (checked in waits too)
};

/// The one-way latency, in nanoseconds, of a cache line bouncing between a thread pinned to
/// `cpu_a` and one pinned to `cpu_b`: the fastest of three blocks of round trips. nullopt if
/// either thread could not be pinned. Returns within about the budget plus a scheduler time
/// slice even when both CPUs are the same one or busy (a hop is then a context switch). Uses
/// two threads of its own; the caller's affinity is left alone. Throws std::system_error only if
/// not even the first of them can be started.
std::optional<double> handoff_ns(unsigned cpu_a, unsigned cpu_b, handoff_limits limits = {});

}  // namespace tessera::bench
