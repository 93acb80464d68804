// bench/common/timing.h — wall-clock timing of repeated benchmark runs (std::chrono::steady_clock).
//
// A run is a callable returning a `sample` (how many operations it did, how long its timed part
// took); it times itself with a stopwatch so that setup and the check of its answer stay outside
// the measurement. measure() calls it `repeat` times and reports the MEDIAN duration — or the
// fastest with --statistic best, for machines shared with other work, where noise only ever
// adds time — together with the fastest and slowest run.
//
// Competitors measured side by side take turns: in_turns() runs one job per implementation, each
// on its own thread with its environment (runtime, arena, thread team) alive throughout, and
// every measure() inside hands the turn on after each run. Runs of different implementations
// thus alternate (A B C A B C ...) and a noisy phase of a shared machine hits all of them,
// instead of whichever implementation happened to run during it.
//
//   measurement m = measure(progress_label, 3, [&] {
//     stopwatch clock;
//     const std::uint64_t r = compute();
//     const double seconds = clock.seconds();
//     if (r != expected) throw bench_failure("wrong result");   // checked before any time prints
//     return sample{.ops = ops, .seconds = seconds};
//   });
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace tessera::bench {

/// A benchmark computed a wrong answer (or could not run); tessera-bench exits with status 1.
class bench_failure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A bad command line found only once a benchmark looked at its flags together (a trace file that
/// cannot be read, flags that contradict each other): the whole message, which names the flag.
/// tessera-bench prints it and exits with status 2, leaving no --json file behind.
class usage_failure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class stopwatch {
 public:
  stopwatch() noexcept : m_start(std::chrono::steady_clock::now()) {}
  void restart() noexcept { m_start = std::chrono::steady_clock::now(); }
  double seconds() const noexcept {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - m_start).count();
  }

 private:
  std::chrono::steady_clock::time_point m_start;
};

struct sample {
  std::uint64_t ops = 0;
  double seconds = 0;
};

/// Which run of a configuration is reported: set once from --statistic, before any run.
enum class statistic : std::uint8_t { median, best };
void set_reported_statistic(statistic s) noexcept;
statistic reported_statistic() noexcept;
std::string_view to_string(statistic s) noexcept;

struct measurement {
  std::uint64_t ops = 0;  ///< operations of one run (every run must do the same number)
  double seconds = 0;     ///< the reported_statistic() over the runs (median by default)
  double min_seconds = 0;
  double max_seconds = 0;
  unsigned runs = 0;
};

/// The reported_statistic() of `samples`: the median (mean of the two middle ones for an even
/// count) or the fastest.
measurement summarize(std::vector<sample> samples);

/// Runs `jobs[i]` on a thread of its own each, one at a time: job 0 starts, and whenever a job
/// finishes one run inside measure() (or returns), the next job that has not returned goes on,
/// round-robin, after `settle` (idle threads of the previous job spin down meanwhile: libgomp's
/// and oneTBB's spin for milliseconds before they sleep). A job's set-up and tear-down run in
/// its turn too. A job's thread is its own also when it is the only job, so that what a job does
/// to its thread (pinning it) does not outlive the job. Returns when every job has returned;
/// rethrows the first job's exception (the others are stopped at their next turn).
void in_turns(std::vector<std::function<void()>> jobs,
              std::chrono::milliseconds settle = std::chrono::milliseconds(20));

/// in_turns() with one job per implementation name: job i returns `run(names[i])`. The
/// measurements, in the order of `names`.
template <class Run>
std::vector<measurement> measure_in_turns(const std::vector<std::string>& names, Run run) {
  std::vector<measurement> results(names.size());
  std::vector<std::function<void()>> jobs;
  jobs.reserve(names.size());
  for (std::size_t i = 0; i < names.size(); ++i)
    jobs.emplace_back([&results, &names, &run, i] { results[i] = run(names[i]); });
  in_turns(std::move(jobs));
  return results;
}

namespace detail {
/// Inside in_turns(): hands the turn on and waits for it to come back. Elsewhere: nothing.
void pass_turn();
}  // namespace detail

/// Runs `run_once` `repeat` times; prints "<label> ..." before and the result after on stderr.
/// Inside in_turns(), the turn passes on after every run.
template <class F>
measurement measure(const std::string& label, unsigned repeat, F&& run_once) {
  std::fprintf(stderr, "tessera-bench: %s: %u run%s ...\n", label.c_str(), repeat,
               repeat == 1 ? "" : "s");
  std::vector<sample> samples;
  samples.reserve(repeat);
  for (unsigned i = 0; i < repeat; ++i) {
    samples.push_back(run_once());
    detail::pass_turn();
  }
  measurement m = summarize(std::move(samples));
  std::fprintf(stderr, "tessera-bench: %s: %s %.4f s (%.4f..%.4f), %.3g ops/s\n", label.c_str(),
               to_string(reported_statistic()).data(), m.seconds, m.min_seconds, m.max_seconds,
               m.seconds > 0 ? static_cast<double>(m.ops) / m.seconds : 0.0);
  return m;
}

}  // namespace tessera::bench
