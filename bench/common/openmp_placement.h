// bench/common/openmp_placement.h — the OpenMP side of placement.h: before a timed region, each
// thread of a team of `threads` records its number in this_worker (worker_counters.h;
// omp_get_thread_num() is a call into libgomp) and with `pin` goes to the CPU of tessera's worker
// with that number. libgomp reuses the same threads, with the same numbers, for the next region
// of the same size; a thread that got another number would share a counter and lose counts, which
// the benchmarks' own checks report.
//
//   place_openmp_threads(threads, cfg.tessera.pin);   // untimed
//   stopwatch clock;
//   #pragma omp parallel num_threads(threads) ...     // the timed region, same team
#pragma once

#include <omp.h>

#include "common/placement.h"
#include "common/worker_counters.h"

namespace tessera::bench {

inline void place_openmp_threads(int threads, bool pin) {
#pragma omp parallel num_threads(threads)
  {
    this_worker = static_cast<unsigned>(omp_get_thread_num());
    if (pin) pin_worker_thread(this_worker);
  }
}

}  // namespace tessera::bench
