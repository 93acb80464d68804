// spawn on OpenMP tasks: chain tasks create their successor with `omp task`, tree tasks create
// both children; the barrier at the end of the parallel region waits for all of them.
#include <omp.h>

#include <cstdint>

#include "common/openmp_placement.h"
#include "common/worker_counters.h"
#include "spawn/spawn.h"

namespace tessera::bench::spawn {

namespace {

void link(worker_counters* counts, std::uint64_t remaining) {
  counts->add(this_worker);
  if (remaining > 1) {
#pragma omp task
    link(counts, remaining - 1);
  }
}

void node(worker_counters* counts, std::uint64_t index, std::uint64_t tasks) {
  counts->add(this_worker);
  const std::uint64_t left = 2 * index + 1;
  if (left < tasks) {
#pragma omp task
    node(counts, left, tasks);
  }
  if (left + 1 < tasks) {
#pragma omp task
    node(counts, left + 1, tasks);
  }
}

}  // namespace

measurement run_openmp(const config& cfg) {
  omp_set_dynamic(0);
  const int threads = static_cast<int>(cfg.workers);
  const saved_cpu_mask caller;  // OpenMP's thread 0 (this one) is pinned during the runs only
  worker_counters counts(cfg.workers);
  return measure(cfg.label, cfg.repeat, [&] {
    counts.reset();
    worker_counters* c = &counts;
    const std::uint64_t tasks = cfg.tasks;
    const bool tree = cfg.shape == pattern::tree;
    const unsigned chains = cfg.workers;
    place_openmp_threads(threads, cfg.tessera.pin);  // this_worker, and --pin
    stopwatch clock;
#pragma omp parallel num_threads(threads)
#pragma omp single
    {
      if (tree) {
#pragma omp task
        node(c, 0, tasks);
      } else {
        for (unsigned i = 0; i < chains; ++i) {
          const std::uint64_t length = chain_length(tasks, chains, i);
          if (length > 0) {
#pragma omp task
            link(c, length);
          }
        }
      }
    }
    const double seconds = clock.seconds();
    return checked("openmp", cfg, counts.total(), seconds);
  });
}

}  // namespace tessera::bench::spawn
