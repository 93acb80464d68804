// The partition tables and the probe kernel (join/hash_table.h).
#include "join/hash_table.h"

#include <sys/mman.h>

#include <algorithm>
#include <bit>
#include <new>
#include <utility>

namespace join {

zeroed_memory::zeroed_memory(std::size_t bytes) {
  constexpr std::size_t huge_page = std::size_t{2} << 20;
  if (bytes == 0) return;
  m_bytes = bytes >= huge_page ? (bytes + huge_page - 1) / huge_page * huge_page : bytes;
  void* p = ::mmap(nullptr, m_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  if (m_bytes >= huge_page) (void)::madvise(p, m_bytes, MADV_HUGEPAGE);  // a hint: may be refused
  m_data = p;
}

zeroed_memory::zeroed_memory(zeroed_memory&& other) noexcept
    : m_data(std::exchange(other.m_data, nullptr)), m_bytes(std::exchange(other.m_bytes, 0)) {}

zeroed_memory& zeroed_memory::operator=(zeroed_memory&& other) noexcept {
  if (this != &other) {
    if (m_data != nullptr) ::munmap(m_data, m_bytes);
    m_data = std::exchange(other.m_data, nullptr);
    m_bytes = std::exchange(other.m_bytes, 0);
  }
  return *this;
}

zeroed_memory::~zeroed_memory() {
  if (m_data != nullptr) ::munmap(m_data, m_bytes);
}

partition_table::partition_table(std::size_t rows) {
  const std::size_t capacity = std::bit_ceil(std::max<std::size_t>(16, rows * 2));
  m_memory = zeroed_memory(capacity * sizeof(hash_slot));  // every slot empty
  m_slots = static_cast<hash_slot*>(m_memory.data());
  m_mask = capacity - 1;
}

join_result probe_morsel(std::span<const table_view> tables, const std::int64_t* keys,
                         const std::int64_t* values, std::size_t first, std::size_t last) noexcept {
  constexpr std::size_t group = 16;
  const auto partitions = static_cast<unsigned>(tables.size());
  join_result r;
  const hash_slot* start[group];
  const table_view* table[group];
  for (std::size_t base = first; base < last; base += group) {
    const std::size_t n = std::min(group, last - base);
    for (std::size_t j = 0; j < n; ++j) {
      const std::uint64_t h = hash_key(keys[base + j]);
      const table_view* t = &tables[partition_of(h, partitions)];
      table[j] = t;
      start[j] = t->slots + ((h >> 32) & t->mask);
      __builtin_prefetch(start[j]);
    }
    for (std::size_t j = 0; j < n; ++j) {
      const std::int64_t key = keys[base + j];
      const table_view* t = table[j];
      const hash_slot* s = start[j];
      std::uint64_t matches = 0;
      while (s->row_plus_one != 0) {
        matches += s->key == key ? 1 : 0;
        s = t->slots + ((static_cast<std::uint64_t>(s - t->slots) + 1) & t->mask);
      }
      r.count += matches;
      r.sum += static_cast<std::int64_t>(matches) * values[base + j];
    }
  }
  return r;
}

}  // namespace join
