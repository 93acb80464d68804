// bench/ycsb/progress.h — the progress line of a running phase on stderr.
//
// The workers count finished operations in one counter each (own cache line); a printer thread
// sums them about once a second and rewrites one line in place,
//   "\r  tessera load  w=2    4.2 M / 10.0 M ops   1.90 Mops/s"
// (the rate over the last interval), and clears the line when the phase stops. Disabled, it
// starts no thread and prints nothing; the counters still work (tests and pipes stay clean).
//
//   progress meter("tessera load  w=2", ops.size(), workers, isatty(2));
//   meter.start();
//   ... worker w: meter.tick(w) per operation, or meter.add(w, n) from anywhere ...
//   meter.stop();                      // joins the printer, erases the line
//   assert(meter.done() == ops.size());
//
// Memory-ordering contract: none — the counts are relaxed and only approximate while the phase
// runs; done() is exact once the counting threads joined (or the runtime is idle).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace tessera::bench::ycsb_bench {

class progress {
 public:
  progress(std::string label, std::uint64_t total, unsigned counters, bool enabled);
  ~progress();
  progress(const progress&) = delete;
  progress& operator=(const progress&) = delete;

  /// Starts the printer thread (if enabled). At most once.
  void start();
  /// Stops the printer and erases its line. Idempotent.
  void stop();

  /// One more operation on counter `c`, which only the calling thread writes.
  void tick(unsigned c) noexcept {
    auto& v = m_counters[c].value;
    v.store(v.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }
  /// `n` more operations on counter `c`, which other threads may update at the same time.
  void add(unsigned c, std::uint64_t n) noexcept {
    m_counters[c].value.fetch_add(n, std::memory_order_relaxed);
  }
  [[nodiscard]] std::uint64_t done() const noexcept;
  /// Throws bench_failure ("the driver executed N of M operations") unless done() is the total;
  /// once the counting threads joined.
  void require_all_done() const;

 private:
  struct alignas(64) counter {
    std::atomic<std::uint64_t> value{0};
  };

  void print_loop();

  std::string m_label;
  std::uint64_t m_total;
  unsigned m_counter_count;
  std::unique_ptr<counter[]> m_counters;
  bool m_enabled;

  std::mutex m_mutex;
  std::condition_variable m_wake;
  bool m_stop = false;  // guarded by m_mutex
  std::thread m_printer;
};

}  // namespace tessera::bench::ycsb_bench
