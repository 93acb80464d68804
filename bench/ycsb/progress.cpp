#include "ycsb/progress.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <utility>

#include "common/timing.h"

namespace tessera::bench::ycsb_bench {

namespace {

/// Counts in the unit of the total: "4.2 M", "812.0 k", "17".
std::string amount(double v, double scale_of) {
  char buf[32];
  if (scale_of >= 1e6) {
    std::snprintf(buf, sizeof buf, "%.1f M", v / 1e6);
  } else if (scale_of >= 1e4) {
    std::snprintf(buf, sizeof buf, "%.1f k", v / 1e3);
  } else {
    std::snprintf(buf, sizeof buf, "%.0f", v);
  }
  return buf;
}

}  // namespace

progress::progress(std::string label, std::uint64_t total, unsigned counters, bool enabled)
    : m_label(std::move(label)),
      m_total(total),
      m_counter_count(counters),
      m_counters(std::make_unique<counter[]>(counters)),
      m_enabled(enabled) {}

progress::~progress() { stop(); }

void progress::start() {
  if (m_enabled && !m_printer.joinable()) m_printer = std::thread([this] { print_loop(); });
}

void progress::stop() {
  if (!m_printer.joinable()) return;
  {
    std::lock_guard lock(m_mutex);
    m_stop = true;
  }
  m_wake.notify_one();
  m_printer.join();
}

std::uint64_t progress::done() const noexcept {
  std::uint64_t sum = 0;
  for (unsigned i = 0; i < m_counter_count; ++i)
    sum += m_counters[i].value.load(std::memory_order_relaxed);
  return sum;
}

void progress::print_loop() {
  const double total = static_cast<double>(m_total);
  std::size_t width = 0;
  std::uint64_t last = 0;
  stopwatch since_last;
  std::unique_lock lock(m_mutex);
  while (!m_wake.wait_for(lock, std::chrono::seconds(1), [this] { return m_stop; })) {
    const std::uint64_t now = done();
    const double rate = static_cast<double>(now - last) / since_last.seconds();
    since_last.restart();
    last = now;
    char line[256];
    const int n = std::snprintf(line, sizeof line, "  %s   %s / %s ops   %.2f Mops/s",
                                m_label.c_str(), amount(static_cast<double>(now), total).c_str(),
                                amount(total, total).c_str(), rate / 1e6);
    const std::size_t len = n > 0 ? static_cast<std::size_t>(n) : 0;
    // Pad over a longer previous line.
    std::fprintf(stderr, "\r%s%*s", line, static_cast<int>(width > len ? width - len : 0), "");
    std::fflush(stderr);
    width = std::max(width, len);
  }
  if (width > 0) {
    std::fprintf(stderr, "\r%*s\r", static_cast<int>(width), "");
    std::fflush(stderr);
  }
}

void progress::require_all_done() const {
  const std::uint64_t n = done();
  if (n != m_total) {
    throw bench_failure("the driver executed " + std::to_string(n) + " of " +
                        std::to_string(m_total) + " operations");
  }
}

}  // namespace tessera::bench::ycsb_bench
