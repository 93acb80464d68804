#include "common/timing.h"

namespace tessera::bench {

namespace {
statistic g_statistic = statistic::median;  // written by main before any thread exists
}  // namespace

void set_reported_statistic(statistic s) noexcept { g_statistic = s; }
statistic reported_statistic() noexcept { return g_statistic; }
std::string_view to_string(statistic s) noexcept {
  return s == statistic::best ? "best" : "median";
}

measurement summarize(std::vector<sample> samples) {
  measurement m;
  if (samples.empty()) return m;
  for (const auto& s : samples)
    if (s.ops != samples.front().ops)
      throw bench_failure("runs of one configuration did different numbers of operations");
  std::sort(samples.begin(), samples.end(),
            [](const sample& a, const sample& b) { return a.seconds < b.seconds; });
  const std::size_t n = samples.size();
  m.ops = samples.front().ops;
  if (g_statistic == statistic::best) {
    m.seconds = samples.front().seconds;
  } else {
    m.seconds = n % 2 == 1 ? samples[n / 2].seconds
                           : (samples[n / 2 - 1].seconds + samples[n / 2].seconds) / 2;
  }
  m.min_seconds = samples.front().seconds;
  m.max_seconds = samples.back().seconds;
  m.runs = static_cast<unsigned>(n);
  return m;
}

}  // namespace tessera::bench
