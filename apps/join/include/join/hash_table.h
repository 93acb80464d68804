// join/hash_table.h — the core-local hash tables of the join: one open-addressing table per
// partition, and the probe of a morsel against all of them.
//
// A key's hash picks its partition (the low 32 bits, scaled to the partition count) and its
// first slot in that partition's table (the high bits). A table holds {key, row + 1} slots,
// 0 marking an empty one, with linear probing; its capacity is a power of two at least twice
// its rows. A table is filled by one thread (its owner: in the tessera join the worker the
// partition belongs to) and only read once filled; nothing in it is atomic.
//
// probe_morsel looks up a run of probe rows in groups of 16: first every row's slot address is
// computed and prefetched, then the rows are probed, so that the cache misses of a group
// overlap (group prefetching, [Chen-prefetch] in docs/references.md).
//
//   join::partition_table t(rows_of_partition);         // on the owner's thread
//   t.insert(key, row);                                   // owner only
//   join::join_result r = join::probe_morsel(views, keys, values, first, last);
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "join/join_query.h"

namespace join {

/// The join's hash of a key (a full 64-bit mix: TPC-H keys are dense or strided).
inline std::uint64_t hash_key(std::int64_t key) noexcept {
  auto h = static_cast<std::uint64_t>(key);
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ULL;
  h ^= h >> 33;
  return h;
}

/// The partition of a hash among `partitions` (fast range reduction of the low 32 bits).
inline unsigned partition_of(std::uint64_t hash, unsigned partitions) noexcept {
  return static_cast<unsigned>(((hash & 0xffffffffULL) * partitions) >> 32);
}

struct hash_slot {
  std::int64_t key;
  std::uint64_t row_plus_one;  ///< 0: empty
};

/// What a probe needs of one partition's table.
struct table_view {
  const hash_slot* slots = nullptr;
  std::uint64_t mask = 0;  ///< capacity - 1
};

/// Zeroed memory for large arrays, straight from the kernel (mmap): nothing is touched until
/// used, so a table's pages are first touched by the thread that fills it, and beyond 2 MiB the
/// kernel is asked for huge pages (madvise MADV_HUGEPAGE): a probe of a table of tens of MiB
/// otherwise misses the TLB on nearly every row. Throws std::bad_alloc.
class zeroed_memory {
 public:
  zeroed_memory() = default;
  explicit zeroed_memory(std::size_t bytes);
  zeroed_memory(zeroed_memory&& other) noexcept;
  zeroed_memory& operator=(zeroed_memory&& other) noexcept;
  zeroed_memory(const zeroed_memory&) = delete;
  zeroed_memory& operator=(const zeroed_memory&) = delete;
  ~zeroed_memory();

  void* data() const noexcept { return m_data; }
  /// Bytes mapped (at least those asked for).
  std::size_t bytes() const noexcept { return m_bytes; }

 private:
  void* m_data = nullptr;
  std::size_t m_bytes = 0;
};

class partition_table {
 public:
  partition_table() = default;
  /// Room for `rows` rows, all slots empty (zeroed memory, touched only by the inserts).
  explicit partition_table(std::size_t rows);

  /// Inserts (key, row). Only the owner, and only before the table is probed.
  void insert(std::int64_t key, std::uint64_t hash, std::uint64_t row) noexcept {
    std::uint64_t i = (hash >> 32) & m_mask;
    while (m_slots[i].row_plus_one != 0) i = (i + 1) & m_mask;
    m_slots[i] = hash_slot{key, row + 1};
  }

  table_view view() const noexcept { return {m_slots, m_mask}; }
  std::size_t capacity() const noexcept { return m_slots != nullptr ? m_mask + 1 : 0; }

 private:
  zeroed_memory m_memory;
  hash_slot* m_slots = nullptr;
  std::uint64_t m_mask = 0;
};

/// count and sum of the probe rows [first, last) against the tables (one per partition, all
/// filled).
join_result probe_morsel(std::span<const table_view> tables, const std::int64_t* keys,
                         const std::int64_t* values, std::size_t first, std::size_t last) noexcept;

}  // namespace join
