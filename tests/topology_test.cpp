// Where workers go: the order of CPUs a runtime takes by default (src/runtime/topology.h), on
// made-up machines (hwloc's synthetic topologies) and on this one.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <stdexcept>
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

}  // namespace
}  // namespace tessera::test
