#include "common/timing.h"

#include <condition_variable>
#include <cstddef>
#include <exception>
#include <mutex>
#include <thread>

namespace tessera::bench {

namespace {
statistic g_statistic = statistic::median;  // written by main before any thread exists

/// The turn of in_turns(): one seat per job; the seat in m_current runs, the others wait.
class turn_ring {
 public:
  turn_ring(std::size_t seats, std::chrono::milliseconds settle)
      : m_left(seats, true), m_settle(settle) {}

  /// Waits until it is `seat`'s turn; lets the previous holder's threads settle if another seat
  /// ran since. Throws cancelled once a job has failed.
  void wait_for(std::size_t seat) {
    bool settle = false;
    {
      std::unique_lock lock(m_mutex);
      m_changed.wait(lock, [&] { return m_current == seat; });
      if (m_failed) throw cancelled{};
      settle = m_previous != seat;
    }
    if (settle) std::this_thread::sleep_for(m_settle);
  }
  /// The holder `seat` hands the turn to the next seat still in the ring (itself if none).
  void pass(std::size_t seat) {
    std::lock_guard lock(m_mutex);
    m_previous = seat;
    m_current = next_after(seat);
    m_changed.notify_all();
  }
  /// `seat` is done (`failed`: by an exception); the turn goes on if it held it.
  void leave(std::size_t seat, bool failed) {
    std::lock_guard lock(m_mutex);
    m_left[seat] = false;
    m_failed = m_failed || failed;
    if (m_current == seat) {
      m_previous = seat;
      m_current = next_after(seat);
    }
    m_changed.notify_all();
  }

  struct cancelled {};

 private:
  std::size_t next_after(std::size_t seat) const {
    for (std::size_t k = 1; k <= m_left.size(); ++k) {
      const std::size_t s = (seat + k) % m_left.size();
      if (m_left[s]) return s;
    }
    return m_left.size();  // nobody left
  }

  std::mutex m_mutex;
  std::condition_variable m_changed;
  std::vector<bool> m_left;  // the job of the seat has not returned yet
  std::size_t m_current = 0;
  std::size_t m_previous = 0;
  bool m_failed = false;
  std::chrono::milliseconds m_settle;
};

thread_local turn_ring* tl_ring = nullptr;
thread_local std::size_t tl_seat = 0;

}  // namespace

void in_turns(std::vector<std::function<void()>> jobs, std::chrono::milliseconds settle) {
  turn_ring ring(jobs.size(), settle);
  std::vector<std::exception_ptr> errors(jobs.size());
  std::vector<std::thread> threads;
  threads.reserve(jobs.size());
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    threads.emplace_back([&, i] {
      bool failed = false;
      try {
        ring.wait_for(i);
        tl_ring = &ring;
        tl_seat = i;
        jobs[i]();
      } catch (const turn_ring::cancelled&) {
      } catch (...) {
        errors[i] = std::current_exception();
        failed = true;
      }
      tl_ring = nullptr;
      ring.leave(i, failed);
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
}

namespace detail {
void pass_turn() {
  if (tl_ring == nullptr) return;
  tl_ring->pass(tl_seat);
  tl_ring->wait_for(tl_seat);
}
}  // namespace detail

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
