// bench/spawn/spawn.h — throughput of empty tasks: spawn + schedule + run + free, nothing else.
//
// Four shapes, each exactly `tasks` task executions:
//   chain       one chain per worker; each task spawns the next, which stays on its worker (no
//               placement: every implementation does the same user work, count + spawn)
//   tree        a binary fan-out tree in heap order: task i spawns 2i+1 and 2i+2 while < tasks
//   roundrobin  one chain per worker; each task spawns the next on worker (self+1) % workers
//   followup    one task per worker that returns itself as its own follow-up, tasks/W times in
//               all: each run is one task execution with no allocation and no spawn
// Every task bumps its worker's counter (common/worker_counters.h); the sum must equal `tasks`
// before a time is kept. roundrobin needs placement and followup a task that hands back its
// successor, which only tessera has.
//
//   spawn::config cfg{.workers = 2, .tasks = 1'000'000, .shape = spawn::pattern::tree};
//   measurement m = spawn::run_tessera(cfg);
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/tessera_settings.h"
#include "common/timing.h"

namespace tessera::bench::spawn {

enum class pattern : std::uint8_t { chain, tree, roundrobin, followup };

std::string_view to_string(pattern p) noexcept;

struct config {
  unsigned workers = 1;
  std::uint64_t tasks = 1;
  pattern shape = pattern::chain;
  unsigned repeat = 3;
  std::string label;
  tessera_settings tessera;  ///< pin: every implementation (common/placement.h); the rest: tessera
};

/// Tasks in chain `c` of `chains`: tasks / chains, one more for the first tasks % chains chains.
inline std::uint64_t chain_length(std::uint64_t tasks, unsigned chains, unsigned c) noexcept {
  return tasks / chains + (c < tasks % chains ? 1 : 0);
}

/// sample{tasks, seconds}, or bench_failure if `executed` != cfg.tasks.
sample checked(const char* implementation, const config& cfg, std::uint64_t executed,
               double seconds);

measurement run_tessera(const config& cfg);
/// chain and tree only.
measurement run_onetbb(const config& cfg);
measurement run_openmp(const config& cfg);
measurement run_pool(const config& cfg);

}  // namespace tessera::bench::spawn
