// fib on oneTBB: the textbook recursive tbb::task_group, both calls run as tasks, inside a
// tbb::task_arena of `workers` slots (the calling thread takes one of them).
#include <tbb/task_group.h>

#include <cstdint>

#include "common/onetbb_placement.h"

#include "fib/fib.h"

namespace tessera::bench::fib {

namespace {

std::uint64_t fib(int n) {
  if (n < 2) return static_cast<std::uint64_t>(n);
  std::uint64_t a = 0, b = 0;
  tbb::task_group tg;
  tg.run([&] { a = fib(n - 1); });
  tg.run([&] { b = fib(n - 2); });
  tg.wait();
  return a + b;
}

}  // namespace

measurement run_onetbb(const config& cfg) {
  onetbb_arena arena(cfg.workers, cfg.tessera.pin);  // this_worker = slot; --pin
  return measure(cfg.label, cfg.repeat, [&] {
    std::uint64_t result = 0;
    stopwatch clock;
    arena.execute([&] { result = fib(cfg.n); });
    const double seconds = clock.seconds();
    return checked("onetbb", cfg.n, result, seconds);
  });
}

}  // namespace tessera::bench::fib
