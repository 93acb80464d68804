#pragma once
// kv::thread_driver — runs batches on N plain std::threads (the "thread line" of the paper's
// evaluation): the threads pull chunks of indices from one shared atomic counter, so a thread
// that finishes its chunk takes the next one. The threads are created once (not per batch);
// `on_start`, if given, runs first on each of them with its worker id (to pin it, say).
//
// Invariant: run() returns only after every index in [0, count) was processed exactly once;
// the function must not throw (a throw terminates the program).
//
// Memory-ordering contract: everything the caller did before run() happens-before every call
// of the function, and every call happens-before run() returns.
//
//   kv::olc_tree tree;
//   kv::thread_driver driver(8);                                  // 8 worker threads
//   driver.run(1'000'000, [&](std::size_t i) { tree.insert(i, i); });
//   driver.run(keys.size(), [&](std::size_t i, kv::worker_id w) { hits[kv::to_index(w)] += ...; });
//   // the destructor stops and joins the threads

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

#include "kv/batch.h"

namespace kv {

class thread_driver {
 public:
  explicit thread_driver(unsigned threads, std::size_t chunk_size = default_chunk_size,
                         const std::function<void(worker_id)>& on_start = {});
  ~thread_driver();
  thread_driver(const thread_driver&) = delete;
  thread_driver& operator=(const thread_driver&) = delete;

  [[nodiscard]] unsigned threads() const noexcept {
    return static_cast<unsigned>(m_workers.size());
  }

  /// Calls fn for every index in [0, count) on the worker threads; blocks until done.
  /// Not reentrant: one run() at a time.
  template <index_function F>
  void run(std::size_t count, F&& fn) {
    using fn_t = std::remove_reference_t<F>;
    const chunk_fn chunk = [](void* ctx, std::size_t begin, std::size_t end, worker_id w) {
      fn_t& f = *static_cast<fn_t*>(ctx);
      for (std::size_t i = begin; i < end; ++i) invoke_index(f, i, w);
    };
    dispatch(count, chunk, const_cast<void*>(static_cast<const void*>(std::addressof(fn))));
  }

 private:
  using chunk_fn = void (*)(void* ctx, std::size_t begin, std::size_t end, worker_id w);

  void dispatch(std::size_t count, chunk_fn fn, void* ctx);
  void work(worker_id self);

  /// Next unclaimed index; own line, since every worker updates it once per chunk.
  alignas(64) std::atomic<std::size_t> m_next{0};

  alignas(64) std::mutex m_mutex;
  std::condition_variable m_start;     ///< a new batch or stop
  std::condition_variable m_finished;  ///< the last worker finished the batch
  // Guarded by m_mutex:
  std::uint64_t m_generation = 0;  ///< batches started
  unsigned m_running = 0;          ///< workers still on the current batch
  bool m_stop = false;
  std::size_t m_count = 0;
  chunk_fn m_fn = nullptr;
  void* m_ctx = nullptr;

  const std::size_t m_chunk_size;
  std::vector<std::thread> m_workers;
};

}  // namespace kv
