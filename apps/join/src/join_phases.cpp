// The steps of one join run (join/join_phases.h).
#include "join/join_phases.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace join {

join_phases::join_phases(const join_input& input, unsigned partitions,
                         std::size_t records_per_task, run_memory* reuse)
    : m_input(input), m_partitions(partitions), m_records(records_per_task), m_reuse(reuse) {
  if (partitions == 0) throw std::invalid_argument("join: 0 partitions");
  if (partitions > dense_table::max_partitions)
    throw std::invalid_argument("join: " + std::to_string(partitions) + " partitions (at most " +
                                std::to_string(dense_table::max_partitions) + ")");
  if (records_per_task == 0) throw std::invalid_argument("join: 0 records per task");
  if (input.probe_keys.size() != input.probe_values.size())
    throw std::invalid_argument("join input: " + std::to_string(input.probe_keys.size()) +
                                " probe keys but " + std::to_string(input.probe_values.size()) +
                                " probe values");
  m_build_morsels = (input.build_keys.size() + m_records - 1) / m_records;
  m_probe_morsels = (input.probe_keys.size() + m_records - 1) / m_records;
  // The scatter buffer: every row of it is written by partition_morsel before build reads it, so
  // a former run's buffer serves as it is (no zeroing), sparing the kernel's page faults.
  const std::size_t scatter_bytes = input.build_keys.size() * sizeof(entry);
  if (reuse != nullptr && reuse->m_scatter.bytes() >= scatter_bytes) {
    m_scatter_memory = std::move(reuse->m_scatter);
  } else {
    m_scatter_memory = zeroed_memory(scatter_bytes);  // none for 0 bytes
  }
  m_scatter = static_cast<entry*>(m_scatter_memory.data());
  m_offsets.reset(new std::size_t[m_build_morsels * (m_partitions + 1)]);
  m_bounds.reset(new key_bounds[m_build_morsels]);
  m_tables.resize(m_partitions);
  m_views.resize(m_partitions);
}

join_phases::~join_phases() {
  // At least what reuse held: this run took that, or found it too small.
  if (m_reuse != nullptr && m_scatter_memory.data() != nullptr)
    m_reuse->m_scatter = std::move(m_scatter_memory);
}

void join_phases::bound_morsel(std::size_t m) noexcept {
  const std::size_t first = m * m_records;
  const std::size_t last = std::min(first + m_records, m_input.build_keys.size());
  m_bounds[m] = bounds_of(m_input.build_keys.data(), first, last);
}

void join_phases::choose_table() {
  key_bounds all;
  for (std::size_t m = 0; m < m_build_morsels; ++m) all += m_bounds[m];
  m_dense = use_dense_table(all, m_input.build_keys.size());
  if (m_dense) m_dense_table = dense_table(all, m_partitions, m_reuse);
  m_scan = m_dense &&
           spanned_partitions() <= std::uint64_t{dense_scan_reads} * m_build_morsels;
}

std::uint64_t join_phases::spanned_partitions() const noexcept {
  std::uint64_t spanned = 0;
  for (std::size_t m = 0; m < m_build_morsels; ++m) {
    const key_bounds& b = m_bounds[m];
    spanned += m_dense_table.partition_of(b.max) - m_dense_table.partition_of(b.min) + 1;
  }
  return spanned;
}

template <typename PartitionOf>
void join_phases::scatter_morsel(std::size_t m, PartitionOf partition_of) noexcept {
  const std::size_t first = m * m_records;
  const std::size_t last = std::min(first + m_records, m_input.build_keys.size());
  std::size_t* offsets = offsets_of(m);
  std::fill(offsets, offsets + m_partitions + 1, 0);
  const std::int64_t* keys = m_input.build_keys.data();
  for (std::size_t i = first; i < last; ++i) ++offsets[partition_of(keys[i]) + 1];
  offsets[0] = first;
  for (unsigned p = 1; p <= m_partitions; ++p) offsets[p] += offsets[p - 1];
  // Scatter with a cursor per partition: offsets[p] moves to the end of partition p's run, and
  // is moved back after.
  for (std::size_t i = first; i < last; ++i) {
    const unsigned p = partition_of(keys[i]);
    m_scatter[offsets[p]++] = entry{keys[i], i};
  }
  for (unsigned p = m_partitions; p > 0; --p) offsets[p] = offsets[p - 1];
  offsets[0] = first;
}

void join_phases::partition_morsel(std::size_t m) noexcept {
  if (m_scan) return;
  const unsigned partitions = m_partitions;
  if (m_dense) {
    const dense_table& table = m_dense_table;
    scatter_morsel(m, [&table](std::int64_t key) { return table.partition_of(key); });
  } else {
    scatter_morsel(m, [partitions](std::int64_t key) {
      return join::partition_of(hash_key(key), partitions);
    });
  }
}

std::size_t join_phases::partition_rows(unsigned p) const noexcept {
  std::size_t rows = 0;
  if (m_scan) {  // no scatter: count them
    for (const std::int64_t key : m_input.build_keys)
      rows += m_dense_table.partition_of(key) == p ? 1 : 0;
    return rows;
  }
  for (std::size_t m = 0; m < m_build_morsels; ++m) {
    const std::size_t* o = offsets_of(m);
    rows += o[p + 1] - o[p];
  }
  return rows;
}

void join_phases::allocate_partition(unsigned p) {
  if (m_dense) {  // one table, allocated by choose_table; p's run is touched by build(p)
    m_dense_table.clear_partition(p);  // memory from a former run: its counts to 0
    return;
  }
  m_tables[p] = partition_table(partition_rows(p));
  m_views[p] = m_tables[p].view();
}

void join_phases::build(unsigned p, std::size_t first_morsel, std::size_t last_morsel) noexcept {
  if (m_scan) {
    // Each morsel's key bounds (phase 0) say which partitions its keys can fall in (partition_of
    // is monotone in the key): a morsel wholly in another partition is skipped, one wholly in p
    // is counted without a partition test per key, and only a morsel that straddles p's edge is
    // read key by key. Build keys that come clustered (TPC-H's in key order) are then read about
    // once in all instead of once per partition; keys in random order straddle every edge and
    // cost what the plain scan did.
    const std::int64_t* keys = m_input.build_keys.data();
    for (std::size_t m = first_morsel; m < last_morsel; ++m) {
      const std::size_t first = m * m_records;
      const std::size_t last = std::min(first + m_records, m_input.build_keys.size());
      const key_bounds& b = m_bounds[m];
      if (first >= last) continue;
      const unsigned low = m_dense_table.partition_of(b.min);
      const unsigned high = m_dense_table.partition_of(b.max);
      if (p < low || p > high) continue;
      if (low == high) {
        m_dense_table.insert_all(keys, first, last);
      } else {
        m_dense_table.insert_partition(p, keys, first, last);
      }
    }
    return;
  }
  if (m_dense) {
    for (std::size_t m = first_morsel; m < last_morsel; ++m) {
      const std::size_t* o = offsets_of(m);
      for (std::size_t i = o[p]; i < o[p + 1]; ++i) m_dense_table.insert(m_scatter[i].key);
    }
    return;
  }
  partition_table& table = m_tables[p];
  for (std::size_t m = first_morsel; m < last_morsel; ++m) {
    const std::size_t* o = offsets_of(m);
    for (std::size_t i = o[p]; i < o[p + 1]; ++i) {
      const entry e = m_scatter[i];
      table.insert(e.key, hash_key(e.key), e.row);
    }
  }
}

join_result join_phases::probe_hashed(std::size_t first, std::size_t last) const noexcept {
  return probe_morsel(m_views, m_input.probe_keys.data(), m_input.probe_values.data(), first,
                      last);
}

}  // namespace join
