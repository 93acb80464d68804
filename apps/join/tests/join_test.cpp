// The hash join against the obvious answer on synthetic data: the steps called in order by one
// thread, and the tessera task graph with 1, 2, 4 and more workers than CPUs, at the extremes
// of the granularity (1 record per task, more records per task than rows).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "join/dense_table.h"
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

/// The steps in order on this thread; `dense` (if given) gets which table choose_table chose.
join::join_result sequential(const join::join_input& in, unsigned partitions,
                             std::size_t records, bool* dense = nullptr,
                             join::run_memory* reuse = nullptr) {
  join::join_phases run(in, partitions, records, reuse);
  for (std::size_t m = 0; m < run.build_morsels(); ++m) run.bound_morsel(m);
  run.choose_table();
  if (dense != nullptr) *dense = run.dense();
  for (std::size_t m = 0; m < run.build_morsels(); ++m) run.partition_morsel(m);
  std::size_t rows = 0;
  for (unsigned p = 0; p < partitions; ++p) rows += run.partition_rows(p);
  EXPECT_EQ(rows, in.build_keys.size());
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

/// Build keys first, first + stride, ... (`rows` of them, each `copies` times, shuffled), probe
/// keys around them: below, inside (matching and not) and above the range.
struct strided {
  std::vector<std::int64_t> build, probe, values;

  strided(std::int64_t first, std::int64_t stride, std::size_t rows, std::size_t copies,
          unsigned seed) {
    std::mt19937_64 rng(seed);
    for (std::size_t c = 0; c < copies; ++c)
      for (std::size_t i = 0; i < rows; ++i)
        build.push_back(first + static_cast<std::int64_t>(i) * stride);
    std::shuffle(build.begin(), build.end(), rng);
    const std::int64_t span = static_cast<std::int64_t>(rows) * stride;
    std::uniform_int_distribution<std::int64_t> key(first - span / 4, first + span + span / 4);
    std::uniform_int_distribution<std::int64_t> value(-1000, 100000);
    for (std::size_t i = 0; i < 4 * rows * copies + 100; ++i) {
      probe.push_back(key(rng));
      values.push_back(value(rng));
    }
  }
  join::join_input input() const { return {build, probe, values}; }
};

void expect_layout(const join::join_input& in, bool dense, const char* what) {
  const join::join_result want = join::reference_join(in);
  for (const unsigned partitions : {1U, 2U, 3U, 8U})
    for (const std::size_t records : {std::size_t{1}, std::size_t{64}, std::size_t{1} << 20}) {
      bool chose_dense = !dense;
      EXPECT_EQ(sequential(in, partitions, records, &chose_dense), want)
          << what << ", " << partitions << " partitions, " << records << " records per task";
      EXPECT_EQ(chose_dense, dense) << what;
    }
}

TEST(join_phases, dense_keys_take_the_direct_table) {
  expect_layout(strided(1, 1, 3000, 1, 11).input(), true, "keys 1..3000");
  expect_layout(strided(-1500, 1, 3000, 1, 12).input(), true, "keys -1500..1499");
  expect_layout(strided(1, 4, 3000, 1, 13).input(), true, "every 4th key (range 4 x rows)");
  expect_layout(strided(1000, 1, 7, 1, 14).input(), true, "7 keys");
  expect_layout(strided(5, 1, 1, 1, 15).input(), true, "one key");
}

/// Build keys in key order (TPC-H's), then with a few far-apart pairs swapped: the scan build
/// skips the morsels wholly in other partitions, counts those wholly in its own without a test
/// per key, and tests key by key only those straddling its edge.
TEST(join_phases, clustered_dense_keys) {
  strided in_order(1, 1, 3000, 2, 16);
  std::sort(in_order.build.begin(), in_order.build.end());
  expect_layout(in_order.input(), true, "keys 1..3000 twice, in key order");
  strided nearly = in_order;
  for (std::size_t i = 0; i + 4500 < nearly.build.size(); i += 700)
    std::swap(nearly.build[i], nearly.build[i + 4500]);
  expect_layout(nearly.input(), true, "keys in key order but for a few swapped pairs");
  strided descending = in_order;
  std::reverse(descending.build.begin(), descending.build.end());
  expect_layout(descending.input(), true, "keys in descending order");
}

/// Whether the build scatters follows the partitions its morsels' keys span: keys in key order
/// are read directly at any partition count, keys in random order only up to dense_scan_reads
/// partitions.
TEST(join_phases, clustered_keys_skip_the_scatter_at_any_partition_count) {
  strided in_order(1, 1, 4096, 1, 17);
  std::sort(in_order.build.begin(), in_order.build.end());
  const strided shuffled(1, 1, 4096, 1, 18);
  for (const unsigned partitions : {1U, 2U, 4U, 8U, 16U, 64U}) {
    for (const bool ordered : {true, false}) {
      const join::join_input in = ordered ? in_order.input() : shuffled.input();
      join::join_phases run(in, partitions, 256);
      for (std::size_t m = 0; m < run.build_morsels(); ++m) run.bound_morsel(m);
      run.choose_table();
      ASSERT_TRUE(run.dense());
      const bool scatters = !ordered && partitions > join::join_phases::dense_scan_reads;
      EXPECT_EQ(run.scatters(), scatters)
          << partitions << " partitions, keys " << (ordered ? "in order" : "shuffled");
    }
    EXPECT_EQ(sequential(in_order.input(), partitions, 256), join::reference_join(in_order.input()))
        << partitions << " partitions";
  }
}

/// One run_memory across runs of different key ranges, larger and smaller, and partition
/// counts: each run's table takes the former's memory where it fits and clears its counts, and
/// each run that scatters (shuffled keys over more than dense_scan_reads partitions, or sparse
/// keys) takes the former's scatter buffer, whose stale rows it overwrites.
TEST(join_phases, run_memory_is_reused_across_runs) {
  const strided a(1, 1, 3000, 1, 51);
  const strided b(-40, 3, 500, 2, 52);
  const strided c(7, 2, 5000, 1, 53);
  join::run_memory memory;
  for (const strided* d : {&a, &b, &a, &c, &c, &b, &a}) {
    const join::join_result want = join::reference_join(d->input());
    for (const unsigned partitions : {1U, 2U, 3U, 8U})
      for (const std::size_t records : {std::size_t{1}, std::size_t{64}, std::size_t{1} << 20}) {
        bool dense = false;
        EXPECT_EQ(sequential(d->input(), partitions, records, &dense, &memory), want)
            << partitions << " partitions, " << records << " records per task";
        EXPECT_TRUE(dense);
      }
  }
  EXPECT_GE(memory.bytes(), 5000 * 2 * sizeof(std::uint32_t));  // c's table, the largest
  EXPECT_GE(memory.scatter_bytes(), 5000 * 2 * sizeof(std::int64_t));  // c's rows: key and row
  // Sparse keys (the hash tables), larger and smaller, on the same memory.
  const strided s(1, 7, 4000, 1, 54);
  const strided t(3, 11, 1500, 2, 55);
  for (const strided* d : {&s, &t, &s, &t}) {
    const join::join_result want = join::reference_join(d->input());
    for (const unsigned partitions : {1U, 5U, 16U}) {
      bool dense = true;
      EXPECT_EQ(sequential(d->input(), partitions, 64, &dense, &memory), want)
          << partitions << " partitions";
      EXPECT_FALSE(dense);
    }
  }
}

TEST(join_phases, repeated_dense_keys_count_every_pair) {
  expect_layout(strided(1, 1, 1000, 3, 21).input(), true, "keys 1..1000, 3 times each");
  expect_layout(strided(-7, 2, 500, 5, 22).input(), true, "every 2nd key, 5 times each");
  const std::vector<std::int64_t> same(4000, 42);  // one key 4000 times
  const std::vector<std::int64_t> probe{41, 42, 43, 42};
  const std::vector<std::int64_t> values{1, 2, 3, -5};
  const join::join_input in{same, probe, values};
  expect_layout(in, true, "one key 4000 times");
  EXPECT_EQ(join::reference_join(in), (join::join_result{8000, 4000 * (2 - 5)}));
}

TEST(join_phases, sparse_keys_take_the_hash_tables) {
  expect_layout(strided(1, 5, 3000, 1, 31).input(), false, "every 5th key (range > 4 x rows)");
  expect_layout(strided(1, 1000003, 2000, 2, 32).input(), false, "keys 1,000,003 apart");
  const std::vector<std::int64_t> build{1, 2, 3, 1000};
  const std::vector<std::int64_t> probe{1, 3, 999, 1000, 1001};
  const std::vector<std::int64_t> values{1, 2, 3, 4, 5};
  expect_layout({build, probe, values}, false, "3 dense keys and an outlier");
}

TEST(join_phases, extreme_keys) {
  constexpr std::int64_t lo = std::numeric_limits<std::int64_t>::min();
  constexpr std::int64_t hi = std::numeric_limits<std::int64_t>::max();
  // Probe keys far outside the bounds must not wrap into them.
  const std::vector<std::int64_t> probe{lo, lo + 1, -1, 0, 1, 2, 3, hi - 1, hi};
  const std::vector<std::int64_t> values{1, 2, 4, 8, 16, 32, 64, 128, 256};
  const std::vector<std::int64_t> low{lo, lo + 1, lo + 2, lo + 1};
  const std::vector<std::int64_t> high{hi, hi - 1, hi - 2, hi};
  const std::vector<std::int64_t> both{lo, hi, 0};
  const std::vector<std::int64_t> middle{0, 1, 2, 3};
  expect_layout({low, probe, values}, true, "the smallest keys");
  expect_layout({high, probe, values}, true, "the largest keys");
  expect_layout({both, probe, values}, false, "the smallest and the largest key");
  expect_layout({middle, probe, values}, true, "0..3 probed with the extremes");
  EXPECT_EQ(join::reference_join({low, probe, values}), (join::join_result{3, 1 + 2 * 2}));
}

TEST(dense_table, the_threshold) {
  join::key_bounds b;
  EXPECT_TRUE(b.empty());
  EXPECT_FALSE(join::use_dense_table(b, 10));
  b.add(1);
  b.add(40);  // range 40
  EXPECT_FALSE(b.empty());
  EXPECT_TRUE(join::use_dense_table(b, 10));
  EXPECT_FALSE(join::use_dense_table(b, 9));
  EXPECT_FALSE(join::use_dense_table(b, 0));
  EXPECT_FALSE(join::use_dense_table(
      b, std::size_t{std::numeric_limits<std::uint32_t>::max()} + 1));  // counters could overflow
  join::key_bounds all{std::numeric_limits<std::int64_t>::min(),
                       std::numeric_limits<std::int64_t>::max()};
  EXPECT_FALSE(join::use_dense_table(all, std::numeric_limits<std::uint32_t>::max()));
}

TEST(dense_table, partitions_are_whole_cache_lines_in_key_order) {
  join::key_bounds b{-100, 899};  // 1000 keys, 63 lines of counters
  for (const unsigned partitions : {1U, 2U, 3U, 7U, 63U, 64U, 100U, 65536U}) {
    const join::dense_table t(b, partitions);
    unsigned last = 0;
    std::vector<std::size_t> keys(partitions);
    for (std::int64_t k = b.min; k <= b.max; ++k) {
      const unsigned p = t.partition_of(k);
      ++keys[p];
      ASSERT_LT(p, partitions);
      ASSERT_GE(p, last) << k;  // runs in key order
      if (p != last) {
        ASSERT_EQ((k - b.min) % 16, 0) << k;  // a run starts on a cache line
      }
      last = p;
    }
    if (partitions <= 63) {  // every partition gets whole lines, as many as the others or one less
      const auto [fewest, most] = std::minmax_element(keys.begin(), keys.end() - 1);
      EXPECT_LE(*most - *fewest, 16U) << partitions << " partitions";
    }
  }
}

TEST(join_phases, bad_arguments) {
  const synthetic d(10, 10, 10, 2);
  EXPECT_THROW(join::join_phases(d.input(), 0, 10), std::invalid_argument);
  EXPECT_THROW(join::join_phases(d.input(), 2, 0), std::invalid_argument);
  EXPECT_THROW(join::join_phases(d.input(), join::dense_table::max_partitions + 1, 10),
               std::invalid_argument);
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

TEST_P(tessera_join_test, dense_sparse_and_repeated_keys) {
  tessera::runtime rt({.workers = GetParam()});
  strided in_order(5, 2, 3000, 1, 44);
  std::sort(in_order.build.begin(), in_order.build.end());
  for (const strided& d : {strided(1, 1, 2000, 1, 41), strided(-3, 3, 500, 4, 42),
                           strided(1, 13, 1000, 2, 43), in_order}) {
    const join::join_result want = join::reference_join(d.input());
    for (const std::size_t records : {std::size_t{1}, std::size_t{256}, std::size_t{1} << 20}) {
      join::tessera_join j(rt, d.input(), records);
      EXPECT_EQ(j.run(), want) << records << " records per task";
      EXPECT_EQ(j.run(), want) << records << " records per task, second run";
    }
  }
}

/// Joins of different inputs and granularities, alive together, sharing one run_memory and
/// taking turns (as the benchmark's sweep runs them): every run answers right.
TEST_P(tessera_join_test, joins_taking_turns_share_the_table_memory) {
  tessera::runtime rt({.workers = GetParam()});
  const strided a(1, 1, 3000, 1, 61);
  const strided b(-40, 3, 500, 2, 62);
  join::run_memory memory;
  join::tessera_join ja(rt, a.input(), 64, &memory);
  join::tessera_join jb(rt, b.input(), 1U << 20, &memory);
  join::tessera_join jc(rt, a.input(), 1, &memory);
  const join::join_result want_a = join::reference_join(a.input());
  const join::join_result want_b = join::reference_join(b.input());
  for (int round = 0; round < 3; ++round) {
    EXPECT_EQ(ja.run(), want_a) << "round " << round;
    EXPECT_EQ(jb.run(), want_b) << "round " << round;
    EXPECT_EQ(jc.run(), want_a) << "round " << round;
  }
  EXPECT_GE(memory.bytes(), 3000 * sizeof(std::uint32_t));  // a's table went back to it
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
