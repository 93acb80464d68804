#include "groups/group_table.h"

#include <atomic>
#include <stdexcept>

namespace tessera::detail {

namespace {
std::uint32_t next_first_generation() noexcept {
  static std::atomic<std::uint32_t> tables{0};
  // Golden-ratio steps spread the tables' starts evenly over the 32-bit range.
  return 1 + tables.fetch_add(1, std::memory_order_relaxed) * 0x9E3779B9u;
}
}  // namespace

group_table::group_table() : m_first_generation(next_first_generation()) {}

group_table::~group_table() {
  for (auto& c : m_chunks) delete c.load(std::memory_order_relaxed);
}

group group_table::open() {
  std::uint32_t i;
  {
    lock hold(m_mutex);
    if (!m_free.empty()) {
      i = m_free.back();
      m_free.pop_back();
    } else {
      if (m_used == chunk_slots * max_chunks)
        throw std::length_error("tessera: too many open groups");
      i = m_used++;
      if (i % chunk_slots == 0) {
        // release: a thread indexing this chunk later sees it constructed.
        auto* c = new chunk();
        for (group_slot& fresh : *c) fresh.generation.store(m_first_generation, std::memory_order_relaxed);
        m_chunks[i / chunk_slots].store(c, std::memory_order_release);
      }
    }
  }
  group g{i + 1, 0};
  group_slot& s = slot(g);
  g.generation = s.generation.load(std::memory_order_relaxed);
  {
    lock hold(s.mutex);
    s.error = nullptr;
    s.continuation = nullptr;
    s.closed = false;
    s.detached = false;
    s.completed = false;
    s.cancelled.store(false, std::memory_order_relaxed);
  }
  s.done.store(0, std::memory_order_relaxed);
  s.pending.store(1, std::memory_order_release);  // the open reference; release: slot reset first
  return g;
}

bool group_table::current(group g) noexcept {
  if (g.index == 0) return false;
  const std::uint32_t i = g.index - 1;
  if (i / chunk_slots >= max_chunks) return false;
  chunk* c = m_chunks[i / chunk_slots].load(std::memory_order_acquire);
  if (c == nullptr) return false;
  return (*c)[i % chunk_slots].generation.load(std::memory_order_acquire) == g.generation;
}

void group_table::record_exception(group g, std::exception_ptr e) {
  group_slot& s = slot(g);
  lock hold(s.mutex);
  if (!s.error) s.error = std::move(e);
}

void group_table::release(group g) {
  group_slot& s = slot(g);
  {
    lock hold(s.mutex);
    s.error = nullptr;
    s.continuation = nullptr;
    // Under the slot's mutex, where wait and when_done check the generation again: a second
    // wait on g (a misuse) that passed its first check before this release then either finds g
    // closed or finds it stale, never the group that reuses the slot. release: stale handles
    // checked without the mutex (current()) see the change.
    s.generation.fetch_add(1, std::memory_order_release);
  }
  lock hold(m_mutex);
  m_free.push_back(g.index - 1);
}

std::uint32_t group_table::never_closed(std::vector<std::exception_ptr>& errors) {
  lock hold(m_mutex);
  std::uint32_t n = 0;
  for (std::uint32_t i = 0; i < m_used; ++i) {
    group_slot& s = (*m_chunks[i / chunk_slots].load(std::memory_order_acquire))[i % chunk_slots];
    lock slot_hold(s.mutex);
    if (s.closed) continue;  // closed, and released when it completed (or being waited for)
    ++n;
    if (s.error) errors.push_back(s.error);
  }
  return n;
}

}  // namespace tessera::detail
