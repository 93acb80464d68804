// tessera/statistics.h — per-worker counters ([GeckoDB-pool] §III-F, docs/references.md).
//
// Counters are written only by their worker with relaxed stores (no read-modify-write) and read
// by any thread with relaxed loads, so a snapshot taken while the runtime runs is approximate;
// a snapshot taken after runtime::wait_idle() or stop() is exact. Timing counters (idle, parked)
// are compiled out when TESSERA_STATISTICS is off; task counters always exist because the
// runtime's quiescence detection uses them.
//
//   auto s = rt.statistics();
//   std::cout << s.to_string();            // one line per worker and a total
//   std::uint64_t n = s.total().executed;
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tessera {

struct worker_statistics {
  std::uint64_t executed = 0;        ///< task executions that completed (retries not counted)
  std::uint64_t spawned_local = 0;   ///< spawns into a pool this worker owned
  std::uint64_t spawned_remote = 0;  ///< spawns into another worker's pool
  std::uint64_t optimistic_retries = 0;    ///< optimistic runs that failed validation
  std::uint64_t optimistic_fallbacks = 0;  ///< reads run excluding writers after 8 torn tries
  std::uint64_t prefetches = 0;        ///< prefetches issued: data lines and resource headers
  std::uint64_t pools_stolen = 0;      ///< whole pools this worker took from others
  /// single tasks (no placement target, not serialized by a pool) handed to thieves
  std::uint64_t tasks_stolen = 0;
  std::uint64_t exceptions = 0;        ///< tasks whose execute threw
  std::uint64_t cancelled = 0;         ///< tasks of a cancelled group dropped without running
  std::uint64_t peers_woken = 0;       ///< parked workers this one woke to take its queued work
  std::uint64_t steal_walk_steps = 0;  ///< queued tasks looked at while answering thieves
  std::uint64_t steal_requests = 0;    ///< requests for work this worker posted as a thief
  std::uint64_t steal_answers_empty = 0;  ///< thieves' requests this worker answered with nothing
  std::uint64_t idle_ns = 0;           ///< time spent spinning for work (after a ~1 µs poll)
  std::uint64_t parked_ns = 0;         ///< time spent asleep
  /// The step-mode and prefetch-distance sampler (runtime_options::adapt_prefetch_distance,
  /// docs/architecture.md "How a traversal steps"): probes run (a probe that won runs a second
  /// time, counted again), and the changes taken (a probe that won both times).
  std::uint64_t step_probes = 0;
  std::uint64_t step_changes = 0;
  /// The prefetch distance this worker uses at the snapshot (the sampler's, or as set). Not a
  /// count: in total() and operator+=, the larger of the two.
  std::uint64_t prefetch_distance = 0;

  worker_statistics& operator+=(const worker_statistics& o) noexcept;
};

struct runtime_statistics {
  std::vector<worker_statistics> workers;
  std::uint64_t spawned_external = 0;  ///< spawns from threads that are not workers

  worker_statistics total() const noexcept;
  std::string to_string() const;
};

}  // namespace tessera
