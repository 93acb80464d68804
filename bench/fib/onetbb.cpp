// fib on oneTBB: the textbook recursive tbb::task_group, both calls run as tasks, inside a
// tbb::task_arena of `workers` slots (the calling thread takes one of them).
#include <tbb/global_control.h>
#include <tbb/task_arena.h>
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
  tbb::global_control limit(tbb::global_control::max_allowed_parallelism, cfg.workers);
  tbb::task_arena arena(static_cast<int>(cfg.workers));
  const onetbb_placement place(arena, cfg.tessera.pin);  // slot i on tessera's CPU of worker i
  return measure(cfg.label, cfg.repeat, [&] {
    std::uint64_t result = 0;
    stopwatch clock;
    arena.execute([&] { result = fib(cfg.n); });
    const double seconds = clock.seconds();
    return checked("onetbb", cfg.n, result, seconds);
  });
}

}  // namespace tessera::bench::fib
