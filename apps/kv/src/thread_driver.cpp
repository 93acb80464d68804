// kv::thread_driver: see kv/thread_driver.h.

#include "kv/thread_driver.h"

#include <algorithm>

#include "kv/node.h"

namespace kv {

thread_driver::thread_driver(unsigned threads, std::size_t chunk_size,
                             const std::function<void(worker_id)>& on_start)
    : m_chunk_size(chunk_size) {
  KV_ASSERT(threads > 0 && chunk_size > 0, "thread_driver needs threads and a chunk size");
  m_workers.reserve(threads);
  for (unsigned i = 0; i < threads; ++i) {
    m_workers.emplace_back([this, i, on_start] {
      if (on_start) on_start(worker_id{i});
      work(worker_id{i});
    });
  }
}

thread_driver::~thread_driver() {
  {
    const std::lock_guard lock(m_mutex);
    m_stop = true;
  }
  m_start.notify_all();
  for (std::thread& t : m_workers) t.join();
}

void thread_driver::dispatch(std::size_t count, chunk_fn fn, void* ctx) {
  std::unique_lock lock(m_mutex);
  KV_ASSERT(m_running == 0, "thread_driver::run is not reentrant");
  m_count = count;
  m_fn = fn;
  m_ctx = ctx;
  m_next.store(0, std::memory_order_relaxed);  // relaxed: published to the workers by m_mutex
  m_running = threads();
  ++m_generation;
  m_start.notify_all();
  m_finished.wait(lock, [this] { return m_running == 0; });
}

void thread_driver::work(worker_id self) {
  std::uint64_t done = 0;
  for (;;) {
    std::size_t count = 0;
    chunk_fn fn = nullptr;
    void* ctx = nullptr;
    {
      std::unique_lock lock(m_mutex);
      m_start.wait(lock, [&] { return m_stop || m_generation != done; });
      if (m_stop) return;
      done = m_generation;
      count = m_count;
      fn = m_fn;
      ctx = m_ctx;
    }
    for (;;) {
      // relaxed: the counter only partitions the indices; the batch came through m_mutex.
      const std::size_t begin = m_next.fetch_add(m_chunk_size, std::memory_order_relaxed);
      if (begin >= count) break;
      fn(ctx, begin, std::min(count, begin + m_chunk_size), self);
    }
    {
      const std::lock_guard lock(m_mutex);
      if (--m_running == 0) m_finished.notify_one();
    }
  }
}

}  // namespace kv
