// join/column_file.h — one column of 64-bit integers in a file of its own, mapped read-only.
//
// The column cache that apps/join/scripts/tpch_export.py writes holds one such file per column
// (keys, and prices in cents). A file is a 64-byte header and the values:
//
//   offset 0  magic "TSRJCOL1"   8  version (u32, 1)   12  type (u32, 1 = int64)
//          16 rows (u64)        24  checksum (u64): sum of value[i] * (2i + 1) modulo 2^64
//          32 reserved (zeros)  64  rows x 8 bytes of values, little endian
//
// Opening a file checks all of it: magic, version, type, that the size is exactly header plus
// rows (a truncated or extended file), and the checksum (a changed value); each failure is a
// cache_error naming the file and what is wrong. Reading the values for the checksum also
// brings the mapped pages in, so that a join timed afterwards does not pay their page faults.
//
//   join::column_file keys("build/tpch-cache/sf1/orders.o_custkey.col");
//   std::span<const std::int64_t> v = keys.values();     // 1,500,000 custkeys
//   join::write_column_file("/tmp/k.col", v);             // the same format (tests, tools)
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <stdexcept>
#include <string>

namespace join {

/// The cache is missing, unreadable or damaged; what() names the file and the problem.
class cache_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The file format's checksum of `values` (see the top of this file).
std::uint64_t column_checksum(std::span<const std::int64_t> values) noexcept;

class column_file {
 public:
  column_file() = default;
  /// Maps and checks `path`; throws cache_error.
  explicit column_file(const std::filesystem::path& path);
  column_file(column_file&& other) noexcept;
  column_file& operator=(column_file&& other) noexcept;
  column_file(const column_file&) = delete;
  column_file& operator=(const column_file&) = delete;
  ~column_file();

  std::span<const std::int64_t> values() const noexcept { return {m_values, m_rows}; }
  std::size_t size() const noexcept { return m_rows; }
  const std::filesystem::path& path() const noexcept { return m_path; }

 private:
  void unmap() noexcept;

  std::filesystem::path m_path;
  void* m_map = nullptr;
  std::size_t m_map_bytes = 0;
  const std::int64_t* m_values = nullptr;
  std::size_t m_rows = 0;
};

/// Writes `values` as a column file at `path` (replacing it); throws cache_error if it cannot.
void write_column_file(const std::filesystem::path& path, std::span<const std::int64_t> values);

}  // namespace join
