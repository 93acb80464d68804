// bench/common/reporter.h — result rows of a benchmark run: an aligned table and JSON lines.
//
// A benchmark adds one row per configuration it measured (implementation × workers × its own
// parameters, which go in free "extra" columns such as n or pattern). At the end the reporter
// prints the rows as a table with a ratio column — ops/s divided by the ops/s of the reference
// implementation at the same workers and the same extra values — and writes each measured row
// as one JSON object per line. A configuration that cannot run is added as a skipped row with a
// note; it appears in the table and not in the JSON.
//
//   reporter out("onetbb");
//   out.add(row("fib", "tessera", 2, m).with("n", 30));
//   out.add(row::skipped("spawn", "onetbb", 2, "task_group cannot place tasks")
//               .with("pattern", "roundrobin"));
//   std::fputs(out.table().c_str(), stdout);
//   out.write_json(file);
#pragma once

#include <concepts>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "common/timing.h"

namespace tessera::bench {

/// The value of an extra column: an integer, a number or a string.
using cell = std::variant<std::int64_t, double, std::string>;

struct row {
  std::string benchmark;
  std::string implementation;
  unsigned workers = 0;
  measurement result;
  std::vector<std::pair<std::string, cell>> extra;  ///< in the order added
  std::string note;                                 ///< non-empty: not measured, for this reason
  std::string remark;  ///< a measured row's caveat (table note column, JSON "remark")

  row(std::string benchmark_name, std::string implementation_name, unsigned worker_count,
      measurement m);
  static row skipped(std::string benchmark_name, std::string implementation_name,
                     unsigned worker_count, std::string why);

  /// Adds an extra column. Keys must not repeat nor name a standard field (programmer error).
  row& with(std::string key, cell value) &;
  row&& with(std::string key, cell value) && {
    return std::move(with(std::move(key), std::move(value)));
  }
  template <std::integral I>
  row& with(std::string key, I value) & {
    return with(std::move(key), cell(static_cast<std::int64_t>(value)));
  }
  template <std::integral I>
  row&& with(std::string key, I value) && {
    return std::move(with(std::move(key), value));
  }
  row& with(std::string key, const char* value) & {
    return with(std::move(key), cell(std::string(value)));
  }
  row&& with(std::string key, const char* value) && {
    return std::move(with(std::move(key), value));
  }
  row& with(std::string key, const std::string& value) & {
    return with(std::move(key), cell(value));
  }
  row&& with(std::string key, const std::string& value) && {
    return std::move(with(std::move(key), value));
  }
  row& with(std::string key, std::string_view value) & {
    return with(std::move(key), cell(std::string(value)));
  }
  row&& with(std::string key, std::string_view value) && {
    return std::move(with(std::move(key), value));
  }

  /// Attaches a caveat to a measured row ("libgomp ran most tasks inline").
  row& with_remark(std::string text) & {
    remark = std::move(text);
    return *this;
  }
  row&& with_remark(std::string text) && { return std::move(with_remark(std::move(text))); }

  bool measured() const noexcept { return note.empty(); }
  double ops_per_second() const noexcept;
  /// Worker-nanoseconds per operation: seconds × workers / ops × 1e9.
  double ns_per_op() const noexcept;
};

class reporter {
 public:
  /// `reference`: the implementation the ratio column divides by ("" for no ratio column).
  explicit reporter(std::string reference) : m_reference(std::move(reference)) {}

  void add(row r) { m_rows.push_back(std::move(r)); }
  const std::vector<row>& rows() const noexcept { return m_rows; }
  const std::string& reference() const noexcept { return m_reference; }

  /// The measured reference row with the same benchmark, workers and extra values, if any.
  const row* reference_for(const row& r) const noexcept;

  /// The aligned table, with a legend; "" when there are no rows.
  std::string table() const;
  /// Writes one JSON object per measured row, each terminated by '\n'.
  void write_json(std::FILE* out) const;
  /// The JSON object for `r` (without newline); ratio fields only when `reference` is given.
  static std::string to_json(const row& r, const row* reference, std::string_view reference_name);

 private:
  std::string m_reference;
  std::vector<row> m_rows;
};

/// `text` as a JSON string literal, quotes included.
std::string json_string(std::string_view text);

}  // namespace tessera::bench
