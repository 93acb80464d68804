// in_turns() and measure(): runs of different implementations alternate, set-up runs in a job's
// turn, and a failing job stops the others and its exception reaches the caller.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "common/timing.h"

namespace tessera::bench {
namespace {

constexpr std::chrono::milliseconds no_settle{0};

class turns : public ::testing::Test {
 protected:
  /// A job named `name` that records "<name>" at set-up and "<name>" per run in `m_order`, and
  /// throws bench_failure at run `fail_at` (1-based; 0: never).
  std::function<void()> job(char name, unsigned runs, unsigned fail_at = 0) {
    return [this, name, runs, fail_at] {
      record(static_cast<char>(name + ('a' - 'A')));  // lower case: the set-up
      unsigned k = 0;
      measure(std::string(1, name), runs, [&] {
        record(name);
        if (++k == fail_at) throw bench_failure(std::string("failed: ") + name);
        return sample{.ops = 1, .seconds = 0.001};
      });
    };
  }
  void record(char c) {
    std::lock_guard lock(m_mutex);
    m_order += c;
  }
  std::string order() {
    std::lock_guard lock(m_mutex);
    return m_order;
  }

 private:
  std::mutex m_mutex;
  std::string m_order;
};

TEST_F(turns, runs_of_the_jobs_alternate_and_set_up_runs_in_the_job_s_turn) {
  in_turns({job('A', 3), job('B', 3), job('C', 3)}, no_settle);
  EXPECT_EQ(order(), "aAbBcCABCABC");
}

TEST_F(turns, a_job_with_fewer_runs_leaves_the_ring) {
  in_turns({job('A', 1), job('B', 3)}, no_settle);
  EXPECT_EQ(order(), "aAbBBB");
}

TEST_F(turns, a_single_job_runs_all_its_runs) {
  in_turns({job('A', 4)}, no_settle);
  EXPECT_EQ(order(), "aAAAA");
}

TEST_F(turns, a_failure_stops_the_others_and_reaches_the_caller) {
  try {
    in_turns({job('A', 3), job('B', 3, 2), job('C', 3)}, no_settle);
    FAIL() << "no exception";
  } catch (const bench_failure& e) {
    EXPECT_STREQ(e.what(), "failed: B");
  }
  EXPECT_EQ(order(), "aAbBcCAB");  // A and C stop at their next turn
}

TEST(measure_in_turns, returns_each_name_s_measurement_in_the_order_of_the_names) {
  const std::vector<std::string> names{"one", "three", "two"};
  const std::vector<measurement> m = measure_in_turns(names, [](const std::string& name) {
    const std::uint64_t ops = name == "one" ? 1 : name == "two" ? 2 : 3;
    return measure(name, 2, [ops] { return sample{.ops = ops, .seconds = 0.001}; });
  });
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(m[0].ops, 1u);
  EXPECT_EQ(m[1].ops, 3u);
  EXPECT_EQ(m[2].ops, 2u);
  EXPECT_EQ(m[1].runs, 2u);
}

TEST(measure, outside_in_turns_runs_back_to_back) {
  unsigned runs = 0;
  const measurement m = measure("x", 5, [&] {
    ++runs;
    return sample{.ops = 7, .seconds = 0.001 * runs};
  });
  EXPECT_EQ(runs, 5u);
  EXPECT_EQ(m.ops, 7u);
  EXPECT_EQ(m.runs, 5u);
  EXPECT_DOUBLE_EQ(m.min_seconds, 0.001);
  EXPECT_DOUBLE_EQ(m.max_seconds, 0.005);
}

}  // namespace
}  // namespace tessera::bench
