// Where workers go: the order of CPUs a runtime takes by default (src/runtime/topology.h), on
// made-up machines (hwloc's synthetic topologies) and on this one.
#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include "runtime/topology.h"
#include "tessera/runtime.h"

namespace tessera::test {
namespace {

using detail::cpu_place;
using detail::topology;
using detail::worker_order;
using cpus = std::vector<unsigned>;

TEST(worker_order, one_thread_of_every_core_before_a_sibling_with_siblings_numbered_apart) {
  // Linux's usual numbering on Intel: CPU c and c + 4 are the two threads of core c.
  std::vector<cpu_place> places;
  for (unsigned c = 0; c < 8; ++c)
    places.push_back({.cpu = c, .node = 0, .core = c % 4, .rank = c / 4});
  EXPECT_EQ(worker_order(places), (cpus{0, 1, 2, 3, 4, 5, 6, 7}));
}

TEST(worker_order, one_thread_of_every_core_before_a_sibling_with_siblings_numbered_together) {
  // Many VMs: CPUs 2k and 2k + 1 are the two threads of core k. Ascending order would put
  // workers 0 and 1 on one core.
  std::vector<cpu_place> places;
  for (unsigned c = 0; c < 8; ++c)
    places.push_back({.cpu = c, .node = 0, .core = c / 2, .rank = c % 2});
  EXPECT_EQ(worker_order(places), (cpus{0, 2, 4, 6, 1, 3, 5, 7}));
}

TEST(worker_order, node_by_node) {
  // Two nodes whose CPUs interleave (node = c % 2), one thread per core.
  std::vector<cpu_place> places;
  for (unsigned c = 0; c < 6; ++c)
    places.push_back({.cpu = c, .node = c % 2, .core = c, .rank = 0});
  EXPECT_EQ(worker_order(places), (cpus{0, 2, 4, 1, 3, 5}));
}

TEST(topology, synthetic_machine_with_two_nodes_and_smt) {
  // hwloc numbers the synthetic PUs in order: core k of the machine holds PUs 2k and 2k + 1,
  // node 0 cores 0-3, node 1 cores 4-7.
  const topology t = topology::synthetic("node:2 core:4 pu:2");
  EXPECT_EQ(t.allowed_cpus().size(), 16u);
  EXPECT_EQ(t.worker_order(), (cpus{0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15}));
  EXPECT_EQ(t.node_of_cpu(7), 0u);
  EXPECT_EQ(t.node_of_cpu(8), 1u);
}

TEST(topology, a_sibling_whose_twin_is_not_allowed_counts_as_the_first_thread_of_its_core) {
  // The process may not run on PU 0: PU 1 is then core 0's first allowed thread.
  const topology t = topology::synthetic("core:3 pu:2", {1, 2, 3, 4, 5});
  EXPECT_EQ(t.worker_order(), (cpus{1, 2, 4, 3, 5}));
}

TEST(topology, machine_without_smt_keeps_ascending_order) {
  const topology t = topology::synthetic("core:6 pu:1");
  EXPECT_EQ(t.worker_order(), (cpus{0, 1, 2, 3, 4, 5}));
}

TEST(topology, the_last_level_cache_is_the_largest_data_cache_above_the_first_worker_cpu) {
  // Two packages, each an L3 over two cores with an L2 and split L1s of their own.
  const topology t = topology::synthetic(
      "pack:2 l3u:1(size=33554432) l2u:2(size=1048576) l1d:1(size=32768) core:1 pu:1");
  EXPECT_EQ(t.last_level_cache_bytes(), std::size_t{33554432});
  const topology without = topology::synthetic("core:2 pu:1");
  EXPECT_EQ(without.last_level_cache_bytes(), std::size_t{0});
  EXPECT_EQ(last_level_cache_bytes(), topology::get().last_level_cache_bytes());
}

TEST(topology, a_description_hwloc_rejects_is_an_error) {
  EXPECT_THROW(topology::synthetic("no such thing:3"), std::invalid_argument);
}

TEST(topology, this_machine_orders_every_allowed_cpu_once) {
  const topology& t = topology::get();
  cpus order = t.worker_order();
  std::sort(order.begin(), order.end());
  EXPECT_EQ(order, t.allowed_cpus());
  EXPECT_EQ(default_worker_cpus(), t.worker_order());
}

TEST(topology, workers_take_the_default_cpus_in_order_and_wrap) {
  const cpus order = default_worker_cpus();
  const auto n = static_cast<unsigned>(order.size()) + 1;  // one more than CPUs: wraps
  runtime r({.workers = n});
  for (unsigned w = 0; w < n; ++w) {
    EXPECT_EQ(r.cpu_of(worker_id{static_cast<std::uint16_t>(w)}), order[w % order.size()]) << w;
  }
}

// ---- the process's CPUs, pinning refused, unpinned workers ------------------------------------

std::size_t cpus_in(const cpu_set_t& set) { return static_cast<std::size_t>(CPU_COUNT(&set)); }

cpu_set_t mask_of_this_thread() {
  cpu_set_t set;
  CPU_ZERO(&set);
  sched_getaffinity(0, sizeof set, &set);
  return set;
}

void pin_this_thread_to(unsigned cpu) {
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  ASSERT_EQ(pthread_setaffinity_np(pthread_self(), sizeof one, &one), 0);
}

/// What each worker's thread may run on, from a task on that worker.
std::vector<std::size_t> worker_masks(runtime& r) {
  std::vector<std::size_t> sizes(r.workers(), 0);
  const group g = r.make_group();
  for (unsigned w = 0; w < r.workers(); ++w) {
    auto* t =
        r.make_task_from([&sizes, w](context&) { sizes[w] = cpus_in(mask_of_this_thread()); });
    t->annotate(worker_id{static_cast<std::uint16_t>(w)});
    r.spawn(t, g);
  }
  r.wait(g);
  return sizes;
}

/// pinned() is final when the constructor returns: for a runtime made with pin = false it is
/// false at once, not only once its workers have run.
TEST(pinning, pinned_is_false_at_once_for_an_unpinned_runtime) {
  for (int i = 0; i < 50; ++i) {
    runtime r({.workers = 3, .pin = false});
    ASSERT_FALSE(r.pinned()) << "round " << i;
  }
}

/// Unpinned workers run on the process's CPUs, not on the mask of the thread that made the
/// runtime (inheriting it, both workers of a runtime made on a thread pinned to CPU 0 would
/// share CPU 0).
TEST(pinning, unpinned_workers_may_run_on_every_cpu_of_the_process) {
  const std::size_t process_cpus = default_worker_cpus().size();
  std::vector<std::size_t> sizes;
  std::thread maker([&] {
    pin_this_thread_to(default_worker_cpus().front());
    runtime r({.workers = 2, .pin = false});
    sizes = worker_masks(r);
  });
  maker.join();
  for (const std::size_t n : sizes) EXPECT_EQ(n, process_cpus);
}

// The next two run in a fresh process (a death test re-runs the binary), because the process's
// CPUs are read once, when it first makes a runtime.

/// The default CPUs are the process's, even when its first runtime is made on a pinned thread
/// (not the calling thread's mask, which would be kept for the whole process: one worker).
TEST(pinning_fresh_process, a_runtime_made_first_on_a_pinned_thread_still_gets_every_cpu) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        cpu_set_t process;
        CPU_ZERO(&process);
        sched_getaffinity(getpid(), sizeof process, &process);
        unsigned first = 0;
        while (!CPU_ISSET(first, &process)) ++first;
        unsigned workers = 0;
        std::thread maker([&] {
          cpu_set_t one;
          CPU_ZERO(&one);
          CPU_SET(first, &one);
          pthread_setaffinity_np(pthread_self(), sizeof one, &one);
          runtime r;
          workers = r.workers();
        });
        maker.join();
        std::fprintf(stderr, "workers %u, process CPUs %zu\n", workers, cpus_in(process));
        std::exit(workers == cpus_in(process) ? 0 : 1);
      },
      testing::ExitedWithCode(0), "");
}

/// A CPU the machine has but the process may not use (taskset) is a refused pin: its worker runs
/// unpinned, within the process's mask, not bound there by hwloc anyway.
TEST(pinning_fresh_process, a_cpu_outside_the_process_mask_runs_its_worker_unpinned) {
  if (sysconf(_SC_NPROCESSORS_CONF) < 2) {
    // A one-CPU machine has no CPU outside the mask to name: CPU 1 is not a CPU here.
    EXPECT_THROW(runtime({.cpus = {1}}), std::invalid_argument);
    return;
  }
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        // The process may use CPU 0 only (as `taskset -c 0` would set it), from before tessera
        // first looks; the runtime then asks for CPU 1.
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(0, &one);
        if (sched_setaffinity(0, sizeof one, &one) != 0) std::exit(2);
        runtime r({.cpus = {1}});
        const std::vector<std::size_t> sizes = worker_masks(r);
        const bool ok = !r.pinned() && sizes.size() == 1 && sizes[0] == 1;
        std::fprintf(stderr, "pinned %d, worker mask %zu CPUs\n", r.pinned(), sizes[0]);
        std::exit(ok ? 0 : 1);
      },
      testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace tessera::test
