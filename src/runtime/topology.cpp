#include "runtime/topology.h"

#include <hwloc.h>
#include <numa.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>

#include "util/mutex.h"

namespace tessera::detail {

struct topology::impl {
  hwloc_topology_t topo = nullptr;
  detail::mutex mutex;  // hwloc calls on one topology object are serialized to be safe
};

topology& topology::get() {
  // Loaded once: hwloc_topology_load costs milliseconds, and runtimes start and stop often.
  static topology* t = new topology(nullptr, {});
  return *t;
}

topology topology::synthetic(const char* description, std::vector<unsigned> allowed) {
  return topology(description, std::move(allowed));
}

topology::topology(topology&& other) noexcept
    : m_impl(std::exchange(other.m_impl, nullptr)),
      m_allowed(std::move(other.m_allowed)),
      m_node_of_cpu(std::move(other.m_node_of_cpu)),
      m_order(std::move(other.m_order)),
      m_llc_bytes(other.m_llc_bytes) {}

topology::~topology() {
  if (m_impl == nullptr) return;
  if (m_impl->topo != nullptr) hwloc_topology_destroy(m_impl->topo);
  delete m_impl;
}

topology::topology(const char* synthetic_description, std::vector<unsigned> allowed)
    : m_impl(new impl) {
  const bool synthetic = synthetic_description != nullptr;
  if (hwloc_topology_init(&m_impl->topo) != 0) {
    m_impl->topo = nullptr;
  } else if ((synthetic &&
              hwloc_topology_set_synthetic(m_impl->topo, synthetic_description) != 0) ||
             hwloc_topology_load(m_impl->topo) != 0) {
    hwloc_topology_destroy(m_impl->topo);
    m_impl->topo = nullptr;
  }
  if (synthetic) {
    if (m_impl->topo == nullptr) {
      delete m_impl;
      throw std::invalid_argument(std::string("tessera: hwloc rejects the synthetic topology \"") +
                                  synthetic_description + "\"");
    }
    hwloc_obj_t pu = nullptr;
    while ((pu = hwloc_get_next_obj_by_type(m_impl->topo, HWLOC_OBJ_PU, pu)) != nullptr) {
      if (allowed.empty() ||
          std::find(allowed.begin(), allowed.end(), pu->os_index) != allowed.end())
        m_allowed.push_back(pu->os_index);
    }
    std::sort(m_allowed.begin(), m_allowed.end());
  } else {
    // The process's CPUs: its main thread's mask (what taskset or numactl set before exec), not
    // the calling thread's, which may be pinned: a runtime made first on a thread pinned to one
    // CPU would otherwise give every later runtime of the process one worker by default.
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(getpid(), sizeof(set), &set) == 0) {
      for (unsigned c = 0; c < CPU_SETSIZE; ++c) {
        if (CPU_ISSET(c, &set)) m_allowed.push_back(c);
      }
    }
  }
  if (m_allowed.empty()) m_allowed.push_back(0);
  // Nodes of every CPU the machine has, not only the allowed ones: runtime_options::cpus may name
  // others (their workers run unpinned, but their memory and node routing still follow the CPU).
  unsigned cpu_slots = m_allowed.back() + 1;
  if (!synthetic) {
    const long configured = sysconf(_SC_NPROCESSORS_CONF);
    if (configured > 0) cpu_slots = std::max(cpu_slots, static_cast<unsigned>(configured));
  }
  m_node_of_cpu.assign(cpu_slots, 0);
  bool nodes_known = false;
  if (!synthetic && numa_available() >= 0) {
    for (unsigned c = 0; c < cpu_slots; ++c) {
      int n = numa_node_of_cpu(static_cast<int>(c));
      m_node_of_cpu[c] = n < 0 ? 0 : static_cast<unsigned>(n);
    }
    nodes_known = true;
  }
  if (!nodes_known && m_impl->topo != nullptr) {
    // hwloc's NUMA nodes (memory children in hwloc 2): the one whose cpuset holds the CPU.
    hwloc_obj_t node = nullptr;
    while ((node = hwloc_get_next_obj_by_type(m_impl->topo, HWLOC_OBJ_NUMANODE, node)) != nullptr) {
      for (unsigned c = 0; c < cpu_slots; ++c) {
        if (node->cpuset != nullptr && hwloc_bitmap_isset(node->cpuset, c))
          m_node_of_cpu[c] = node->os_index;
      }
    }
  }
  order_workers();
  find_last_level_cache();
}

void topology::find_last_level_cache() {
  if (m_impl->topo == nullptr || m_order.empty()) return;
  hwloc_obj_t pu = hwloc_get_pu_obj_by_os_index(m_impl->topo, m_order.front());
  for (hwloc_obj_t o = pu == nullptr ? nullptr : pu->parent; o != nullptr; o = o->parent) {
    if (!hwloc_obj_type_is_cache(o->type) || o->attr == nullptr) continue;
    if (o->attr->cache.type == HWLOC_OBJ_CACHE_INSTRUCTION) continue;
    m_llc_bytes = std::max(m_llc_bytes, static_cast<std::size_t>(o->attr->cache.size));
  }
}

void topology::order_workers() {
  std::vector<cpu_place> places;
  places.reserve(m_allowed.size());
  for (unsigned c : m_allowed) {
    cpu_place p{.cpu = c, .node = node_of_cpu(c), .core = c, .rank = 0};
    if (m_impl->topo != nullptr) {
      hwloc_obj_t pu = hwloc_get_pu_obj_by_os_index(m_impl->topo, c);
      hwloc_obj_t core = pu == nullptr
                             ? nullptr
                             : hwloc_get_ancestor_obj_by_type(m_impl->topo, HWLOC_OBJ_CORE, pu);
      if (core != nullptr) {
        p.core = core->logical_index;
        // Rank among the core's allowed hardware threads, in hwloc's order.
        hwloc_obj_t sibling = nullptr;
        while ((sibling = hwloc_get_next_obj_inside_cpuset_by_type(
                    m_impl->topo, core->cpuset, HWLOC_OBJ_PU, sibling)) != nullptr &&
               sibling != pu) {
          if (std::binary_search(m_allowed.begin(), m_allowed.end(), sibling->os_index)) ++p.rank;
        }
      }
    }
    places.push_back(p);
  }
  m_order = detail::worker_order(std::move(places));
}

std::vector<unsigned> worker_order(std::vector<cpu_place> places) {
  std::stable_sort(places.begin(), places.end(), [](const cpu_place& a, const cpu_place& b) {
    if (a.node != b.node) return a.node < b.node;
    if (a.rank != b.rank) return a.rank < b.rank;
    if (a.core != b.core) return a.core < b.core;
    return a.cpu < b.cpu;
  });
  std::vector<unsigned> order;
  order.reserve(places.size());
  for (const cpu_place& p : places) order.push_back(p.cpu);
  return order;
}

unsigned topology::node_of_cpu(unsigned cpu) const noexcept {
  return cpu < m_node_of_cpu.size() ? m_node_of_cpu[cpu] : 0;
}

bool topology::pin_this_thread(unsigned cpu, std::string& why) const {
  // A CPU outside the process's mask is refused: hwloc would bind to it whenever the cgroup
  // allows, and the worker escape the mask that taskset or numactl gave the process.
  if (!std::binary_search(m_allowed.begin(), m_allowed.end(), cpu)) {
    why = "CPU " + std::to_string(cpu) + " is not among the CPUs this process may run on";
    return false;
  }
  if (m_impl->topo == nullptr) {
    why = "hwloc could not load the topology";
    return false;
  }
  hwloc_bitmap_t set = hwloc_bitmap_alloc();
  hwloc_bitmap_only(set, cpu);
  int rc;
  {
    detail::lock hold(m_impl->mutex);
    rc = hwloc_set_cpubind(m_impl->topo, set, HWLOC_CPUBIND_THREAD);
  }
  const int err = errno;
  hwloc_bitmap_free(set);
  if (rc != 0) {
    why = std::string("hwloc_set_cpubind: ") + std::strerror(err);
    return false;
  }
  return true;
}

void topology::unpin_this_thread() const noexcept {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (const unsigned c : m_allowed) {
    if (c < CPU_SETSIZE) CPU_SET(c, &set);
  }
  sched_setaffinity(0, sizeof(set), &set);  // best effort: the thread keeps its mask if refused
}

}  // namespace tessera::detail
