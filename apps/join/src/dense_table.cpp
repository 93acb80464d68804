// The direct-addressed table and its probe (join/dense_table.h).
#include "join/dense_table.h"

#include <cstring>
#include <utility>

namespace join {

key_bounds bounds_of(const std::int64_t* keys, std::size_t first, std::size_t last) noexcept {
  key_bounds b;
  for (std::size_t i = first; i < last; ++i) b.add(keys[i]);
  return b;
}

bool use_dense_table(const key_bounds& bounds, std::size_t rows) noexcept {
  if (bounds.empty() || rows == 0 || rows > std::numeric_limits<std::uint32_t>::max())
    return false;
  // max - min in unsigned arithmetic: exact for any two int64 keys, and 4 * rows < 2^34.
  const std::uint64_t span =
      static_cast<std::uint64_t>(bounds.max) - static_cast<std::uint64_t>(bounds.min);
  return span < 4 * static_cast<std::uint64_t>(rows);
}

dense_table::dense_table(const key_bounds& bounds, unsigned partitions, run_memory* reuse)
    : m_min(bounds.min),
      m_range(static_cast<std::uint64_t>(bounds.max) - static_cast<std::uint64_t>(bounds.min) +
              1),
      m_partitions(partitions) {
  m_lines = (m_range + counters_per_line - 1) / counters_per_line;
  m_scale = (std::uint64_t{partitions} << scale_bits) / m_lines;
  // One more counter than keys, never written: counts[range], where a probe of a key outside
  // the bounds looks.
  m_all_lines = (m_range + 1 + counters_per_line - 1) / counters_per_line;
  const std::size_t bytes = m_all_lines * counters_per_line * sizeof(std::uint32_t);
  if (reuse != nullptr && reuse->m_memory.bytes() >= bytes) {
    m_memory = std::move(reuse->m_memory);
    m_needs_clear = true;
  } else {
    m_memory = zeroed_memory(bytes);
  }
  m_reuse = reuse;
  m_counts = static_cast<std::uint32_t*>(m_memory.data());
}

dense_table::dense_table(dense_table&& other) noexcept
    : m_memory(std::move(other.m_memory)),
      m_counts(std::exchange(other.m_counts, nullptr)),
      m_min(other.m_min),
      m_range(other.m_range),
      m_scale(other.m_scale),
      m_lines(other.m_lines),
      m_all_lines(other.m_all_lines),
      m_partitions(other.m_partitions),
      m_needs_clear(other.m_needs_clear),
      m_reuse(std::exchange(other.m_reuse, nullptr)) {}

dense_table& dense_table::operator=(dense_table&& other) noexcept {
  if (this != &other) {
    give_back();
    m_memory = std::move(other.m_memory);
    m_counts = std::exchange(other.m_counts, nullptr);
    m_min = other.m_min;
    m_range = other.m_range;
    m_scale = other.m_scale;
    m_lines = other.m_lines;
    m_all_lines = other.m_all_lines;
    m_partitions = other.m_partitions;
    m_needs_clear = other.m_needs_clear;
    m_reuse = std::exchange(other.m_reuse, nullptr);
  }
  return *this;
}

dense_table::~dense_table() { give_back(); }

void dense_table::give_back() noexcept {
  // The memory is at least what reuse held: this table took that, or found it too small.
  if (m_reuse != nullptr && m_memory.data() != nullptr) m_reuse->m_memory = std::move(m_memory);
  m_reuse = nullptr;
  m_counts = nullptr;
}

std::uint64_t dense_table::first_line(unsigned p) const noexcept {
  if (p >= m_partitions) return m_all_lines;
  // The smallest line with line * m_scale >= p * 2^scale_bits (partition_of is monotone), at
  // most m_lines. p * 2^scale_bits < 2^56: no overflow.
  const std::uint64_t target = std::uint64_t{p} << scale_bits;
  return std::min(m_lines, (target + m_scale - 1) / m_scale);
}

void dense_table::clear_partition(unsigned p) noexcept {
  if (!m_needs_clear) return;
  const std::uint64_t first = first_line(p);
  const std::uint64_t last = first_line(p + 1);
  if (last > first)
    std::memset(m_counts + first * counters_per_line, 0,
                (last - first) * counters_per_line * sizeof(std::uint32_t));
}

void dense_table::insert_partition(unsigned p, const std::int64_t* keys, std::size_t first,
                                   std::size_t last) noexcept {
  // A branch per key, predicted where the build keys come in key order (TPC-H's); keys in
  // random order mispredict about half of them at 2 partitions. (Counting another partition's
  // key into a local sink instead compiled to the same branch.) Most of the time here is the
  // reading of the keys, which every partition's build does.
  for (std::size_t i = first; i < last; ++i) {
    const std::int64_t key = keys[i];
    if (partition_of(key) == p) ++m_counts[index_of(key)];
  }
}

}  // namespace join
