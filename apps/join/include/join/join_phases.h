// join/join_phases.h — one run of the partitioned hash join, as steps that tasks call.
//
// The steps, in order (each a phase: every step of one phase finishes before the next starts):
//
//   0. bound_morsel(m), m < build_morsels(): the smallest and largest key of build rows
//      [m*R, (m+1)*R) (R: records per task). Any thread. Then choose_table(), once, on one
//      thread: the direct-addressed table of dense_table.h when the build keys' range is at most
//      4 times the build rows (dense()), the hash tables of hash_table.h otherwise.
//   1. partition_morsel(m), m < build_morsels(): writes build rows [m*R, (m+1)*R), grouped by
//      partition (by hash; for the dense table by key range), into the morsel's own region of
//      the scatter buffer. Any thread; morsels touch disjoint memory. Not for a dense table whose
//      morsels' key bounds (step 0) span at most dense_scan_reads partitions a morsel on average
//      (keys in random order span every partition: at most dense_scan_reads partitions; keys
//      that come clustered, as TPC-H's in key order, one or two at any partition count): there
//      each build step reads the build keys themselves and counts those of its partition,
//      skipping the morsels whose bounds lie in other partitions, so each key is read about
//      that many times in all, and the step returns. (The scatter writes and reads 16 bytes a
//      row and, in a fresh buffer, has the kernel zero them: for orders at scale factor 1 the
//      scatter and its fresh pages were over half the run; run_memory keeps the buffer.)
//   2. allocate_partition(p), p < partitions(), then build(p, first, last) over the morsels
//      [first, last): inserts partition p's rows of those morsels into table p (the dense
//      table: into p's run of counters, allocated by choose_table, touched first here, or,
//      reused from a former run, cleared by allocate_partition(p)). Every
//      step of partition p on one thread at a time, allocate first (the tessera join runs them
//      all on worker p, so table p is touched only there).
//   3. probe(m), m < probe_morsels(): probes probe rows [m*R, (m+1)*R) against every table and
//      returns their count and sum (probe_morsels(f, l): morsels [f, l) at once). Any thread;
//      reads only.
//
// The driver adds up what the probes return (the tessera join: per-worker partial sums,
// combined at the end). build_chunk_morsels() is how many build morsels one build step takes so
// that it inserts about R rows (R / partitions rows of each morsel belong to one partition).
//
//   join::join_phases run(input, partitions, 4096);
//   for (m ...) run.bound_morsel(m);
//   run.choose_table();
//   for (m ...) run.partition_morsel(m);
//   for (p ...) { run.allocate_partition(p); run.build(p, 0, run.build_morsels()); }
//   join::join_result r; for (m ...) r += run.probe(m);
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "join/dense_table.h"
#include "join/hash_table.h"
#include "join/join_query.h"

namespace join {

class join_phases {
 public:
  /// Throws std::invalid_argument for 0 partitions, 0 records per task, or probe columns of
  /// different lengths. `reuse` (optional, outliving this run): memory a dense table and the
  /// scatter buffer take from and give back to, from one run to the next; each partition's
  /// counters are then cleared by allocate_partition, on the partition's thread (the scatter
  /// buffer needs no clearing: phase 1 writes every row of it before phase 2 reads it).
  join_phases(const join_input& input, unsigned partitions, std::size_t records_per_task,
              run_memory* reuse = nullptr);
  join_phases(const join_phases&) = delete;
  join_phases& operator=(const join_phases&) = delete;
  /// Gives the scatter buffer back to `reuse`.
  ~join_phases();

  unsigned partitions() const noexcept { return m_partitions; }
  std::size_t records_per_task() const noexcept { return m_records; }
  std::size_t build_morsels() const noexcept { return m_build_morsels; }
  std::size_t probe_morsels() const noexcept { return m_probe_morsels; }
  std::size_t build_chunk_morsels() const noexcept { return m_partitions; }

  void bound_morsel(std::size_t m) noexcept;
  /// After every bound_morsel. Throws std::bad_alloc (the dense table's memory).
  void choose_table();
  /// Whether choose_table chose the direct-addressed table.
  bool dense() const noexcept { return m_dense; }
  /// Whether phase 1 has work (after choose_table): false for a dense table built from the
  /// build keys themselves, whose partition_morsel returns at once.
  bool scatters() const noexcept { return !m_scan; }
  /// The most partitions a build morsel's key bounds may span on average for a dense table's
  /// build to read the build keys directly (no scatter): each key is then read about that many
  /// times, against the scatter's write and read of 16 bytes a row.
  static constexpr unsigned dense_scan_reads = 4;

  void partition_morsel(std::size_t m) noexcept;
  void allocate_partition(unsigned p);
  void build(unsigned p, std::size_t first_morsel, std::size_t last_morsel) noexcept;
  join_result probe(std::size_t m) const noexcept { return probe_morsels(m, m + 1); }
  /// probe(m) for every m in [first_morsel, last_morsel), as one run of rows: adjacent morsels'
  /// rows are adjacent, so a driver that is handed several morsels at once pays the kernel's
  /// set-up once. Inline for the dense table (its kernel is a few instructions a row, and a
  /// task of 128 rows pays the call's set-up once per task); the hash tables' probe is out of
  /// line.
  join_result probe_morsels(std::size_t first_morsel, std::size_t last_morsel) const noexcept {
    const std::size_t rows = m_input.probe_keys.size();
    const std::size_t first = first_morsel * m_records;
    const std::size_t last = std::min(last_morsel * m_records, rows);
    if (m_dense)
      return probe_dense(m_dense_table.view(), m_input.probe_keys.data(),
                         m_input.probe_values.data(), first, last);
    return probe_hashed(first, last);
  }

  /// Rows of partition p (after phase 1).
  std::size_t partition_rows(unsigned p) const noexcept;

 private:
  struct entry {
    std::int64_t key;
    std::uint64_t row;
  };
  /// Offsets of morsel m's partitions in the scatter buffer: [m * (P + 1), (m + 1) * (P + 1)).
  std::size_t* offsets_of(std::size_t m) const noexcept {
    return m_offsets.get() + m * (m_partitions + 1);
  }

  /// probe() against the hash tables: probe rows [first, last).
  join_result probe_hashed(std::size_t first, std::size_t last) const noexcept;

  template <typename PartitionOf>
  void scatter_morsel(std::size_t m, PartitionOf partition_of) noexcept;

  join_input m_input;
  unsigned m_partitions;
  std::size_t m_records;
  std::size_t m_build_morsels;
  std::size_t m_probe_morsels;
  zeroed_memory m_scatter_memory;
  entry* m_scatter = nullptr;                ///< build rows, grouped by partition per morsel
  std::unique_ptr<std::size_t[]> m_offsets;  ///< see offsets_of
  std::unique_ptr<key_bounds[]> m_bounds;  ///< per build morsel (phase 0)
  run_memory* m_reuse = nullptr;
  bool m_dense = false;
  bool m_scan = false;  ///< dense, and built from the build keys without the scatter
  /// choose_table's measure: the partitions the build morsels' key bounds span, summed.
  std::uint64_t spanned_partitions() const noexcept;
  dense_table m_dense_table;
  std::vector<partition_table> m_tables;
  std::vector<table_view> m_views;
};

}  // namespace join
