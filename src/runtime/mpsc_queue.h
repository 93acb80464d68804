// src/runtime/mpsc_queue.h — the wait-free multi-producer queue every pool has per priority.
//
// Dmitry Vyukov's intrusive MPSC queue: a producer links a task (or a pre-linked chain of tasks)
// with ONE atomic exchange on the tail and a release store into its predecessor; the single
// consumer (the pool's owner) walks from the head without any read-modify-write. FIFO per
// producer. A pop may briefly see a producer between its exchange and its link store; it then
// reports `busy` and the consumer tries again later (the producer is never blocked).
//
//   mpsc_queue q;
//   q.push(t);                    // any thread
//   task* x; if (q.pop(x) == pop_result::item) run(x);   // owner only
//
// Memory ordering: everything a producer wrote to a task before push() is visible to the
// consumer after pop() returned it (release store of the link / acquire load of it).
#pragma once

#include <atomic>

#include "tessera/context.h"
#include "tessera/detail/task_access.h"
#include "tessera/task.h"

namespace tessera::detail {

enum class pop_result { item, empty, busy };

class mpsc_queue {
 public:
  mpsc_queue() noexcept : m_tail(&m_stub), m_head(&m_stub) {}
  mpsc_queue(const mpsc_queue&) = delete;
  mpsc_queue& operator=(const mpsc_queue&) = delete;

  /// Any thread. Links the chain first..last (already linked through m_next).
  void push_chain(task* first, task* last) noexcept {
    hdr(last).m_next.store(nullptr, std::memory_order_relaxed);
    // seq_cst: pairs with the owner's seq_cst check in maybe_nonempty() before it parks.
    task* prev = m_tail.exchange(last, std::memory_order_seq_cst);
    // release: publishes the tasks' contents to the consumer that acquires this link.
    hdr(prev).m_next.store(first, std::memory_order_release);
  }
  void push(task* t) noexcept { push_chain(t, t); }

  /// Consumer only.
  pop_result pop(task*& out) noexcept {
    task* head = m_head;
    task* next = hdr(head).m_next.load(std::memory_order_acquire);  // acquire: see the task's fields
    if (head == &m_stub) {
      if (next == nullptr) {
        return m_tail.load(std::memory_order_relaxed) == &m_stub ? pop_result::empty
                                                                 : pop_result::busy;
      }
      m_head = next;
      head = next;
      next = hdr(next).m_next.load(std::memory_order_acquire);
    }
    if (next != nullptr) {
      m_head = next;
      out = head;
      return pop_result::item;
    }
    if (m_tail.load(std::memory_order_acquire) != head) return pop_result::busy;
    push(&m_stub);
    next = hdr(head).m_next.load(std::memory_order_acquire);
    if (next != nullptr) {
      m_head = next;
      out = head;
      return pop_result::item;
    }
    return pop_result::busy;
  }

  /// Consumer only: false if certainly empty. seq_cst so that a parking owner and a producer
  /// cannot both miss each other (Dekker with the producer's exchange and its read of `sleeping`),
  /// and likewise a draining owner and a producer that saw its mail up (worker::take_mail).
  bool maybe_nonempty() const noexcept {
    return m_head != &m_stub || m_tail.load(std::memory_order_seq_cst) != &m_stub;
  }

 private:
  struct stub_task final : task {
    task* execute(context&) override { return nullptr; }
  };

  alignas(64) std::atomic<task*> m_tail;
  alignas(64) task* m_head;
  stub_task m_stub;
};

}  // namespace tessera::detail
