// bench/fib/fib.h — fib(n) with one task per call, no cutoff, in four task systems.
//
// Each implementation computes the naive recursion fib(n) = fib(n-1) + fib(n-2), fib(0)=0,
// fib(1)=1, making every call a task: ops = calls(n) = 2·fib(n+1) − 1. Runtimes are created
// once per configuration, outside the timed part; each run's result is checked against the
// closed loop before its time is kept.
//
//   fib::config cfg{.workers = 2, .n = 30, .repeat = 3, .label = "fib tessera workers=2"};
//   measurement m = fib::run_onetbb(cfg);     // throws bench_failure on a wrong result
//   report.add(row("fib", "onetbb", 2, m).with("n", 30));
#pragma once

#include <cstdint>
#include <string>

#include "common/tessera_settings.h"
#include "common/timing.h"

namespace tessera::bench::fib {

struct config {
  unsigned workers = 1;
  int n = 30;
  unsigned repeat = 3;
  std::string label;         ///< for progress lines
  tessera_settings tessera;  ///< pin: every implementation (common/placement.h); the rest: tessera
};

/// fib(n), computed with a loop.
std::uint64_t expected(int n) noexcept;
/// Number of calls of the naive recursion for fib(n).
std::uint64_t calls(int n) noexcept;
/// sample{calls(n), seconds}, or bench_failure if `result` is not fib(n).
sample checked(const char* implementation, int n, std::uint64_t result, double seconds);

measurement run_tessera(const config& cfg);
measurement run_onetbb(const config& cfg);
measurement run_openmp(const config& cfg);
measurement run_pool(const config& cfg);

}  // namespace tessera::bench::fib
