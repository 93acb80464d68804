// src/runtime/local_queue.h — a pool's owner-only FIFO of tasks (no atomics on the hot path).
//
// The intrusive link is the task's atomic m_next, used here with relaxed order only: the queue
// is touched by one thread at a time, and a pool changes hands through a mutex (see worker.cpp).
//
//   local_queue q;
//   q.push_back(t);
//   task* x = q.pop_front();
#pragma once

#include <atomic>
#include <cstddef>

#include "tessera/detail/task_access.h"
#include "tessera/task.h"

namespace tessera::detail {

class local_queue {
 public:
  bool empty() const noexcept { return m_head == nullptr; }
  std::size_t size() const noexcept { return m_size; }
  task* front() const noexcept { return m_head; }

  void push_back(task* t) noexcept {
    hdr(t).m_next.store(nullptr, std::memory_order_relaxed);
    if (m_tail == nullptr) {
      m_head = m_tail = t;
    } else {
      hdr(m_tail).m_next.store(t, std::memory_order_relaxed);
      m_tail = t;
    }
    ++m_size;
  }
  void push_front(task* t) noexcept {
    hdr(t).m_next.store(m_head, std::memory_order_relaxed);
    m_head = t;
    if (m_tail == nullptr) m_tail = t;
    ++m_size;
  }
  /// Puts the chain first -> ... -> last (n tasks, linked through m_next) at the back, in order.
  void push_back_chain(task* first, task* last, std::size_t n) noexcept {
    hdr(last).m_next.store(nullptr, std::memory_order_relaxed);
    if (m_tail == nullptr) {
      m_head = first;
    } else {
      hdr(m_tail).m_next.store(first, std::memory_order_relaxed);
    }
    m_tail = last;
    m_size += n;
  }
  /// Puts the chain first -> ... -> last (n tasks, linked through m_next) at the front, in order.
  void push_front_chain(task* first, task* last, std::size_t n) noexcept {
    hdr(last).m_next.store(m_head, std::memory_order_relaxed);
    m_head = first;
    if (m_tail == nullptr) m_tail = last;
    m_size += n;
  }
  task* pop_front() noexcept {
    task* t = m_head;
    if (t == nullptr) return nullptr;
    m_head = hdr(t).m_next.load(std::memory_order_relaxed);
    if (m_head == nullptr) m_tail = nullptr;
    --m_size;
    return t;
  }
  /// The task after `t` in this queue (for descriptor prefetching).
  static task* next_of(task* t) noexcept { return hdr(t).m_next.load(std::memory_order_relaxed); }

 private:
  task* m_head = nullptr;
  task* m_tail = nullptr;
  std::size_t m_size = 0;
};

}  // namespace tessera::detail
