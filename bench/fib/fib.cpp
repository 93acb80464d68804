// The `fib` subcommand: registration, flags, and the loop over configurations.
#include "fib/fib.h"

#include <string>
#include <vector>

#include "common/registry.h"

namespace tessera::bench::fib {

std::uint64_t expected(int n) noexcept {
  std::uint64_t a = 0, b = 1;
  for (int i = 0; i < n; ++i) {
    const std::uint64_t next = a + b;
    a = b;
    b = next;
  }
  return a;
}

std::uint64_t calls(int n) noexcept { return 2 * expected(n + 1) - 1; }

sample checked(const char* implementation, int n, std::uint64_t result, double seconds) {
  if (result != expected(n))
    throw bench_failure(std::string(implementation) + " computed fib(" + std::to_string(n) +
                        ") = " + std::to_string(result) + ", expected " +
                        std::to_string(expected(n)));
  return sample{.ops = calls(n), .seconds = seconds};
}

namespace {

/// The competitors, in the order they run and are listed (each in its own file).
const implementation_table<measurement (*)(const config&)> implementations{
    {"tessera", run_tessera}, {"onetbb", run_onetbb}, {"openmp", run_openmp}, {"pool", run_pool}};

void run(const run_context& ctx) {
  const int n = static_cast<int>(ctx.flags.integer("n"));
  for (const unsigned w : ctx.workers) {
    // The implementations take turns run by run.
    const auto& impls = ctx.implementations;
    const std::vector<measurement> results = measure_in_turns(impls, [&](const std::string& impl) {
      const config cfg{.workers = w,
                       .n = n,
                       .repeat = ctx.repeat,
                       .label = ctx.label(impl, w, "n=" + std::to_string(n)),
                       .tessera = tessera_settings::from(ctx.flags)};
      return implementations.at(impl)(cfg);
    });
    for (std::size_t i = 0; i < impls.size(); ++i)
      ctx.report.add(row("fib", impls[i], w, results[i]).with("n", n));
  }
}

const registration fib_benchmark({
    .name = "fib",
    .help = "fib(n) with one task per call (no cutoff): task spawn + join overhead",
    .implementations = implementations.names(),
    .reference = "onetbb",
    .flags = tessera_settings::add_flags(
        {int_flag("n", 30, "compute fib(n); ops = 2*fib(n+1)-1 calls, each a task", 0, 50)}),
    .run = run,
});

}  // namespace

}  // namespace tessera::bench::fib
