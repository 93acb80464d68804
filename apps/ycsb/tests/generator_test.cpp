// Tests of the workload generator (ycsb/generator.h): YCSB's workload mixes and distributions, the
// load phase, determinism, per-thread streams and the guarantee that reads only target existing
// keys.
#include "ycsb/generator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <stdexcept>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace {

using ycsb::op_type;
using ycsb::operation;

struct counts {
  std::array<uint64_t, 6> by_type{};
  uint64_t total = 0;
  [[nodiscard]] double share(op_type t) const {
    return static_cast<double>(by_type[static_cast<std::size_t>(t)]) / static_cast<double>(total);
  }
};

counts count_types(const std::vector<operation>& ops) {
  counts c;
  for (const operation& op : ops) ++c.by_type[static_cast<std::size_t>(op.type)];
  c.total = ops.size();
  return c;
}

TEST(OpMix, WorkloadFilesProportions) {
  using ycsb::op_mix;
  EXPECT_EQ(op_mix::for_workload('a'), (op_mix{.read = 0.5, .update = 0.5}));
  EXPECT_EQ(op_mix::for_workload('B'), (op_mix{.read = 0.95, .update = 0.05}));
  EXPECT_EQ(op_mix::for_workload('c'), (op_mix{.read = 1}));
  EXPECT_EQ(op_mix::for_workload('d'), (op_mix{.read = 0.95, .insert = 0.05}));
  EXPECT_EQ(op_mix::for_workload('e'), (op_mix{.insert = 0.05, .scan = 0.95}));
  EXPECT_EQ(op_mix::for_workload('f'), (op_mix{.read = 0.5, .read_modify_write = 0.5}));
  EXPECT_THROW((void)op_mix::for_workload('g'), std::invalid_argument);
  EXPECT_EQ(ycsb::default_distribution('d'), ycsb::distribution::latest);
  EXPECT_EQ(ycsb::default_distribution('E'), ycsb::distribution::zipfian);
  EXPECT_EQ(ycsb::to_string(op_mix::for_workload('b')),
            "read 0.95 update 0.05 insert 0.00 scan 0.00 rmw 0.00");
  EXPECT_EQ(ycsb::parse_distribution("latest"), ycsb::distribution::latest);
  EXPECT_EQ(ycsb::parse_distribution("uniform"), ycsb::distribution::uniform);
  EXPECT_EQ(ycsb::parse_distribution("zipfian"), ycsb::distribution::zipfian);
  EXPECT_EQ(ycsb::parse_distribution("hotspot"), std::nullopt);
  EXPECT_STREQ(ycsb::to_string(ycsb::distribution::latest), "latest");
}

TEST(Generator, OperationMixPerWorkloadWithinOnePercent) {
  for (const char w : {'a', 'b', 'c', 'd', 'e', 'f'}) {
    SCOPED_TRACE(std::string("workload ") + w);
    const ycsb::workload_generator gen{
        {.workload = w, .record_count = 10000, .operation_count = 200000}};
    const std::vector<operation> ops = gen.run_operations();
    ASSERT_EQ(ops.size(), 200000u);
    const counts c = count_types(ops);
    const ycsb::op_mix& mix = gen.mix();
    EXPECT_NEAR(c.share(op_type::read), mix.read, 0.01);
    EXPECT_NEAR(c.share(op_type::update), mix.update, 0.01);
    EXPECT_NEAR(c.share(op_type::insert), mix.insert, 0.01);
    EXPECT_NEAR(c.share(op_type::scan), mix.scan, 0.01);
    EXPECT_NEAR(c.share(op_type::read_modify_write), mix.read_modify_write, 0.01);
    EXPECT_EQ(c.by_type[static_cast<std::size_t>(op_type::remove)], 0u);
    // Proportions of zero never occur at all (DiscreteGenerator skips them).
    if (mix.update == 0) {
      EXPECT_EQ(c.by_type[static_cast<std::size_t>(op_type::update)], 0u);
    }
    if (mix.insert == 0) {
      EXPECT_EQ(c.by_type[static_cast<std::size_t>(op_type::insert)], 0u);
    }
    if (mix.scan == 0) {
      EXPECT_EQ(c.by_type[static_cast<std::size_t>(op_type::scan)], 0u);
    }
  }
}

TEST(Generator, OperationFieldsFollowTheValueScheme) {
  const ycsb::workload_generator gen_e{
      {.workload = 'e', .record_count = 1000, .operation_count = 50000}};
  const ycsb::workload_generator gen_f{
      {.workload = 'f', .record_count = 1000, .operation_count = 50000}};
  const ycsb::workload_generator gen_a{
      {.workload = 'a', .record_count = 1000, .operation_count = 50000}};
  uint32_t min_scan = UINT32_MAX;
  uint32_t max_scan = 0;
  for (const auto* gen : {&gen_e, &gen_f, &gen_a}) {
    for (const operation& op : gen->run_operations()) {
      switch (op.type) {
        case op_type::insert:
          EXPECT_EQ(op.value, ycsb::value_of(op.key));
          EXPECT_EQ(op.scan_length, 0u);
          break;
        case op_type::update:
        case op_type::read_modify_write:
          EXPECT_EQ(op.value, ycsb::updated_value_of(op.key));
          EXPECT_EQ(op.scan_length, 0u);
          break;
        case op_type::scan:
          EXPECT_EQ(op.value, 0u);
          min_scan = std::min(min_scan, op.scan_length);
          max_scan = std::max(max_scan, op.scan_length);
          break;
        default: EXPECT_EQ(op.value, 0u); EXPECT_EQ(op.scan_length, 0u);
      }
    }
  }
  // workloade: scanlengthdistribution=uniform, minscanlength 1, maxscanlength=100.
  EXPECT_EQ(min_scan, 1u);
  EXPECT_EQ(max_scan, 100u);

  const ycsb::workload_generator custom{{.workload = 'e',
                                         .record_count = 100,
                                         .operation_count = 5000,
                                         .max_scan_length = 7,
                                         .min_scan_length = 5}};
  for (const operation& op : custom.run_operations()) {
    if (op.type == op_type::scan) {
      EXPECT_GE(op.scan_length, 5u);
      EXPECT_LE(op.scan_length, 7u);
    }
  }
}

TEST(Values, EachKeyHasExactlyTwoLegalValues) {
  ycsb::rng r{11};
  for (int i = 0; i < 10000; ++i) {
    const uint64_t key = i < 5000 ? ycsb::key_of(static_cast<uint64_t>(i)) : r.next_u64();
    EXPECT_NE(ycsb::value_of(key), ycsb::updated_value_of(key));
    EXPECT_TRUE(ycsb::is_legal_value(key, ycsb::value_of(key)));
    EXPECT_TRUE(ycsb::is_legal_value(key, ycsb::updated_value_of(key)));
    EXPECT_FALSE(ycsb::is_legal_value(key, ycsb::value_of(key) + 1));
    EXPECT_FALSE(ycsb::is_legal_value(key, ycsb::value_of(key + 1)));
  }
  static_assert(ycsb::value_of(5) == ((5 * 0x9E3779B97F4A7C15ULL) ^ 0x5bd1e995ULL));
  static_assert(ycsb::key_of(0) == 6284781860667377211ULL);
}

TEST(Keys, FirstKeyNumbersHashToDistinctKeys) {
  std::vector<uint64_t> keys(100000);
  for (uint64_t i = 0; i < keys.size(); ++i) keys[i] = ycsb::key_of(i);
  std::sort(keys.begin(), keys.end());
  EXPECT_EQ(std::adjacent_find(keys.begin(), keys.end()), keys.end());
}

TEST(Generator, LoadPhaseInsertsEveryKeyNumberInOrder) {
  const ycsb::workload_generator gen{
      {.workload = 'a', .record_count = 10007, .operation_count = 10}};
  const std::vector<operation> load = gen.load_operations();
  ASSERT_EQ(load.size(), 10007u);
  for (uint64_t i = 0; i < load.size(); ++i) {
    const uint64_t key = ycsb::key_of(i);
    ASSERT_EQ(
        load[i],
        (operation{
            .type = op_type::insert, .scan_length = 0, .key = key, .value = ycsb::value_of(key)}));
  }
  // Chunked filling gives the same records.
  std::vector<operation> chunk(1000);
  for (uint64_t first = 0; first < load.size(); first += chunk.size()) {
    const std::size_t n = std::min<std::size_t>(chunk.size(), load.size() - first);
    gen.fill_load(std::span<operation>(chunk.data(), n), first);
    for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(chunk[i], load[first + i]);
  }
  EXPECT_EQ(gen.load_operation(42), load[42]);
  EXPECT_THROW(gen.fill_load(chunk, 9500), std::out_of_range);
  EXPECT_THROW(gen.fill_load(std::span<operation>(chunk.data(), 1), 10007), std::out_of_range);
  EXPECT_NO_THROW(gen.fill_load(std::span<operation>(chunk.data(), 0), 10007));

  const ycsb::workload_generator ordered{
      {.workload = 'c', .record_count = 100, .operation_count = 1000, .ordered_inserts = true}};
  const std::vector<operation> ordered_load = ordered.load_operations();
  for (uint64_t i = 0; i < ordered_load.size(); ++i) EXPECT_EQ(ordered_load[i].key, i);
  for (const operation& op : ordered.run_operations()) EXPECT_LT(op.key, 100u);
}

TEST(Generator, DeterministicForASeedAndDifferentForAnother) {
  for (const char w : {'a', 'd', 'e'}) {
    SCOPED_TRACE(std::string("workload ") + w);
    const ycsb::workload_spec spec{
        .workload = w, .record_count = 5000, .operation_count = 20000, .seed = 99};
    const std::vector<operation> first = ycsb::workload_generator{spec}.run_operations();
    const std::vector<operation> again = ycsb::workload_generator{spec}.run_operations();
    EXPECT_EQ(first, again);
    ycsb::workload_spec other = spec;
    other.seed = 100;
    const std::vector<operation> different = ycsb::workload_generator{other}.run_operations();
    ASSERT_EQ(different.size(), first.size());
    std::size_t equal = 0;
    for (std::size_t i = 0; i < first.size(); ++i) equal += first[i] == different[i] ? 1 : 0;
    EXPECT_LT(equal, first.size() / 2);
  }
}

TEST(Generator, StreamsPartitionTheOperationCount) {
  const ycsb::workload_generator gen{
      {.workload = 'b', .record_count = 1000, .operation_count = 10003}};
  uint64_t total = 0;
  for (uint32_t t = 0; t < 4; ++t) {
    const uint64_t size = gen.stream_size(t, 4);
    EXPECT_EQ(size, t < 3 ? 2501u : 2500u);
    total += size;
    ycsb::operation_stream s = gen.run_stream(t, 4);
    EXPECT_EQ(s.size(), size);
    EXPECT_EQ(s.thread_index(), t);
    EXPECT_EQ(s.thread_count(), 4u);
    std::vector<operation> by_next;
    while (s.remaining() > 0) by_next.push_back(s.next());
    EXPECT_EQ(by_next, gen.run_operations(t, 4));
    // Past its share the stream keeps going.
    (void)s.next();
    EXPECT_EQ(s.produced(), size + 1);
    EXPECT_EQ(s.remaining(), 0u);
    std::vector<operation> buffer(10);
    EXPECT_EQ(s.fill(buffer), 0u);
  }
  EXPECT_EQ(total, 10003u);
  // Streams differ from one another.
  EXPECT_NE(gen.run_operations(0, 4), std::vector<operation>(gen.run_operations(1, 4)));
  EXPECT_THROW((void)gen.run_stream(4, 4), std::invalid_argument);
  EXPECT_THROW((void)gen.run_stream(0, 0), std::invalid_argument);
}

TEST(Generator, FillInChunksEqualsOneVector) {
  const ycsb::workload_generator gen{
      {.workload = 'd', .record_count = 2000, .operation_count = 30000}};
  const std::vector<operation> all = gen.run_operations(1, 3);
  ycsb::operation_stream s = gen.run_stream(1, 3);
  std::vector<operation> chunked;
  std::vector<operation> buffer(777);
  while (const std::size_t n = s.fill(buffer))
    chunked.insert(chunked.end(), buffer.begin(), buffer.begin() + static_cast<std::ptrdiff_t>(n));
  EXPECT_EQ(chunked, all);
}

// Every read, update, scan and read-modify-write of a stream must target a key that was loaded or
// inserted earlier by the same stream; run-phase inserts take fresh, disjoint key numbers.
void check_targets_exist(const ycsb::workload_spec& spec, uint32_t thread_count) {
  const ycsb::workload_generator gen{spec};
  std::unordered_set<uint64_t> loaded;
  for (const operation& op : gen.load_operations()) loaded.insert(op.key);
  std::unordered_set<uint64_t> all_inserted;
  for (uint32_t t = 0; t < thread_count; ++t) {
    std::unordered_set<uint64_t> own;  // this stream's inserts
    ycsb::operation_stream s = gen.run_stream(t, thread_count);
    uint64_t j = 0;
    while (s.remaining() > 0) {
      const operation op = s.next();
      if (op.type == op_type::insert) {
        ASSERT_EQ(op.key, gen.key(gen.insert_keynum(t, thread_count, j)));
        ASSERT_EQ(op.key, gen.key(spec.record_count + t + j * thread_count));
        ++j;
        ASSERT_FALSE(loaded.contains(op.key)) << "insert of a loaded key";
        ASSERT_TRUE(own.insert(op.key).second) << "insert of an existing key";
        ASSERT_TRUE(all_inserted.insert(op.key).second) << "two streams insert the same key";
        ASSERT_EQ(s.inserted(), j);
        ASSERT_EQ(s.visible_count(), spec.record_count + j);
      } else {
        ASSERT_TRUE(loaded.contains(op.key) || own.contains(op.key))
            << "operation on a key that does not exist yet";
      }
    }
  }
}

TEST(Generator, OperationsTargetOnlyExistingKeys) {
  for (const auto d :
       {ycsb::distribution::zipfian, ycsb::distribution::uniform, ycsb::distribution::latest}) {
    for (const char w : {'a', 'd', 'e'}) {
      for (const uint32_t threads : {1u, 3u}) {
        SCOPED_TRACE(std::string("workload ") + w + " " + ycsb::to_string(d) + " threads " +
                     std::to_string(threads));
        check_targets_exist({.workload = w,
                             .record_count = 500,
                             .operation_count = 12000,
                             .request_distribution = d,
                             .mix = ycsb::op_mix{.read = 0.6,
                                                 .update = 0.1,
                                                 .insert = 0.2,
                                                 .scan = 0.05,
                                                 .read_modify_write = 0.05}},
                            threads);
        check_targets_exist({.workload = w,
                             .record_count = 500,
                             .operation_count = 8000,
                             .request_distribution = d},
                            threads);
      }
    }
  }
}

TEST(Generator, LatestFavoursRecentInserts) {
  constexpr uint64_t records = 1000;
  const ycsb::workload_generator gen{
      {.workload = 'd', .record_count = records, .operation_count = 100000}};
  EXPECT_EQ(gen.request_distribution(), ycsb::distribution::latest);
  // Age of a read: how many items were inserted after it (0 = the newest), in the stream's
  // numbering.
  std::unordered_map<uint64_t, uint64_t> position;  // key -> visible index
  for (uint64_t i = 0; i < records; ++i) position[ycsb::key_of(i)] = i;
  ycsb::operation_stream s = gen.run_stream(0, 1);
  uint64_t reads = 0;
  uint64_t young = 0;
  uint64_t of_run_inserts = 0;
  while (s.remaining() > 0) {
    const uint64_t newest = s.visible_count() - 1;
    const operation op = s.next();
    if (op.type == op_type::insert) {
      position[op.key] = newest + 1;
      continue;
    }
    ASSERT_TRUE(position.contains(op.key));
    const uint64_t age = newest - position[op.key];
    ++reads;
    young += age < 10 ? 1 : 0;
    of_run_inserts += position[op.key] >= records ? 1 : 0;
  }
  EXPECT_GT(s.inserted(), 4500u);
  // YCSB's algorithm sends 23 % of these reads to the 10 newest items (less than
  // zeta(10)/zeta(~3500) because ZipfianGenerator keeps the eta of its initial item count while the
  // count grows); uniform would give < 1 %.
  EXPECT_GT(static_cast<double>(young) / static_cast<double>(reads), 0.20);
  EXPECT_GT(static_cast<double>(of_run_inserts) / static_cast<double>(reads), 0.7);
}

TEST(Generator, ZipfianHotKeyIsScrambledAndTakesItsShare) {
  constexpr uint64_t records = 100000;
  const ycsb::workload_generator gen{
      {.workload = 'c', .record_count = records, .operation_count = 100000}};
  EXPECT_EQ(gen.expected_new_keys(), 0u);
  std::unordered_map<uint64_t, uint64_t> hits;
  for (const operation& op : gen.run_operations()) ++hits[op.key];
  // ScrambledZipfianGenerator(0, recordcount + 0): key number fnvhash64(0) % (recordcount + 1) is
  // hottest.
  const uint64_t hot_keynum = ycsb::fnvhash64(0) % (records + 1);
  ASSERT_LT(hot_keynum, records);
  const uint64_t hot_key = ycsb::key_of(hot_keynum);
  const auto hottest = std::max_element(
      hits.begin(), hits.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
  EXPECT_EQ(hottest->first, hot_key);
  EXPECT_NEAR(static_cast<double>(hits[hot_key]) / 100000.0,
              1.0 / ycsb::scrambled_zipfian_generator::zetan, 0.003);
}

TEST(Generator, ExpectedNewKeysAsInCoreWorkload) {
  EXPECT_EQ(
      (ycsb::workload_generator{{.workload = 'e', .record_count = 1000, .operation_count = 10000}}
           .expected_new_keys()),
      1000u);  // (int) (10000 * 0.05 * 2.0)
  EXPECT_EQ(
      (ycsb::workload_generator{{.workload = 'a', .record_count = 1000, .operation_count = 10000}}
           .expected_new_keys()),
      0u);
}

TEST(Generator, UniformOverrideIsFlat) {
  constexpr uint64_t records = 1000;
  const ycsb::workload_generator gen{{.workload = 'a',
                                      .record_count = records,
                                      .operation_count = 200000,
                                      .request_distribution = ycsb::distribution::uniform}};
  std::unordered_map<uint64_t, uint64_t> hits;
  for (const operation& op : gen.run_operations()) ++hits[op.key];
  ASSERT_EQ(hits.size(), records);
  const double expected = 200000.0 / records;
  double chi2 = 0;
  for (const auto& [key, n] : hits)
    chi2 += (static_cast<double>(n) - expected) * (static_cast<double>(n) - expected) / expected;
  EXPECT_LT(chi2, 999 + 6 * std::sqrt(2 * 999.0));
}

TEST(Generator, CustomMixIsNormalised) {
  const ycsb::workload_generator gen{{.workload = 'c',
                                      .record_count = 1000,
                                      .operation_count = 100000,
                                      .mix = ycsb::op_mix{.read = 3, .update = 1}}};
  const counts c = count_types(gen.run_operations());
  EXPECT_NEAR(c.share(op_type::read), 0.75, 0.01);
  EXPECT_NEAR(c.share(op_type::update), 0.25, 0.01);
  EXPECT_NE(gen.describe().find(
                "workload c: zipfian, 1000 records, 100000 operations, read 0.75 update 0.25"),
            std::string::npos)
      << gen.describe();
}

TEST(Generator, RejectsInvalidSpecs) {
  EXPECT_THROW((ycsb::workload_generator{{.workload = 'z'}}), std::invalid_argument);
  EXPECT_THROW((ycsb::workload_generator{{.workload = 'a', .record_count = 0}}),
               std::invalid_argument);
  EXPECT_THROW((ycsb::workload_generator{{.workload = 'd', .record_count = 1}}),
               std::invalid_argument);
  EXPECT_NO_THROW((ycsb::workload_generator{{.workload = 'a', .record_count = 1}}));
  EXPECT_THROW(
      (ycsb::workload_generator{{.workload = 'e', .max_scan_length = 1, .min_scan_length = 2}}),
      std::invalid_argument);
  EXPECT_THROW((ycsb::workload_generator{{.workload = 'a', .mix = ycsb::op_mix{}}}),
               std::invalid_argument);
  EXPECT_THROW(
      (ycsb::workload_generator{{.workload = 'a', .mix = ycsb::op_mix{.read = 1, .update = -0.5}}}),
      std::invalid_argument);
}

TEST(Generator, TinyRecordCountsStayInRange) {
  for (const auto d :
       {ycsb::distribution::zipfian, ycsb::distribution::uniform, ycsb::distribution::latest}) {
    for (const uint64_t records : {1u, 2u, 3u}) {
      if (d == ycsb::distribution::latest && records < 2) continue;
      SCOPED_TRACE(std::string(ycsb::to_string(d)) + " records " + std::to_string(records));
      check_targets_exist({.workload = 'd',
                           .record_count = records,
                           .operation_count = 2000,
                           .request_distribution = d},
                          2);
    }
  }
}

TEST(Generator, ThreadsGenerateConcurrentlyFromOneGenerator) {
  const ycsb::workload_generator gen{
      {.workload = 'd', .record_count = 5000, .operation_count = 40000}};
  constexpr uint32_t threads = 4;
  std::vector<std::vector<operation>> concurrent(threads);
  {
    std::vector<std::thread> workers;
    for (uint32_t t = 0; t < threads; ++t) {
      workers.emplace_back(
          [&gen, &concurrent, t] { concurrent[t] = gen.run_operations(t, threads); });
    }
    for (std::thread& w : workers) w.join();
  }
  for (uint32_t t = 0; t < threads; ++t) EXPECT_EQ(concurrent[t], gen.run_operations(t, threads));
}

}  // namespace
