// The TPC-H column cache: where it is, making it, loading it (join/tpch_cache.h).
#include "join/tpch_cache.h"

#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string_view>

namespace join {

namespace {

std::string quoted(const std::string& text) {
  std::string out = "'";
  for (const char c : text) {
    if (c == '\'')
      out += "'\\''";
    else
      out += c;
  }
  return out + "'";
}

/// MemAvailable of /proc/meminfo in bytes (0 if it cannot be read).
std::uint64_t available_memory() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  std::uint64_t kib = 0;
  std::string unit;
  while (in >> key >> kib) {
    std::getline(in, unit);
    if (key == "MemAvailable:") return kib * 1024;
  }
  return 0;
}

std::string gib(std::uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f GiB", static_cast<double>(bytes) / (1ULL << 30));
  return text;
}

}  // namespace

join_input tpch_columns::input(join_kind kind) const noexcept {
  if (kind == join_kind::customer_orders)
    return {c_custkey.values(), o_custkey.values(), o_totalprice.values()};
  return {o_orderkey.values(), l_orderkey.values(), l_extendedprice.values()};
}

std::string scale_directory_name(double scale_factor) {
  char text[64];
  std::snprintf(text, sizeof text, "%.6f", scale_factor);
  std::string s = text;
  while (!s.empty() && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  return "sf" + s;
}

void check_scale_factor(double scale_factor) {
  if (!(scale_factor > 0) || !std::isfinite(scale_factor) || scale_factor > 1000) {
    char text[64];
    std::snprintf(text, sizeof text, "%g", scale_factor);
    throw std::invalid_argument(std::string("scale factor ") + text +
                                ": must be above 0 and at most 1000");
  }
}

std::uint64_t memory_needed(double scale_factor) noexcept {
  // Per scale factor: DuckDB's generator about 1 GiB (it spills to its file beyond that), our
  // columns 0.15 GiB, the tables and scatter buffer 0.1 GiB, DuckDB's copy and table 0.4 GiB.
  constexpr double per_scale_factor = 1.6 * (1ULL << 30);
  constexpr double base = 0.5 * (1ULL << 30);
  return static_cast<std::uint64_t>(base + per_scale_factor * scale_factor);
}

void require_memory_for(double scale_factor) {
  check_scale_factor(scale_factor);
  const std::uint64_t need = memory_needed(scale_factor);
  const std::uint64_t have = available_memory();
  if (have != 0 && need > have) {
    char text[64];
    std::snprintf(text, sizeof text, "%g", scale_factor);
    throw std::runtime_error(std::string("scale factor ") + text + " needs about " + gib(need) +
                             " of memory; this machine has " + gib(have) + " available");
  }
}

std::filesystem::path ensure_cache(const cache_request& request) {
  check_scale_factor(request.scale_factor);
  std::filesystem::path dir = request.root / scale_directory_name(request.scale_factor);
  std::error_code ec;
  if (std::filesystem::exists(dir / "reference.txt", ec)) return dir;
  if (!request.generate)
    throw cache_error("column cache: " + dir.string() +
                      ": missing (generate it with apps/join/scripts/tpch_export.py)");
  if (!std::filesystem::exists(request.python, ec))
    throw cache_error("column cache: " + dir.string() + " is missing and cannot be generated: " +
                      request.python.string() +
                      " does not exist (run scripts/install-deps.sh for the .venv)");
  char sf[64];
  std::snprintf(sf, sizeof sf, "%.6f", request.scale_factor);
  const std::string command = quoted(request.python.string()) + " " +
                              quoted(request.export_script.string()) + " --scale-factor " + sf +
                              " --cache-dir " + quoted(request.root.string()) + " >&2";
  std::fprintf(stderr, "tessera-join: generating the TPC-H cache %s (DuckDB dbgen) ...\n",
               dir.c_str());
  const int status = std::system(command.c_str());  // NOLINT(cert-env33-c): our own script
  if (status != 0 || !std::filesystem::exists(dir / "reference.txt", ec)) {
    throw cache_error("column cache: " + dir.string() + ": generating it failed (" + command +
                      " exited with " +
                      std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : status) + ")");
  }
  return dir;
}

tpch_columns load_tpch(const std::filesystem::path& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec))
    throw cache_error("column cache: " + dir.string() + ": missing (no such directory)");
  const auto col = [&](std::string_view name) {
    return column_file(dir / (std::string(name) + ".col"));
  };
  tpch_columns t{col("customer.c_custkey"),   col("orders.o_orderkey"),
                 col("orders.o_custkey"),     col("orders.o_totalprice"),
                 col("lineitem.l_orderkey"), col("lineitem.l_extendedprice")};
  if (t.o_custkey.size() != t.o_orderkey.size() || t.o_totalprice.size() != t.o_orderkey.size())
    throw cache_error("column cache: " + dir.string() + ": the orders columns differ in length");
  if (t.l_extendedprice.size() != t.l_orderkey.size())
    throw cache_error("column cache: " + dir.string() + ": the lineitem columns differ in length");
  return t;
}

join_result reference_answer(const std::filesystem::path& dir, join_kind kind) {
  const std::filesystem::path file = dir / "reference.txt";
  std::ifstream in(file);
  if (!in) throw cache_error("column cache: " + file.string() + ": missing");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string name;
    unsigned long long count = 0;
    long long sum = 0;
    if (words >> name >> count >> sum && name == to_string(kind))
      return join_result{count, static_cast<std::int64_t>(sum)};
  }
  throw cache_error("column cache: " + file.string() + ": no answer for " +
                    std::string(to_string(kind)));
}

}  // namespace join
