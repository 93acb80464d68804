// Both joins on TPC-H scale factor 0.01 from DuckDB's generator (the cache is generated at the
// first run through the project's .venv, scripts/install-deps.sh) against DuckDB's answers, and
// the bad inputs: a missing or damaged cache, an impossible scale factor.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

#include "join/tessera_join.h"
#include "join/tpch_cache.h"
#include "tessera/runtime.h"

namespace {

namespace fs = std::filesystem;

constexpr double tiny = 0.01;

fs::path tiny_cache() {
  return join::ensure_cache({.root = TESSERA_JOIN_CACHE_DIR,
                             .scale_factor = tiny,
                             .python = TESSERA_JOIN_PYTHON,
                             .export_script = TESSERA_JOIN_EXPORT_SCRIPT});
}

template <class E>
void expect_message(const auto& call, const std::string& what) {
  try {
    call();
    FAIL() << "no exception, expected one saying '" << what << "'";
  } catch (const E& e) {
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
  }
}

TEST(tpch, directory_names) {
  EXPECT_EQ(join::scale_directory_name(1), "sf1");
  EXPECT_EQ(join::scale_directory_name(10), "sf10");
  EXPECT_EQ(join::scale_directory_name(0.01), "sf0.01");
}

class tpch_join : public ::testing::TestWithParam<unsigned> {};

TEST_P(tpch_join, both_joins_match_duckdb) {
  const fs::path dir = tiny_cache();
  const join::tpch_columns t = join::load_tpch(dir);
  EXPECT_EQ(t.c_custkey.size(), 1500U);
  EXPECT_EQ(t.o_orderkey.size(), 15000U);
  tessera::runtime rt({.workers = GetParam()});
  for (const join::join_kind kind :
       {join::join_kind::customer_orders, join::join_kind::orders_lineitem}) {
    const join::join_result want = join::reference_answer(dir, kind);
    EXPECT_EQ(join::reference_join(t.input(kind)), want) << join::to_string(kind);
    for (const std::size_t records : {std::size_t{128}, std::size_t{1} << 16}) {
      join::tessera_join j(rt, t.input(kind), records);
      EXPECT_EQ(j.run(), want) << join::to_string(kind) << ", " << records << " records";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(workers, tpch_join, ::testing::Values(1U, 2U, 4U),
                         [](const auto& param_info) { return std::to_string(param_info.param); });

TEST(tpch, unknown_join) {
  expect_message<std::invalid_argument>([] { (void)join::parse_join_kind("nation-region"); },
                                        "unknown join 'nation-region'");
}

TEST(tpch, impossible_scale_factors) {
  for (const double sf : {0.0, -1.0, 1e6, std::nan("")})
    expect_message<std::invalid_argument>([sf] { join::require_memory_for(sf); }, "scale factor");
  expect_message<std::runtime_error>([] { join::require_memory_for(1000); }, "of memory");
  EXPECT_NO_THROW(join::require_memory_for(tiny));
}

class damaged_cache : public ::testing::Test {
 protected:
  void SetUp() override {
    m_copy = fs::temp_directory_path() /
             ("tessera-join-cache-" + std::to_string(::getpid()) + "-" +
              ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(m_copy);
    fs::copy(tiny_cache(), m_copy);
  }
  void TearDown() override { fs::remove_all(m_copy); }
  fs::path m_copy;
};

TEST_F(damaged_cache, missing_directory_is_not_generated_when_told_not_to) {
  const fs::path root = m_copy / "nothing-here";
  expect_message<join::cache_error>(
      [&] { (void)join::ensure_cache({.root = root, .scale_factor = 3, .generate = false}); },
      "missing");
  expect_message<join::cache_error>([&] { (void)join::load_tpch(root / "sf3"); }, "missing");
}

TEST_F(damaged_cache, missing_python) {
  expect_message<join::cache_error>(
      [&] {
        (void)join::ensure_cache(
            {.root = m_copy / "root", .scale_factor = 2, .python = m_copy / "no-python"});
      },
      "install-deps");
}

TEST_F(damaged_cache, missing_column) {
  fs::remove(m_copy / "lineitem.l_orderkey.col");
  expect_message<join::cache_error>([&] { (void)join::load_tpch(m_copy); },
                                    "lineitem.l_orderkey.col: missing");
}

TEST_F(damaged_cache, truncated_column) {
  const fs::path f = m_copy / "orders.o_custkey.col";
  fs::resize_file(f, fs::file_size(f) - 8);
  expect_message<join::cache_error>([&] { (void)join::load_tpch(m_copy); }, "truncated");
}

TEST_F(damaged_cache, bad_magic) {
  {
    std::fstream f(m_copy / "customer.c_custkey.col", std::ios::in | std::ios::out |
                                                          std::ios::binary);
    f.write("garbage!", 8);
  }
  expect_message<join::cache_error>([&] { (void)join::load_tpch(m_copy); }, "bad magic");
}

TEST_F(damaged_cache, missing_reference) {
  fs::remove(m_copy / "reference.txt");
  expect_message<join::cache_error>(
      [&] { (void)join::reference_answer(m_copy, join::join_kind::customer_orders); },
      "reference.txt: missing");
}

}  // namespace
