// The ycsb benchmark's answer checks (verify.h), above all the completeness of scans, and the
// stable keys that prepare_workload() hands them (workload.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <initializer_list>
#include <span>
#include <string>
#include <vector>

#include "kv/olc_tree.h"
#include "ycsb/verify.h"
#include "ycsb/ycsb.h"

namespace tessera::bench::ycsb_bench {
namespace {

using ::ycsb::op_type;
using ::ycsb::operation;

/// The entries a scan delivering these keys returns (legal values).
std::vector<kv::entry> entries(std::initializer_list<std::uint64_t> keys) {
  std::vector<kv::entry> out;
  for (const std::uint64_t k : keys) out.push_back({k, ::ycsb::value_of(k)});
  return out;
}

operation scan(std::uint64_t from, std::uint32_t length) {
  return operation{.type = op_type::scan, .scan_length = length, .key = from};
}

/// scan_error's description as text; "" when the scan is right.
std::string check(const operation& op, const std::vector<kv::entry>& out,
                  const std::vector<std::uint64_t>& stable, expect e = expect::either) {
  const wrong_answer w = scan_error(e, op, out.data(), out.size(), stable);
  char text[256];
  w.describe(text, sizeof text);
  EXPECT_EQ(static_cast<bool>(w), text[0] != '\0');
  return text;
}

const std::vector<std::uint64_t> stable{10, 20, 30, 40, 50};

// plainly_right is a filter: wherever it says right, the full check must find nothing wrong; and
// it lets the common right answers through (else it would filter nothing).
TEST(PlainlyRight, NeverPassesAWrongAnswer) {
  const std::uint64_t key = ::ycsb::key_of(7);
  const std::uint64_t values[] = {::ycsb::value_of(key), ::ycsb::updated_value_of(key), 0, 12345};
  int passed = 0;
  for (const op_type type : {op_type::insert, op_type::read, op_type::update, op_type::scan,
                             op_type::read_modify_write, op_type::remove}) {
    for (const expect e : {expect::absent, expect::present, expect::either}) {
      for (const bool ok : {false, true}) {
        for (const std::uint64_t value : values) {
          const operation op{.type = type, .key = key, .value = value};
          if (!plainly_right(op, e, ok, value)) continue;
          ++passed;
          const char* full = type == op_type::read       ? lookup_error(e, op, ok, value)
                             : type == op_type::update   ? presence_error(e, ok)
                             : type == op_type::insert   ? presence_error(e, !ok)
                                                         : "passed a type it does not know";
          EXPECT_EQ(full, nullptr) << ::ycsb::to_string(type) << " expect " << to_string(e)
                                   << " ok " << ok << " value " << value;
        }
      }
    }
  }
  // Reads and updates: found with a legal value where the key must be present (2 values each),
  // missed where it must be absent or may be either (4 values, twice, each); inserts that
  // inserted a key that must have been absent (4).
  EXPECT_EQ(passed, 2 * (2 + 4 + 4) + 4);
}

TEST(ScanCompleteness, CompleteScanPasses) {
  EXPECT_EQ(check(scan(10, 3), entries({10, 20, 30}), stable, expect::present), "");
  // Non-stable keys (inserted during the run) may appear among them.
  EXPECT_EQ(check(scan(10, 5), entries({10, 15, 20, 25, 30}), stable), "");
  // Every stable key, then the end of the tree.
  EXPECT_EQ(check(scan(5, 100), entries({10, 20, 30, 40, 50, 60}), stable), "");
}

TEST(ScanCompleteness, FullScanCoversOnlyUpToItsLastKey) {
  // 3 entries asked for, 3 delivered: 40 and 50 lie beyond the range the scan covered.
  EXPECT_EQ(check(scan(20, 3), entries({20, 30, 35}), stable), "");
  EXPECT_EQ(check(scan(20, 1), entries({20}), stable), "");
}

TEST(ScanCompleteness, StartKeyNeedNotBeStable) {
  EXPECT_EQ(check(scan(11, 2), entries({20, 30}), stable, expect::absent), "");
  EXPECT_EQ(check(scan(11, 2), entries({12, 20}), stable), "");
  EXPECT_EQ(check(scan(11, 2), entries({30, 40}), stable),
            "scan skipped key 20, which must be present");
}

TEST(ScanCompleteness, MissingStableKeyInTheMiddleFails) {
  EXPECT_EQ(check(scan(10, 3), entries({10, 30, 40}), stable, expect::present),
            "scan skipped key 20, which must be present");
  EXPECT_EQ(check(scan(10, 4), entries({10, 15, 20, 40}), stable),
            "scan skipped key 30, which must be present");
  // The missing key sits between two non-stable keys.
  EXPECT_EQ(check(scan(25, 2), entries({26, 41}), stable),
            "scan skipped key 30, which must be present");
}

TEST(ScanCompleteness, ShortScanStoppingBeforeTheLastStableKeyFails) {
  // Fewer entries than asked for: the tree ended, so 40 and 50 must have been delivered.
  EXPECT_EQ(check(scan(10, 10), entries({10, 20, 30}), stable),
            "scan skipped key 40, which must be present");
  EXPECT_EQ(check(scan(10, 5), entries({10, 20, 30, 40}), stable),
            "scan skipped key 50, which must be present");
  // Nothing at all from a start below stable keys.
  EXPECT_EQ(check(scan(45, 3), {}, stable), "scan skipped key 50, which must be present");
}

TEST(ScanCompleteness, ShortScanPastTheLastStableKeyPasses) {
  EXPECT_EQ(check(scan(35, 10), entries({40, 50}), stable), "");
  EXPECT_EQ(check(scan(51, 10), {}, stable), "");
  EXPECT_EQ(check(scan(51, 10), entries({52, 53}), stable), "");
}

TEST(ScanCompleteness, NonStableKeysMayBeMissing) {
  // Say 15, 25 and 35 were loaded but inserted or removed again during the run: not stable, so
  // absent from every answer is fine.
  EXPECT_EQ(check(scan(10, 4), entries({10, 20, 30, 40}), stable), "");
  EXPECT_EQ(check(scan(12, 100), entries({20, 30, 40, 50}), stable), "");
  EXPECT_EQ(check(scan(10, 3), entries({10, 20, 30}), {}), "");  // no stable keys at all
  EXPECT_EQ(check(scan(10, 3), {}, {}), "");
}

TEST(ScanCompleteness, ScanOfLengthZeroCoversNothing) {
  const std::vector<std::uint64_t> with_zero{0, 1, 2};
  EXPECT_EQ(check(scan(0, 0), {}, with_zero), "");
  EXPECT_EQ(check(scan(0, 0), {}, stable), "");
}

TEST(ScanCompleteness, KeysAtTheEndsOfTheKeySpace) {
  const std::uint64_t top = ~std::uint64_t{0};
  const std::vector<std::uint64_t> ends{0, top};
  EXPECT_EQ(check(scan(0, 2), entries({0, top}), ends), "");
  EXPECT_EQ(check(scan(0, 3), entries({0}), ends),
            "scan skipped key " + std::to_string(top) + ", which must be present");
  EXPECT_EQ(check(scan(0, 2), entries({1, top}), ends),
            "scan skipped key 0, which must be present");
}

TEST(ScanCompleteness, OrderAndValuesAreStillCheckedFirst) {
  EXPECT_EQ(check(scan(10, 3), entries({10, 30, 20}), stable), "scan keys not strictly ascending");
  std::vector<kv::entry> bad = entries({10, 20});
  bad[1].value = 7;
  EXPECT_EQ(check(scan(10, 2), bad, stable), "scan returned an illegal value");
  EXPECT_EQ(check(scan(10, 1), entries({10, 20}), stable),
            "scan returned more entries than asked for");
  EXPECT_EQ(check(scan(10, 2), entries({20, 30}), stable, expect::present),
            "scan does not start with its start key, which must be present");
}

TEST(ErrorLog, NamesTheSkippedKey) {
  error_log errors;
  const std::vector<kv::entry> out = entries({10, 30});
  const operation op = scan(10, 2);
  if (const wrong_answer w = scan_error(expect::present, op, out.data(), out.size(), stable))
    errors.record(7, op, w);
  errors.record(8, op, "a later error");
  EXPECT_EQ(errors.count(), 2u);
  EXPECT_STREQ(errors.first(),
               "operation 7, SCAN key 10: scan skipped key 20, which must be present");
}

TEST(ErrorLog, PlainDescription) {
  error_log errors;
  errors.record(3, operation{.type = op_type::read, .key = 5}, "illegal value");
  EXPECT_STREQ(errors.first(), "operation 3, READ key 5: illegal value");
}

/// A real tree: scans of a quiescent olc_tree pass; removing a stable key behind the check's
/// back is caught by the next scan that covers it.
TEST(ScanCompleteness, CatchesAKeyLostByTheTree) {
  kv::olc_tree tree;
  std::vector<std::uint64_t> keys;
  for (std::uint64_t i = 0; i < 5000; ++i) keys.push_back(::ycsb::key_of(i));
  for (const std::uint64_t k : keys) ASSERT_TRUE(tree.insert(k, ::ycsb::value_of(k)));
  std::sort(keys.begin(), keys.end());
  std::vector<kv::entry> out(100);
  for (std::size_t i = 0; i < keys.size(); i += 97) {
    const operation op = scan(keys[i], 100);
    const std::size_t n = tree.scan(op.key, op.scan_length, out.data());
    EXPECT_FALSE(scan_error(expect::present, op, out.data(), n, keys)) << i;
  }
  ASSERT_TRUE(tree.remove(keys[1001]));
  const operation op = scan(keys[1000], 10);
  const std::size_t n = tree.scan(op.key, op.scan_length, out.data());
  const wrong_answer w = scan_error(expect::present, op, out.data(), n, keys);
  ASSERT_TRUE(w);
  EXPECT_TRUE(w.has_key);
  EXPECT_EQ(w.key, keys[1001]);
  // Near the end: a short scan that misses the lost key.
  ASSERT_TRUE(tree.remove(keys[keys.size() - 2]));
  const operation tail = scan(keys[keys.size() - 5], 10);
  const std::size_t m = tree.scan(tail.key, tail.scan_length, out.data());
  EXPECT_EQ(m, 4u);
  const wrong_answer v = scan_error(expect::present, tail, out.data(), m, keys);
  ASSERT_TRUE(v);
  EXPECT_EQ(v.key, keys[keys.size() - 2]);
}

/// prepare_workload() of a load trace and a run trace with these lines (files `name`_load.txt and
/// `name`_run.txt in the test's temporary directory, removed again).
workload_data prepare_traces(const std::string& name, const char* load_lines,
                             const char* run_lines) {
  const std::string load = ::testing::TempDir() + "/verify_test_" + name + "_load.txt";
  const std::string run = ::testing::TempDir() + "/verify_test_" + name + "_run.txt";
  std::ofstream(load) << load_lines;
  std::ofstream(run) << run_lines;
  workload_data w = prepare_workload({.load_file = load, .run_file = run});
  std::remove(load.c_str());
  std::remove(run.c_str());
  return w;
}

/// A quiescent olc_tree of 5,000 loaded keys (several levels), every seventh updated.
struct content_fixture {
  kv::olc_tree tree;
  std::vector<std::uint64_t> keys;     // sorted
  std::vector<std::uint64_t> updated;  // sorted
  content_fixture() {
    for (std::uint64_t i = 0; i < 5000; ++i) keys.push_back(::ycsb::key_of(i));
    for (const std::uint64_t k : keys) EXPECT_TRUE(tree.insert(k, ::ycsb::value_of(k)));
    std::sort(keys.begin(), keys.end());
    for (std::size_t i = 0; i < keys.size(); i += 7) {
      EXPECT_TRUE(tree.update(keys[i], ::ycsb::updated_value_of(keys[i])));
      updated.push_back(keys[i]);
    }
  }
  [[nodiscard]] wrong_answer check(const std::vector<std::uint64_t>& unsettled = {}) const {
    std::uint64_t settled = keys.size();  // loaded keys no insert or remove named
    for (const std::uint64_t k : unsettled)
      settled -= std::binary_search(keys.begin(), keys.end(), k) ? 1 : 0;
    return content_error(tree.root(), updated, unsettled, settled);
  }
};

std::string describe(const wrong_answer& w) {
  char text[256];
  w.describe(text, sizeof text);
  return text;
}

TEST(ContentCheck, PassesWhenEveryKeyHoldsWhatThePhaseLeft) {
  content_fixture f;
  ASSERT_FALSE(f.tree.root()->is_leaf()) << "the walk should start below the root";
  EXPECT_FALSE(f.check()) << describe(f.check());
  kv::olc_tree empty;
  EXPECT_FALSE(content_error(empty.root(), {}, {}, 0));
}

TEST(ContentCheck, CatchesALostUpdate) {
  content_fixture f;
  const std::uint64_t lost = f.keys[701];  // 701 = 7 * 100 + 1: not updated
  f.updated.insert(std::lower_bound(f.updated.begin(), f.updated.end(), lost), lost);
  const wrong_answer w = f.check();
  ASSERT_TRUE(w);
  EXPECT_EQ(w.key, lost);
  EXPECT_NE(describe(w).find("lost update"), std::string::npos) << describe(w);
}

TEST(ContentCheck, CatchesAnUpdateOfAKeyNoOperationNamed) {
  content_fixture f;
  ASSERT_TRUE(f.tree.update(f.keys[702], ::ycsb::updated_value_of(f.keys[702])));
  const wrong_answer w = f.check();
  ASSERT_TRUE(w);
  EXPECT_EQ(w.key, f.keys[702]);
  EXPECT_NE(describe(w).find("no update of the phase named it"), std::string::npos);
  // Inserted or removed by the phase: either value is right.
  EXPECT_FALSE(f.check({f.keys[702]}));
}

TEST(ContentCheck, CatchesAnUpdatedKeyThatIsMissing) {
  content_fixture f;
  ASSERT_TRUE(f.tree.remove(f.keys[700]));           // updated, in the middle
  ASSERT_TRUE(f.tree.remove(f.updated.back()));      // and the last one updated
  const wrong_answer w = f.check();
  ASSERT_TRUE(w);
  EXPECT_EQ(w.key, f.keys[700]);
  EXPECT_NE(describe(w).find("missing"), std::string::npos) << describe(w);
  f.updated.erase(std::find(f.updated.begin(), f.updated.end(), f.keys[700]));
  const wrong_answer tail = f.check();
  ASSERT_TRUE(tail);
  EXPECT_EQ(tail.key, f.updated.back());
}

// A loaded key that nothing wrote and that went missing, and a key that appeared from nowhere:
// a walk over the tree alone looks only at keys in the tree, so the check also compares how many
// keys it found with how many must be there (settled_count).
TEST(ContentCheck, CatchesALostKeyThatNothingWroteAndAKeyFromNowhere) {
  content_fixture f;
  ASSERT_TRUE(f.tree.remove(f.keys[701]));
  const wrong_answer lost = f.check();
  ASSERT_TRUE(lost);
  EXPECT_NE(describe(lost).find("lost a key"), std::string::npos) << describe(lost);
  EXPECT_FALSE(f.check({f.keys[701]})) << "a key the phase removed may be missing";
  ASSERT_TRUE(f.tree.insert(f.keys[701], ::ycsb::value_of(f.keys[701])));
  ASSERT_TRUE(f.tree.insert(12345, ::ycsb::value_of(12345)));
  const wrong_answer extra = f.check();
  ASSERT_TRUE(extra);
  EXPECT_NE(describe(extra).find("neither loaded nor inserted"), std::string::npos)
      << describe(extra);
}

TEST(ContentCheck, CatchesAnIllegalValueEvenWhereEitherIsRight) {
  content_fixture f;
  ASSERT_TRUE(f.tree.update(f.keys[3], 12345));
  EXPECT_TRUE(f.check());
  const wrong_answer w = f.check({f.keys[3]});
  ASSERT_TRUE(w);
  EXPECT_EQ(w.key, f.keys[3]);
  EXPECT_NE(describe(w).find("illegal"), std::string::npos) << describe(w);
}

TEST(ContentKeys, GeneratedUpdatesAreListedAndInsertsAreUnsettled) {
  for (const char workload : {'a', 'b', 'd', 'e', 'f'}) {
    const workload_data w =
        prepare_workload({.workload = workload, .records = 2000, .operations = 4000});
    EXPECT_TRUE(w.load.updated_keys.empty()) << workload;
    EXPECT_TRUE(w.load.unsettled_keys.empty()) << workload;
    std::vector<std::uint64_t> updated, inserted;
    for (const operation& op : w.run.ops) {
      if (op.type == op_type::update || op.type == op_type::read_modify_write)
        updated.push_back(op.key);
      if (op.type == op_type::insert) inserted.push_back(op.key);
    }
    std::sort(inserted.begin(), inserted.end());
    inserted.erase(std::unique(inserted.begin(), inserted.end()), inserted.end());
    EXPECT_EQ(w.run.unsettled_keys, inserted) << workload;
    EXPECT_EQ(w.load.settled_count, 2000u) << workload;
    EXPECT_EQ(w.run.settled_count, 2000u) << workload;  // the run inserts new keys only
    // Updated: the loaded keys among them (an update of a key the run inserted is unsettled).
    std::erase_if(updated, [&](std::uint64_t k) {
      return std::binary_search(inserted.begin(), inserted.end(), k);
    });
    std::sort(updated.begin(), updated.end());
    updated.erase(std::unique(updated.begin(), updated.end()), updated.end());
    EXPECT_EQ(w.run.updated_keys, updated) << workload;
    EXPECT_EQ(workload == 'a' || workload == 'b' || workload == 'f', !updated.empty())
        << workload;
  }
}

TEST(ContentKeys, TraceUpdatesOfKeysTheRunInsertsOrRemovesAreUnsettled) {
  const workload_data w = prepare_traces(
      "content", "INSERT 1\nINSERT 2\nINSERT 3\nINSERT 4\n",
      "UPDATE 3\nUPDATE 1\nUPDATE 3\nDELETE 2\nUPDATE 2\nINSERT 9\nUPDATE 9\nUPDATE 8\n");
  EXPECT_EQ(w.run.updated_keys, (std::vector<std::uint64_t>{1, 3}));  // 8: never loaded
  EXPECT_EQ(w.run.unsettled_keys, (std::vector<std::uint64_t>{2, 9}));
  EXPECT_EQ(w.load.settled_count, 4u);
  EXPECT_EQ(w.run.settled_count, 3u);  // 1, 3, 4
}

TEST(StableKeys, GeneratedScanWorkloadHoldsEveryLoadedKeySorted) {
  const workload_data w = prepare_workload({.workload = 'e', .records = 2000, .operations = 2000});
  ASSERT_GT(w.run.max_scan_length, 0u);
  std::vector<std::uint64_t> loaded;
  for (const operation& op : w.load.ops) loaded.push_back(op.key);
  std::sort(loaded.begin(), loaded.end());
  EXPECT_EQ(w.run.stable_keys, loaded);  // the run only inserts new keys
  EXPECT_TRUE(w.load.stable_keys.empty());
  for (const operation& op : w.run.ops) {
    if (op.type == op_type::insert) {
      EXPECT_FALSE(std::binary_search(loaded.begin(), loaded.end(), op.key));
    }
  }
}

TEST(StableKeys, NotBuiltWithoutScans) {
  for (const char workload : {'a', 'b', 'c', 'd', 'f'}) {
    const workload_data w =
        prepare_workload({.workload = workload, .records = 500, .operations = 500});
    EXPECT_EQ(w.run.max_scan_length, 0u) << workload;
    EXPECT_TRUE(w.run.stable_keys.empty()) << workload;
  }
}

TEST(StableKeys, TraceInsertsAndRemovesAreNotStable) {
  const workload_data w =
      prepare_traces("stable", "INSERT 1\nINSERT 2\nINSERT 3\nINSERT 4\nINSERT 5\nINSERT 3\n",
                     "INSERT 2\nDELETE 4\nINSERT 9\nSCAN 1 10\nREAD 5\n");
  EXPECT_EQ(w.run.stable_keys, (std::vector<std::uint64_t>{1, 3, 5}));
  EXPECT_EQ(w.run.max_scan_length, 10u);
}

TEST(StableKeys, TraceScansOfLengthZeroBuildNothing) {
  const std::string run = ::testing::TempDir() + "/verify_test_run0.txt";
  {
    std::ofstream r(run);
    r << "SCAN " << ::ycsb::key_of(0) << " 0\nREAD 7\n";
  }
  const workload_data w = prepare_workload({.records = 100, .run_file = run});
  std::remove(run.c_str());
  EXPECT_TRUE(w.run.stable_keys.empty());
}

}  // namespace
}  // namespace tessera::bench::ycsb_bench
