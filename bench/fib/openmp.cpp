// fib on OpenMP tasks: `#pragma omp task` for both calls and `taskwait`, in a parallel region of
// `workers` threads started by one `single` thread.
#include <omp.h>

#include <cstdint>

#include "common/openmp_placement.h"
#include "fib/fib.h"

namespace tessera::bench::fib {

namespace {

std::uint64_t fib(int n) {
  if (n < 2) return static_cast<std::uint64_t>(n);
  std::uint64_t a = 0, b = 0;
#pragma omp task shared(a)
  a = fib(n - 1);
#pragma omp task shared(b)
  b = fib(n - 2);
#pragma omp taskwait
  return a + b;
}

}  // namespace

measurement run_openmp(const config& cfg) {
  omp_set_dynamic(0);
  const int threads = static_cast<int>(cfg.workers);
  const saved_cpu_mask caller;  // OpenMP's thread 0 (this one) is pinned during the runs only
  return measure(cfg.label, cfg.repeat, [&] {
    std::uint64_t result = 0;
    place_openmp_threads(threads, cfg.tessera.pin);  // thread i on tessera's CPU of worker i
    stopwatch clock;
#pragma omp parallel num_threads(threads) shared(result)
#pragma omp single
    result = fib(cfg.n);
    const double seconds = clock.seconds();
    return checked("openmp", cfg.n, result, seconds);
  });
}

}  // namespace tessera::bench::fib
