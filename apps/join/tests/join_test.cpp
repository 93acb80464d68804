// The hash join against the obvious answer on synthetic data: the steps called in order by one
// thread, and the tessera task graph with 1, 2, 4 and more workers than CPUs, at the extremes
// of the granularity (1 record per task, more records per task than rows).
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "join/join_phases.h"
#include "join/join_query.h"
#include "join/tessera_join.h"
#include "tessera/runtime.h"

namespace {

/// Build keys in [-range, range) with repeats, probe keys partly matching, values of both signs.
struct synthetic {
  std::vector<std::int64_t> build, probe, values;

  synthetic(std::size_t build_rows, std::size_t probe_rows, std::int64_t range, unsigned seed) {
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<std::int64_t> key(-range, range - 1);
    std::uniform_int_distribution<std::int64_t> value(-100000, 1000000);
    for (std::size_t i = 0; i < build_rows; ++i) build.push_back(key(rng));
    for (std::size_t i = 0; i < probe_rows; ++i) {
      probe.push_back(key(rng) * 2);  // about half of them outside the build keys' range
      values.push_back(value(rng));
    }
  }
  join::join_input input() const { return {build, probe, values}; }
};

join::join_result sequential(const join::join_input& in, unsigned partitions,
                             std::size_t records) {
  join::join_phases run(in, partitions, records);
  for (std::size_t m = 0; m < run.build_morsels(); ++m) run.partition_morsel(m);
  for (unsigned p = 0; p < partitions; ++p) {
    run.allocate_partition(p);
    for (std::size_t m = 0; m < run.build_morsels(); m += run.build_chunk_morsels())
      run.build(p, m, std::min(m + run.build_chunk_morsels(), run.build_morsels()));
  }
  join::join_result r;
  for (std::size_t m = 0; m < run.probe_morsels(); ++m) r += run.probe(m);
  return r;
}

TEST(join_query, names) {
  EXPECT_EQ(join::parse_join_kind("customer-orders"), join::join_kind::customer_orders);
  EXPECT_EQ(join::parse_join_kind("orders-lineitem"), join::join_kind::orders_lineitem);
  try {
    (void)join::parse_join_kind("part-supplier");
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("unknown join 'part-supplier'"), std::string::npos);
  }
  EXPECT_EQ(join::to_string(join::join_result{3, 12345}), "count 3, sum 123.45");
  EXPECT_EQ(join::to_string(join::join_result{1, -5}), "count 1, sum -0.05");
}

TEST(join_query, reference_join_counts_pairs) {
  const std::vector<std::int64_t> build{1, 1, 2, 5};
  const std::vector<std::int64_t> probe{1, 2, 3, 5, 5};
  const std::vector<std::int64_t> values{10, 20, 30, 40, 50};
  const join::join_result r = join::reference_join({build, probe, values});
  EXPECT_EQ(r.count, 2U + 1 + 1 + 1);
  EXPECT_EQ(r.sum, 2 * 10 + 20 + 40 + 50);
}

TEST(join_phases, matches_reference_sequentially) {
  const synthetic d(5000, 20000, 3000, 1);
  const join::join_result want = join::reference_join(d.input());
  ASSERT_GT(want.count, 1000U);
  for (const unsigned partitions : {1U, 2U, 3U, 8U})
    for (const std::size_t records : {std::size_t{1}, std::size_t{100}, std::size_t{1} << 20})
      EXPECT_EQ(sequential(d.input(), partitions, records), want)
          << partitions << " partitions, " << records << " records per task";
}

TEST(join_phases, bad_arguments) {
  const synthetic d(10, 10, 10, 2);
  EXPECT_THROW(join::join_phases(d.input(), 0, 10), std::invalid_argument);
  EXPECT_THROW(join::join_phases(d.input(), 2, 0), std::invalid_argument);
  join::join_input uneven = d.input();
  uneven.probe_values = uneven.probe_values.first(5);
  EXPECT_THROW(join::join_phases(uneven, 2, 10), std::invalid_argument);
  EXPECT_THROW((void)join::reference_join(uneven), std::invalid_argument);
}

class tessera_join_test : public ::testing::TestWithParam<unsigned> {};

TEST_P(tessera_join_test, matches_reference_at_every_granularity) {
  tessera::runtime rt({.workers = GetParam()});
  const synthetic d(3000, 12000, 2000, 3 + GetParam());
  const join::join_result want = join::reference_join(d.input());
  for (const std::size_t records :
       {std::size_t{1}, std::size_t{128}, std::size_t{1} << 16, std::size_t{1} << 30}) {
    join::tessera_join j(rt, d.input(), records);
    EXPECT_EQ(j.run(), want) << records << " records per task";
    EXPECT_EQ(j.run(), want) << records << " records per task, second run of the graph";
  }
}

TEST_P(tessera_join_test, empty_sides) {
  tessera::runtime rt({.workers = GetParam()});
  const synthetic d(100, 100, 50, 9);
  const std::vector<std::int64_t> none;
  for (const join::join_input in : {join::join_input{none, d.probe, d.values},
                                    join::join_input{d.build, none, none},
                                    join::join_input{none, none, none}}) {
    join::tessera_join j(rt, in, 16);
    EXPECT_EQ(j.run(), join::join_result{});
  }
}

INSTANTIATE_TEST_SUITE_P(workers, tessera_join_test, ::testing::Values(1U, 2U, 4U, 9U),
                         [](const auto& param_info) { return std::to_string(param_info.param); });

}  // namespace
