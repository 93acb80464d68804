#include "common/thread_pool.h"

#include <utility>

#include "common/placement.h"

namespace tessera::bench {

namespace {
thread_local const thread_pool* t_pool = nullptr;
thread_local unsigned t_index = 0;
}  // namespace

thread_pool::thread_pool(unsigned threads, bool pin) {
  m_threads.reserve(threads);
  for (unsigned i = 0; i < threads; ++i) m_threads.emplace_back([this, i, pin] { loop(i, pin); });
}

thread_pool::~thread_pool() {
  wait_idle();
  {
    std::lock_guard lock(m_mutex);
    m_stopping = true;
  }
  m_work.notify_all();
  for (auto& t : m_threads) t.join();
}

void thread_pool::submit(std::function<void()> fn, int priority) {
  {
    std::lock_guard lock(m_mutex);
    m_queue.push(entry{priority, m_sequence++, std::move(fn)});
  }
  m_work.notify_one();
}

void thread_pool::wait_idle() {
  std::unique_lock lock(m_mutex);
  m_idle.wait(lock, [this] { return m_queue.empty() && m_running == 0; });
}

unsigned thread_pool::current_index() const noexcept { return t_pool == this ? t_index : size(); }

void thread_pool::loop(unsigned index, bool pin) {
  if (pin) pin_worker_thread(index);
  t_pool = this;
  t_index = index;
  std::unique_lock lock(m_mutex);
  for (;;) {
    m_work.wait(lock, [this] { return m_stopping || !m_queue.empty(); });
    if (m_queue.empty()) return;  // stopping, and nothing left
    std::function<void()> fn = std::move(m_queue.top().fn);
    m_queue.pop();
    ++m_running;
    lock.unlock();
    fn();
    fn = nullptr;  // destroy captures outside the lock
    lock.lock();
    --m_running;
    if (m_running == 0 && m_queue.empty()) m_idle.notify_all();
  }
}

}  // namespace tessera::bench
