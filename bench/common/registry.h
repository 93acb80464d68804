// bench/common/registry.h — the subcommands of tessera-bench, their competitors, and what a
// running one is given.
//
// A benchmark is {name, one-line help, implementations, reference implementation, its own flags,
// run function}. Adding one takes one file that defines it and registers it with a static
// `registration`, plus that file (and its implementation files) in bench/CMakeLists.txt. Its
// implementations are an implementation_table: each name with the function that runs it, so
// that adding a competitor is one entry there (and its file):
//
//   measurement run_tessera(const config& cfg);   // one per competitor, in its own file
//   measurement run_std(const config& cfg);
//   const implementation_table<measurement (*)(const config&)> implementations{
//       {"tessera", run_tessera}, {"std", run_std}};
//   static void run(const run_context& ctx) {
//     for (unsigned w : ctx.workers)
//       for (const auto& impl : ctx.implementations)
//         ctx.report.add(row("example", impl, w, implementations.at(impl)(config_for(w))));
//   }
//   static const registration example_benchmark({.name = "example", .help = "one line",
//       .implementations = implementations.names(), .reference = "std",
//       .flags = {int_flag("keys", 1000, "number of keys", 1)}, .run = run});
//
// The driver (main.cpp) adds the flags every subcommand shares — --workers, --repeat, --json,
// --implementation — parses the command line, and calls `run` with the parsed values; `run`
// adds rows to ctx.report and throws bench_failure if an answer is wrong.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/flags.h"
#include "common/reporter.h"

namespace tessera::bench {

struct run_context;

struct benchmark_definition {
  std::string name;                          ///< the subcommand
  std::string help;                          ///< one line for `tessera-bench --help`
  std::vector<std::string> implementations;  ///< in the order they run and are listed
  std::string reference;                     ///< ratio column divides by this one's ops/s
  std::vector<flag_definition> flags;        ///< subcommand-specific flags
  void (*run)(const run_context& ctx) = nullptr;
  /// Optional, called before the command line is parsed and before any thread exists (alloc
  /// uses it to re-execute itself with a larger static TLS reserve for dlopen(jemalloc)).
  void (*prepare_process)(int argc, char** argv) = nullptr;
  /// The default of --repeat (long-running benchmarks take fewer).
  unsigned default_repeat = 3;
};

/// What a benchmark's run function is given.
struct run_context {
  const benchmark_definition& benchmark;
  const flag_values& flags;                  ///< every flag, shared ones included
  std::vector<unsigned> workers;             ///< --workers, in the order given
  unsigned repeat = 3;                       ///< --repeat; --statistic picks the run reported
  std::vector<std::string> implementations;  ///< --implementation, in definition order
  reporter& report;

  bool selected(std::string_view implementation) const;
  /// "<benchmark> <implementation> workers=<w> <details>" for progress lines.
  std::string label(std::string_view implementation, unsigned worker_count,
                    std::string_view details = {}) const;
};

/// A benchmark's implementations: each name with what runs it (a function pointer, or a struct
/// of them where a competitor needs more than one step), in the order they run and are listed.
/// A static table of one benchmark's file; its names() go into the benchmark_definition.
template <class Function>
class implementation_table {
 public:
  implementation_table(std::initializer_list<std::pair<std::string, Function>> entries)
      : m_entries(entries) {}

  [[nodiscard]] std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& entry : m_entries) out.push_back(entry.first);
    return out;
  }

  /// What runs `name`; a name not in the table is a programmer error (std::logic_error): the
  /// command line only lets through the names of the benchmark's definition.
  [[nodiscard]] const Function& at(std::string_view name) const {
    for (const auto& entry : m_entries)
      if (entry.first == name) return entry.second;
    throw std::logic_error("tessera-bench: no implementation named " + std::string(name));
  }

 private:
  std::vector<std::pair<std::string, Function>> m_entries;
};

/// All registered benchmarks, sorted by name.
std::vector<const benchmark_definition*> registered_benchmarks();
const benchmark_definition* find_benchmark(std::string_view name);

/// Registers a benchmark during static initialization (one per subcommand file).
class registration {
 public:
  explicit registration(benchmark_definition definition);
};

}  // namespace tessera::bench
