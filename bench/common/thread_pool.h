// bench/common/thread_pool.h — the `pool` competitor: a plain thread pool in the style of
// GeckoDB's ([GeckoDB-pool]): one std::priority_queue of std::function tasks behind one
// std::mutex, a std::condition_variable to wake the N threads, FIFO order within a priority.
//
// It is the baseline a task runtime must beat by a wide margin: every submit and every pop takes
// the same lock. Its tasks cannot block either (a task waiting for another would hold a thread),
// so benchmarks run on it in continuation-passing style.
//
//   thread_pool pool(4);
//   std::atomic<int> sum{0};
//   for (int i = 0; i < 100; ++i) pool.submit([&, i] { sum += i; });
//   pool.wait_idle();          // every submitted task, and those they submitted, finished
//
// Memory ordering: everything a task wrote happens-before wait_idle() returns (both synchronize
// on the pool's mutex).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <queue>
#include <thread>
#include <vector>

namespace tessera::bench {

class thread_pool {
 public:
  /// `pin`: thread i on the CPU of tessera's worker i (placement.h).
  explicit thread_pool(unsigned threads, bool pin = false);
  thread_pool(const thread_pool&) = delete;
  thread_pool& operator=(const thread_pool&) = delete;
  /// Waits for every task, then joins the threads.
  ~thread_pool();

  /// Queues `fn`; a higher `priority` runs first, equal priorities in submission order.
  void submit(std::function<void()> fn, int priority = 0);
  /// Blocks until the queue is empty and no task runs (not from a pool thread).
  void wait_idle();

  unsigned size() const noexcept { return static_cast<unsigned>(m_threads.size()); }
  /// The index (0..size-1) of the calling pool thread; size() when not called from one.
  unsigned current_index() const noexcept;

 private:
  struct entry {
    int priority;
    std::uint64_t sequence;
    mutable std::function<void()> fn;  // mutable: moved out of priority_queue::top()
  };
  struct runs_later {
    bool operator()(const entry& a, const entry& b) const noexcept {
      return a.priority != b.priority ? a.priority < b.priority : a.sequence > b.sequence;
    }
  };

  void loop(unsigned index, bool pin);

  std::mutex m_mutex;
  std::condition_variable m_work;  // queue non-empty or stopping
  std::condition_variable m_idle;  // queue empty and nothing running
  std::priority_queue<entry, std::vector<entry>, runs_later> m_queue;  // guarded by m_mutex
  std::uint64_t m_sequence = 0;                                        // guarded by m_mutex
  unsigned m_running = 0;                                              // guarded by m_mutex
  bool m_stopping = false;                                             // guarded by m_mutex
  std::vector<std::thread> m_threads;
};

}  // namespace tessera::bench
