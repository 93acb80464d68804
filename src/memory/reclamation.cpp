#include "memory/reclamation.h"

#include <utility>

#include "memory/resource_memory.h"

namespace tessera::detail {

void epoch_clock::try_advance(std::uint64_t now_ns, std::uint64_t period_ns) noexcept {
  std::uint64_t last = m_last_advance_ns.load(std::memory_order_relaxed);
  if (now_ns - last < period_ns) return;
  if (!m_last_advance_ns.compare_exchange_strong(last, now_ns, std::memory_order_relaxed)) return;
  // seq_cst, the counts read in slot_balanced too: see count_in_current_slot.
  std::uint64_t e = m_global.load(std::memory_order_seq_cst);
  if (!slot_balanced(static_cast<unsigned>((e + 1) % epoch_slots))) return;
#if defined(TESSERA_DEBUG_CHECKS)
  if (auto* hook = test_hooks::epoch_advance_checked.load(std::memory_order_acquire)) hook(e);
#endif
  // A retire that reads the new epoch happens after the balance we observed.
  m_global.compare_exchange_strong(e, e + 1, std::memory_order_seq_cst);
}

bool epoch_clock::slot_balanced(unsigned slot) const noexcept {
  std::uint64_t completed = 0;
  for (const epoch_counters* c : m_workers) {
    completed += c->completed[slot].load(std::memory_order_acquire);
  }
  // seq_cst: see count_in_current_slot
  std::uint64_t spawned = m_external[slot].load(std::memory_order_seq_cst);
  for (const epoch_counters* c : m_workers) {
    spawned += c->spawned[slot].load(std::memory_order_seq_cst);
  }
  return spawned == completed;
}

bool epoch_clock::quiescent() const noexcept {
  std::uint64_t completed = 0;
  for (const epoch_counters* c : m_workers) {
    for (auto& n : c->completed) completed += n.load(std::memory_order_acquire);
  }
  std::uint64_t spawned = 0;
  for (auto& n : m_external) spawned += n.load(std::memory_order_acquire);
  // seq_cst, not just acquire: stop() relies on it (the reclamation task's spawn, worker.cpp)
  for (const epoch_counters* c : m_workers) {
    for (auto& n : c->spawned) spawned += n.load(std::memory_order_seq_cst);
  }
  return spawned == completed;
}

std::uint64_t epoch_clock::external_spawned() const noexcept {
  std::uint64_t n = 0;
  for (auto& c : m_external) n += c.load(std::memory_order_relaxed);
  return n;
}

bool retire_inbox::put(resource_header* h) {
  lock hold(m_mutex);
  if (m_closed) return false;
  m_items.push_back(h);
  m_nonempty.store(true, std::memory_order_relaxed);
  return true;
}

std::vector<resource_header*> retire_inbox::take_locked() {
  std::vector<resource_header*> taken;
  taken.swap(m_items);
  m_nonempty.store(false, std::memory_order_relaxed);
  return taken;
}

std::vector<resource_header*> retire_inbox::take() {
  lock hold(m_mutex);
  return take_locked();
}

std::vector<resource_header*> retire_inbox::take_or_close() {
  lock hold(m_mutex);
  std::vector<resource_header*> taken = take_locked();
  if (taken.empty()) m_closed = true;
  return taken;
}

void free_resource_list(resource_header* list) noexcept {
  while (list != nullptr) {
    resource_header* next = list->retired_next;
    free_resource(list);
    list = next;
  }
}

}  // namespace tessera::detail
