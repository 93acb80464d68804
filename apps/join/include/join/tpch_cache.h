// join/tpch_cache.h — the TPC-H columns of the joins, from the column cache that DuckDB's
// generator fills (apps/join/scripts/tpch_export.py), and DuckDB's answers stored beside them.
//
// The cache of scale factor s is <root>/sf<s>/ (sf1, sf10, sf0.01): a column file per column
// (column_file.h) and reference.txt ("<join> <count> <sum in cents>" per line). ensure_cache()
// runs the export script with the project's virtual environment's Python if the directory is
// missing, and leaves an existing one as it is; load_tpch() maps and checks every file.
//
//   join::require_memory_for(10);                                    // or a clear error
//   auto dir = join::ensure_cache({.root = "build/tpch-cache", .scale_factor = 1});
//   join::tpch_columns t = join::load_tpch(dir);                     // cache_error if damaged
//   join::join_input in = t.input(join::join_kind::customer_orders);
//   join::join_result want = join::reference_answer(dir, join::join_kind::customer_orders);
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "join/column_file.h"
#include "join/join_query.h"

namespace join {

/// The columns the two joins read (prices in cents).
struct tpch_columns {
  column_file c_custkey;
  column_file o_orderkey;
  column_file o_custkey;
  column_file o_totalprice;
  column_file l_orderkey;
  column_file l_extendedprice;

  join_input input(join_kind kind) const noexcept;
  /// Rows of the probe side of `kind` (orders, lineitem).
  std::size_t probe_rows(join_kind kind) const noexcept { return input(kind).probe_keys.size(); }
};

/// "sf1", "sf10", "sf0.01": the cache directory's name for a scale factor (as the script's).
std::string scale_directory_name(double scale_factor);

/// Throws std::invalid_argument for a scale factor that is not positive or beyond 1000 (the
/// largest TPC-H defines here, and where 32-bit morsel counts and 64-bit sums stay safe).
void check_scale_factor(double scale_factor);

/// Bytes of memory the cache generation and a join of `scale_factor` take at most (estimated:
/// DuckDB's generator, the columns, the tables and a competitor's copy).
std::uint64_t memory_needed(double scale_factor) noexcept;

/// Throws std::runtime_error naming the scale factor, the memory it needs and the memory this
/// machine has available (MemAvailable of /proc/meminfo) when the second is smaller.
void require_memory_for(double scale_factor);

struct cache_request {
  std::filesystem::path root;  ///< the cache's root (build/tpch-cache)
  double scale_factor = 1;
  /// The Python that runs the export script (the virtual environment's), and the script.
  std::filesystem::path python;
  std::filesystem::path export_script;
  /// Generate a missing cache (false: a missing cache is a cache_error).
  bool generate = true;
};

/// The cache directory of the request's scale factor, generated first if it is missing (and
/// `generate`). Throws cache_error if it is missing and may not be made, or the script failed.
std::filesystem::path ensure_cache(const cache_request& request);

/// Maps and checks every column of the cache at `dir`; throws cache_error.
tpch_columns load_tpch(const std::filesystem::path& dir);

/// DuckDB's answer for `kind` stored in `dir`/reference.txt; throws cache_error.
join_result reference_answer(const std::filesystem::path& dir, join_kind kind);

}  // namespace join
