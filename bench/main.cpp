// tessera-bench: `tessera-bench <subcommand> [flags]`. Dispatches to the registered benchmarks
// (bench/common/registry.h), prints their table on stdout and appends their JSON lines to --json.
// Exit status: 0 success, 1 a benchmark failed (wrong answer, error), 2 bad command line.
#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <limits>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "common/flags.h"
#include "common/handoff.h"
#include "common/onetbb_workers.h"
#include "common/placement.h"
#include "common/registry.h"
#include "common/reporter.h"
#include "common/timing.h"
#include "tessera/runtime.h"

namespace bench = tessera::bench;

namespace {

unsigned usable_cpus() {
  const auto n = static_cast<unsigned>(tessera::default_worker_cpus().size());
  return n > 0 ? n : 1;
}

/// 1,2,4,... up to the CPUs this process may use (at least up to 2), and that count itself.
std::string default_workers() {
  const unsigned cpus = usable_cpus();
  std::string out;
  unsigned w = 1;
  for (; w <= std::max(cpus, 2u); w *= 2) {
    if (!out.empty()) out += ',';
    out += std::to_string(w);
  }
  if (cpus > 2 && w / 2 != cpus) {
    out += ',';
    out += std::to_string(cpus);
  }
  return out;
}

/// At most this many workers: 1,024 on 2 CPUs ran a small YCSB in 0.6 s, 4,096 did not finish in
/// 300 s (idle workers that look for work walk every other worker).
constexpr std::uint64_t max_workers = 1024;

std::vector<bench::flag_definition> shared_flags(const bench::benchmark_definition& b,
                                                const std::string& workers) {
  return {
      bench::uint_list_flag("workers", workers,
                            "comma-separated worker counts, each measured separately", 1,
                            max_workers),
      bench::int_flag("repeat", b.default_repeat, "runs per configuration", 1, 1000000),
      bench::choice_flag("statistic", "median", {"median", "best"},
                         "which run is reported: the median, or the fastest (noisy machines)"),
      bench::choice_list_flag("implementation", "all", b.implementations, "implementations to run"),
      bench::string_flag("json", "", "append one JSON object per result row to FILE", "FILE"),
      bench::string_flag("trace", "",
                         "write a timeline of tessera's workers to FILE (Chrome trace-event "
                         "JSON for ui.perfetto.dev; every tessera runtime of the run)",
                         "FILE"),
  };
}

/// One subcommand per registered benchmark, with the benchmark's own flags, then the shared ones.
void declare_subcommands(bench::command_line& cli) {
  const std::string workers = default_workers();
  for (const auto* b : bench::registered_benchmarks()) {
    std::string implementations;
    for (const auto& name : b->implementations)
      implementations += (implementations.empty() ? "" : ", ") + name;
    const std::vector<bench::flag_section> sections{
        {"Options", b->flags}, {"Flags every subcommand takes", shared_flags(*b, workers)}};
    cli.add_subcommand(b->name, b->help,
                       "implementations: " + implementations +
                           (b->reference.empty() ? "" : " (ratios against " + b->reference + ")"),
                       sections);
  }
  cli.set_footer(
      "tessera-bench <subcommand> --help lists the subcommand's flags with their defaults.\n"
      "Flags every subcommand takes:\n"
      "  --workers LIST          worker counts to measure (default: " + workers + ")\n"
      "  --repeat N              runs per configuration (default: 3; ycsb: 1)\n"
      "  --statistic median|best the run reported: median (default) or fastest\n"
      "  --implementation LIST   subset of the subcommand's implementations (default: all)\n"
      "  --json FILE             append one JSON object per result row\n"
      "  --trace FILE            timeline of tessera's workers (Perfetto, chrome://tracing)\n"
      "Exit status: 0 ok, 1 a benchmark failed its own check (or its output could not be\n"
      "written), 2 bad command line.");
}

/// Which CPU worker i of every implementation ran on, under the table: on a machine with SMT
/// the order is not ascending (tessera::default_worker_cpus). Only for subcommands with --pin.
void print_cpus(const bench::flag_values& flags, const std::vector<unsigned>& workers,
                std::FILE* out) {
  if (!flags.defined("pin")) return;
  if (!flags.boolean("pin")) {
    std::fputs("cpus: not pinned (--no-pin)\n", out);
    return;
  }
  const std::vector<unsigned> cpus = tessera::default_worker_cpus();
  const unsigned most = workers.empty() ? 0 : *std::max_element(workers.begin(), workers.end());
  std::string list;
  for (unsigned i = 0; i < std::min<std::size_t>(most, cpus.size()); ++i) {
    if (i > 0) list += ',';
    list += std::to_string(cpus[i]);
  }
  std::fprintf(out,
               "cpus: worker i on the i-th of CPUs %s%s (node by node, one thread per core "
               "before SMT siblings)\n",
               list.c_str(), most > cpus.size() ? ", wrapping around" : "");
}

/// The cache-line handoff latency (common/handoff.h) from worker 0's CPU to each other
/// worker's, "27 ns" or "27-31 ns"; empty where there is nothing to measure (unpinned, one
/// worker, one CPU) or a thread could not be pinned.
std::string handoff_range(const bench::flag_values& flags, const std::vector<unsigned>& workers) {
  if (!flags.defined("pin") || !flags.boolean("pin") || workers.empty()) return {};
  const std::vector<unsigned> cpus = tessera::default_worker_cpus();
  const unsigned most = *std::max_element(workers.begin(), workers.end());
  double low = std::numeric_limits<double>::infinity();  // stays above high until a measurement
  double high = 0;
  const auto measure = [](unsigned a, unsigned b) -> std::optional<double> {
    try {
      return bench::handoff_ns(a, b);
    } catch (const std::system_error&) {  // no thread to be had: the line is left out
      return std::nullopt;
    }
  };
  for (unsigned i = 1; i < std::min<std::size_t>(most, cpus.size()); ++i) {
    const std::optional<double> ns = measure(cpus[0], cpus[i]);
    if (!ns.has_value()) return {};
    const double v = *ns;
    low = std::min(low, v);
    high = std::max(high, v);
  }
  if (low > high) return {};  // nothing measured
  char text[64];
  if (static_cast<long>(low + 0.5) == static_cast<long>(high + 0.5))
    std::snprintf(text, sizeof text, "%.0f ns", low);
  else
    std::snprintf(text, sizeof text, "%.0f-%.0f ns", low, high);
  return text;
}

/// Under the CPUs: the handoff latency measured before the runs and after them. A figure at 2
/// or more workers rests on it, and on a VM it can change in the middle of a run.
void print_handoff(const std::string& before, const std::string& after, std::FILE* out) {
  if (before.empty() || after.empty()) return;
  std::fprintf(out,
               "handoff: a cache line from worker 0's CPU to another worker's takes %s one way "
               "(before the runs; %s after)\n",
               before.c_str(), after.c_str());
}

/// Prints the table and writes the JSON lines; false (said on stderr) if either failed.
bool finish(const bench::reporter& report, const bench::flag_values& flags,
            const std::vector<unsigned>& workers, const std::string& handoff_before,
            std::FILE* json) {
  const std::string handoff_after = handoff_range(flags, workers);
  std::fputs(report.table().c_str(), stdout);
  print_cpus(flags, workers, stdout);
  print_handoff(handoff_before, handoff_after, stdout);
  bool written = std::fflush(stdout) == 0 && std::ferror(stdout) == 0;
  if (!written) std::fprintf(stderr, "tessera-bench: cannot write the table: %s\n",
                             std::strerror(errno));
  if (json != nullptr) {
    report.write_json(json);
    const bool json_ok = std::ferror(json) == 0;
    if (std::fclose(json) != 0 || !json_ok) {
      std::fprintf(stderr, "tessera-bench: --json: cannot write '%s': %s\n",
                   flags.text("json").c_str(), std::strerror(errno));
      written = false;
    }
  }
  return written;
}

/// What a failed run prints after "FAILED: ": the exception's text, or for the two that sizes
/// beyond the machine cause, a sentence that says so.
std::string failure_text(const std::exception& e) {
  if (dynamic_cast<const std::bad_alloc*>(&e) != nullptr)
    return "out of memory: the sizes asked for (records, operations, tasks) need more memory than "
           "this process may have";
  // (the standard library's: tessera's own length_error, "tessera: too many open groups", stays)
  if (dynamic_cast<const std::length_error*>(&e) != nullptr &&
      std::string_view(e.what()).rfind("tessera", 0) != 0)
    return "the sizes asked for (records, operations, tasks) are larger than a container can hold";
  return e.what();
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string_view> args(argv + 1, argv + argc);
  const bench::benchmark_definition* b = args.empty() ? nullptr : bench::find_benchmark(args[0]);
  const bool asks_help =
      !args.empty() && (args[0] == "--help" || args[0] == "-h" || args[0] == "help");
  if (b == nullptr && !args.empty() && !asks_help) {
    std::fprintf(stderr, "tessera-bench: %.*s: %s (see tessera-bench --help)\n",
                 static_cast<int>(args[0].size()), args[0].data(),
                 args[0].starts_with("-") ? "expected a subcommand first" : "unknown subcommand");
    return 2;
  }
  if (b != nullptr && b->prepare_process != nullptr) b->prepare_process(argc, argv);

  std::optional<bench::command_line> cli;
  try {
    cli.emplace("tessera-bench: tessera's benchmarks, the competitors side by side",
                "tessera-bench");
    declare_subcommands(*cli);
  } catch (const std::exception& e) {  // a bad flag definition, not a bad command line
    std::fprintf(stderr, "tessera-bench: %s\n", e.what());
    return 1;
  }
  if (b == nullptr) {  // no word, or a request for help
    std::fputs(cli->help().c_str(), asks_help ? stdout : stderr);
    return asks_help ? 0 : 2;
  }
  const bench::parsed_command parsed =
      cli->parse(std::vector<std::string>(args.begin(), args.end()));
  switch (parsed.result) {
    case bench::parse_result::help:
      std::fputs(parsed.text.c_str(), stdout);  // the subcommand's
      return 0;
    case bench::parse_result::usage_error:
      std::fprintf(stderr, "%s\n", parsed.text.c_str());
      return 2;
    case bench::parse_result::run:
      break;
  }
  const bench::flag_values& flags = parsed.values;
  if (flags.list("implementation").empty()) {
    std::fprintf(stderr, "tessera-bench: --implementation: selects nothing\n");
    return 2;
  }

  std::FILE* json = nullptr;
  // A --json file this run creates is removed again if the run ends without a row in it (a usage
  // error found by the benchmark, a failure before the first result), so that no empty file is
  // left behind. One that existed before is only ever appended to.
  bool json_created = false;
  if (const std::string& path = flags.text("json"); !path.empty()) {
    std::error_code ec;
    json_created = !std::filesystem::exists(path, ec);
    json = std::fopen(path.c_str(), "a");
    if (json == nullptr) {
      std::fprintf(stderr, "tessera-bench: --json: cannot open '%s': %s\n", path.c_str(),
                   std::strerror(errno));
      return 2;
    }
  }

  // Every tessera runtime the benchmark makes reads it (tessera/trace.h): one process each in
  // the file, which is complete after each of them stops.
  if (const std::string& trace = flags.text("trace"); !trace.empty())
    ::setenv("TESSERA_TRACE", trace.c_str(), 1);  // NOLINT(concurrency-mt-unsafe): no threads yet

  bench::set_reported_statistic(flags.text("statistic") == "best" ? bench::statistic::best
                                                                  : bench::statistic::median);
  bench::reporter report(b->reference);
  std::vector<unsigned> workers;
  for (const std::uint64_t w : flags.uint_list("workers"))
    workers.push_back(static_cast<unsigned>(w));
  if (const unsigned most = *std::max_element(workers.begin(), workers.end()),
      cpus = static_cast<unsigned>(tessera::default_worker_cpus().size());
      most > cpus) {
    std::fprintf(stderr,
                 "tessera-bench: note: %u workers on %u CPUs: oversubscribed, the times measure "
                 "how the OS shares the CPUs as much as the implementations\n",
                 most, cpus);
  }
  const bench::run_context ctx{.benchmark = *b,
                               .flags = flags,
                               .workers = workers,
                               .repeat = static_cast<unsigned>(flags.integer("repeat")),
                               .implementations = flags.list("implementation"),
                               .report = report};
  const bench::onetbb_workers_joined join_onetbb;  // see onetbb_workers.h
  const auto remove_empty_json = [&] {
    std::error_code ec;
    const std::string& path = flags.text("json");
    if (json_created && std::filesystem::file_size(path, ec) == 0 && !ec)
      std::filesystem::remove(path, ec);
  };
  const std::string handoff_before = handoff_range(flags, workers);
  try {
    b->run(ctx);
  } catch (const bench::usage_failure& e) {
    if (json != nullptr) std::fclose(json);
    remove_empty_json();
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    (void)finish(report, flags, workers, handoff_before, json);
    remove_empty_json();
    std::fprintf(stderr, "tessera-bench: %s: FAILED: %s\n", b->name.c_str(),
                 failure_text(e).c_str());
    return 1;
  }
  const bool written = finish(report, flags, workers, handoff_before, json);
  remove_empty_json();
  return written ? 0 : 1;
}
