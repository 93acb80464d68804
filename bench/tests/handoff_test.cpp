// handoff_ns(): a positive latency between two CPUs the process may use, an answer (not a hang)
// when both threads share one CPU, and nullopt when a thread cannot be pinned.
#include <gtest/gtest.h>

#include <sched.h>

#include <cmath>
#include <vector>

#include "common/handoff.h"

namespace tessera::bench {
namespace {

std::vector<unsigned> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<unsigned> cpus;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return cpus;
  for (unsigned c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

TEST(handoff, two_cpus_give_a_positive_latency) {
  const auto cpus = allowed_cpus();
  ASSERT_FALSE(cpus.empty());
  const auto ns = handoff_ns(cpus.front(), cpus.back());  // the same one if only one is allowed
  ASSERT_TRUE(ns.has_value());
  EXPECT_GT(*ns, 0.0);
  EXPECT_TRUE(std::isfinite(*ns));
}

TEST(handoff, one_cpu_shared_by_both_threads_still_answers) {
  const auto cpus = allowed_cpus();
  ASSERT_FALSE(cpus.empty());
  // Each hop is then a context switch; the budget bounds the whole measurement.
  const handoff_limits limits{.round_trips = 1'000'000, .budget = std::chrono::milliseconds(50)};
  const auto ns = handoff_ns(cpus[0], cpus[0], limits);
  ASSERT_TRUE(ns.has_value());
  EXPECT_GT(*ns, 0.0);
}

TEST(handoff, a_cpu_that_cannot_be_used_gives_nothing) {
  EXPECT_FALSE(handoff_ns(0, CPU_SETSIZE + 1).has_value());
  EXPECT_FALSE(handoff_ns(CPU_SETSIZE + 1, 0).has_value());
}

}  // namespace
}  // namespace tessera::bench
