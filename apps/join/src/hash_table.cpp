// The partition tables and the probe kernel (join/hash_table.h).
#include "join/hash_table.h"

#include <algorithm>
#include <bit>

namespace join {

partition_table::partition_table(std::size_t rows) {
  const std::size_t capacity = std::bit_ceil(std::max<std::size_t>(16, rows * 2));
  m_slots.reset(new hash_slot[capacity]());  // value-initialized: every slot empty
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
