// join/dense_table.h — the join's direct-addressed table, for build keys of a dense range: one
// counter per key in [min, max], indexed by key - min (a perfect hash, as DuckDB's perfect hash
// join), instead of the hash tables of hash_table.h.
//
// A counter holds how many build rows have its key: what the join's answer needs of the build
// side (count(*) and the sum of a probe column over the matching pairs), so a repeated build key
// costs nothing special. A join that fetched build columns would keep a row per key instead and
// fall back to the hash table on a repeated key.
//
// When: use_dense_table(bounds, rows) holds when max - min + 1 <= 4 * rows (and rows < 2^32, so
// a counter cannot overflow): the table then takes at most 16 bytes per build row, half the
// least a hash table takes (16-byte slots, at most half full), and a probe is one load with no
// hashing, no partition choice and no collision chain. TPC-H's customer keys (1..150,000 per
// scale factor) and order keys (8 of every 32 in 1..6,000,000) qualify.
//
// Partitions: the key range is cut into `partitions` runs of whole cache lines of counters
// (partition_of: a multiplication and a shift, no division); a run is written only by its owner
// (in the tessera join its worker), so the counters are plain integers, and the runs share no
// cache line. Probes read the table once the
// build is done (a phase boundary: a happens-before edge) and need no partition.
//
//   join::key_bounds b;  for (k : build_keys) b.add(k);
//   if (join::use_dense_table(b, rows)) {
//     join::dense_table t(b, P);                    // zeroed, touched by the inserts
//     t.insert(k);                                  // by the owner of t.partition_of(k)
//     join::join_result r = join::probe_dense(t.view(), keys, values, first, last);
//   }
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "join/hash_table.h"
#include "join/join_query.h"

namespace join {

/// The smallest and largest of a set of keys; empty() while none was added.
struct key_bounds {
  std::int64_t min = std::numeric_limits<std::int64_t>::max();
  std::int64_t max = std::numeric_limits<std::int64_t>::min();

  bool empty() const noexcept { return min > max; }
  void add(std::int64_t key) noexcept {
    min = std::min(min, key);
    max = std::max(max, key);
  }
  key_bounds& operator+=(const key_bounds& other) noexcept {
    min = std::min(min, other.min);
    max = std::max(max, other.max);
    return *this;
  }
};

/// The bounds of keys[first, last).
key_bounds bounds_of(const std::int64_t* keys, std::size_t first, std::size_t last) noexcept;

/// max - min + 1 <= 4 * rows, rows in [1, 2^32): see the header comment.
bool use_dense_table(const key_bounds& bounds, std::size_t rows) noexcept;

/// What a probe needs of a dense table.
struct dense_view {
  const std::uint32_t* counts = nullptr;  ///< counts[range] is 0: where every other key lands
  std::int64_t min = 0;
  std::uint64_t range = 0;  ///< max - min + 1
};

/// The memory a join keeps from one run to the next (a join run many times, as a query plan is
/// run per query): a dense table's counters and the build rows' scatter buffer (join_phases).
/// A new table or run takes each when it is large enough and gives it back when destroyed, so
/// its pages are not faulted in and zeroed by the kernel again every run (orders-lineitem at
/// scale factor 10: 240 MB of counters a run, 43 % of a 1-worker run's samples in the kernel's
/// clear_page; at 16 workers a fresh 24 MB scatter buffer at sf 1 made its first writers take
/// 300-450 µs a morsel instead of 30, the other workers parked meanwhile). Used by one run at a
/// time; outlives the runs that use it.
class run_memory {
 public:
  /// Bytes held for the dense table (0: none).
  std::size_t bytes() const noexcept { return m_memory.bytes(); }
  /// Bytes held for the scatter buffer (0: none).
  std::size_t scatter_bytes() const noexcept { return m_scatter.bytes(); }

 private:
  friend class dense_table;
  friend class join_phases;
  zeroed_memory m_memory;
  zeroed_memory m_scatter;
};

class dense_table {
 public:
  dense_table() = default;
  /// Most partitions a table is cut into.
  static constexpr unsigned max_partitions = 1U << 16;

  /// Counters for the keys in `bounds` (not empty, use_dense_table), cut into `partitions` runs
  /// (1..max_partitions). Without `reuse`, or when it holds too little, fresh zeroed memory (the
  /// counters are 0); otherwise reuse's memory, whose counters hold a former table's counts
  /// until each partition's owner calls clear_partition. Throws std::bad_alloc.
  dense_table(const key_bounds& bounds, unsigned partitions, run_memory* reuse = nullptr);
  dense_table(dense_table&& other) noexcept;
  dense_table& operator=(dense_table&& other) noexcept;
  dense_table(const dense_table&) = delete;
  dense_table& operator=(const dense_table&) = delete;
  /// Gives the memory to `reuse` (it holds the larger of the two then).
  ~dense_table();

  /// Whether the counters must be cleared (clear_partition) before the first insert.
  bool needs_clear() const noexcept { return m_needs_clear; }
  /// Sets partition p's run of counters to 0 (with the last partition, every counter after the
  /// keys' lines too: counts[range] among them); a no-op where !needs_clear(). Only the owner
  /// of p, before its first insert; the partitions' runs share no cache line.
  void clear_partition(unsigned p) noexcept;

  /// The partition whose owner counts `key` (a key within the bounds): about
  /// line * partitions / lines for the key's cache line of counters, never partitions or above.
  unsigned partition_of(std::int64_t key) const noexcept {
    const std::uint64_t line = index_of(key) / counters_per_line;
    return static_cast<unsigned>((line * m_scale) >> scale_bits);
  }

  /// Counts one build row of `key` (within the bounds). Only the owner of its partition, and
  /// only before the table is probed.
  void insert(std::int64_t key) noexcept { ++m_counts[index_of(key)]; }

  /// Counts the keys of keys[first, last) (all within the bounds) that fall in partition p:
  /// for a build that reads the build keys themselves instead of a partitioned copy. Only the
  /// owner of p, and only before the table is probed.
  void insert_partition(unsigned p, const std::int64_t* keys, std::size_t first,
                        std::size_t last) noexcept;

  /// Counts every key of keys[first, last): all of them within the bounds and in one partition,
  /// whose owner calls this (a build that knows a run of keys lies in its partition, e.g. from
  /// the run's bounds, skips partition_of). Only before the table is probed.
  void insert_all(const std::int64_t* keys, std::size_t first, std::size_t last) noexcept {
    for (std::size_t i = first; i < last; ++i) ++m_counts[index_of(keys[i])];
  }

  dense_view view() const noexcept { return {m_counts, m_min, m_range}; }

 private:
  static constexpr std::uint64_t counters_per_line = 64 / sizeof(std::uint32_t);
  /// line * m_scale stays below partitions * 2^40 <= 2^56; lines < 2^30 (keys < 2^34), so
  /// m_scale >= 2^10 and the runs differ in length by about a thousandth at most.
  static constexpr unsigned scale_bits = 40;

  std::uint64_t index_of(std::int64_t key) const noexcept {
    return static_cast<std::uint64_t>(key) - static_cast<std::uint64_t>(m_min);
  }

  /// The first line of counters of partition p (p <= partitions: the end of the last).
  std::uint64_t first_line(unsigned p) const noexcept;
  /// The memory to m_reuse, if it came from there or replaces what it held.
  void give_back() noexcept;

  zeroed_memory m_memory;
  std::uint32_t* m_counts = nullptr;
  std::int64_t m_min = 0;
  std::uint64_t m_range = 0;
  std::uint64_t m_scale = 0;  ///< floor(partitions * 2^scale_bits / lines)
  std::uint64_t m_lines = 0;  ///< lines of counters holding keys
  std::uint64_t m_all_lines = 0;  ///< lines of counters in use (counts[range] among them)
  unsigned m_partitions = 0;
  bool m_needs_clear = false;
  run_memory* m_reuse = nullptr;  ///< where the memory goes back to
};

/// count and sum of the probe rows [first, last) against a filled dense table. Inline: a probe
/// task of 128 rows is ~250 ns, and the call's own cost (saving registers, realigning the
/// stack for the vector loop) is part of what a task costs beyond its rows.
inline join_result probe_dense(const dense_view& table, const std::int64_t* keys,
                               const std::int64_t* values, std::size_t first,
                               std::size_t last) noexcept {
  // No branch per row: a key outside the bounds reads the 0 at counts[range]. The loads do not
  // depend on each other, so the core overlaps their misses without prefetch instructions
  // (software prefetches of counts[] at 64-2048 rows ahead made this loop 1.3-1.8x slower on
  // TPC-H at scale factor 10, the table in huge pages: docs/performance-notes.md).
  const std::uint32_t* counts = table.counts;
  const auto min = static_cast<std::uint64_t>(table.min);
  const std::uint64_t range = table.range;
  std::uint64_t count = 0;
  std::int64_t sum = 0;
  for (std::size_t i = first; i < last; ++i) {
    const std::uint64_t index = static_cast<std::uint64_t>(keys[i]) - min;
    const std::uint32_t c = counts[index < range ? index : range];
    count += c;
    sum += static_cast<std::int64_t>(c) * values[i];
  }
  return {count, sum};
}

}  // namespace join
