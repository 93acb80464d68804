// The `loop` subcommand: registration, flags, the expected result, and the loop over
// configurations.
#include "loop/loop.h"

#include <string>
#include <vector>

#include "common/registry.h"

namespace tessera::bench::loop {

data::data(std::size_t elements, unsigned passes) : in(elements), expected(elements), loops(passes) {
  for (std::size_t i = 0; i < elements; ++i) in[i] = static_cast<std::uint32_t>(i * 7 + 3);
  for (std::size_t i = 0; i < elements; ++i) {
    std::uint32_t v = 0;
    for (unsigned k = 0; k < passes; ++k) {
      v = pass_update(v, in[i], k);
      expected_sum += sum_term(in[i], k);
    }
    expected[i] = v;
  }
}

std::vector<std::uint32_t> fresh_output(const config& cfg) {
  return std::vector<std::uint32_t>(cfg.elements, 0u);
}

sample checked(const char* implementation, const config& cfg, const std::vector<std::uint32_t>& out,
               double seconds) {
  const auto& want = cfg.input->expected;
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (out[i] != want[i])
      throw bench_failure(std::string(implementation) + ": element " + std::to_string(i) +
                          " holds " + std::to_string(out[i]) + " after " +
                          std::to_string(cfg.loops) + " loops, expected " +
                          std::to_string(want[i]));
  }
  return sample{.ops = static_cast<std::uint64_t>(cfg.elements) * cfg.loops, .seconds = seconds};
}

sample checked_sum(const char* implementation, const config& cfg, std::uint64_t total,
                   double seconds) {
  if (total != cfg.input->expected_sum)
    throw bench_failure(std::string(implementation) + ": " + std::to_string(cfg.loops) +
                        " sums add up to " + std::to_string(total) + ", expected " +
                        std::to_string(cfg.input->expected_sum));
  return sample{.ops = static_cast<std::uint64_t>(cfg.elements) * cfg.loops, .seconds = seconds};
}

namespace {

/// The competitors, in the order they run and are listed (each in its own file).
const implementation_table<measurement (*)(const config&)> implementations{
    {"tessera", run_tessera},
    {"tessera-task", run_tessera_task},
    {"onetbb", run_onetbb},
    {"openmp", run_openmp}};

void run(const run_context& ctx) {
  const auto elements = static_cast<std::size_t>(ctx.flags.integer("elements"));
  const auto loops = static_cast<unsigned>(ctx.flags.integer("loops"));
  const data input(elements, loops);
  for (const std::string& op_name : ctx.flags.list("operation")) {
    const operation op = op_name == "sum" ? operation::sum : operation::update;
    const std::string details = "operation=" + op_name + " elements=" + std::to_string(elements) +
                                " loops=" + std::to_string(loops);
    for (const unsigned w : ctx.workers) {
      // The implementations take turns run by run.
      const auto& impls = ctx.implementations;
      const std::vector<measurement> results =
          measure_in_turns(impls, [&](const std::string& impl) {
            const config cfg{.workers = w,
                             .elements = elements,
                             .loops = loops,
                             .op = op,
                             .grain = static_cast<std::size_t>(ctx.flags.integer("grain")),
                             .repeat = ctx.repeat,
                             .label = ctx.label(impl, w, details),
                             .tessera = tessera_settings::from(ctx.flags),
                             .input = &input};
            return implementations.at(impl)(cfg);
          });
      for (std::size_t i = 0; i < impls.size(); ++i) {
        ctx.report.add(row("loop", impls[i], w, results[i])
                           .with("operation", op_name)
                           .with("elements", static_cast<std::int64_t>(elements))
                           .with("loops", static_cast<std::int64_t>(loops)));
      }
    }
  }
}

const registration loop_benchmark({
    .name = "loop",
    .help = "parallel loops over an array (parallel_for, parallel_reduce): per-element cost and "
            "per-loop overhead",
    .implementations = implementations.names(),
    .reference = "onetbb",
    .flags = tessera_settings::add_flags(
        {choice_list_flag("operation", "all", {"update", "sum"},
                          "update: out[i] = f(out[i], in[i]) (parallel_for); sum: a 64-bit sum "
                          "of f(in[i]) (parallel_reduce)"),
         int_flag("elements", 10'000'000, "32-bit elements per loop", 1, 1'000'000'000),
         int_flag("loops", 10, "loops per run, back to back; ops = elements x loops", 1,
                  1'000'000),
         int_flag("grain", 0,
                  "tessera: most elements per piece (0: its default, about 16 pieces per worker)",
                  0, 1'000'000'000)}),
    .run = run,
});

}  // namespace

}  // namespace tessera::bench::loop
