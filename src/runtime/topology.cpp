#include "runtime/topology.h"

#include <hwloc.h>
#include <sched.h>

#include <cerrno>
#include <cstring>
#include <mutex>

#if defined(TESSERA_HAVE_NUMA)
#include <numa.h>
#endif

namespace tessera::detail {

struct topology::impl {
  hwloc_topology_t topo = nullptr;
  std::mutex mutex;  // hwloc calls on one topology object are serialized to be safe
};

topology& topology::get() {
  // Loaded once: hwloc_topology_load costs milliseconds, and runtimes start and stop often.
  static topology* t = new topology();
  return *t;
}

topology::topology() : m_impl(new impl) {
  if (hwloc_topology_init(&m_impl->topo) == 0 && hwloc_topology_load(m_impl->topo) != 0) {
    hwloc_topology_destroy(m_impl->topo);
    m_impl->topo = nullptr;
  }
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (unsigned c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &set)) m_allowed.push_back(c);
    }
  }
  if (m_allowed.empty()) m_allowed.push_back(0);
  unsigned max_cpu = m_allowed.back();
  m_node_of_cpu.assign(max_cpu + 1, 0);
#if defined(TESSERA_HAVE_NUMA)
  if (numa_available() >= 0) {
    for (unsigned c : m_allowed) {
      int n = numa_node_of_cpu(static_cast<int>(c));
      m_node_of_cpu[c] = n < 0 ? 0 : static_cast<unsigned>(n);
    }
  }
#endif
}

unsigned topology::node_of_cpu(unsigned cpu) const noexcept {
  return cpu < m_node_of_cpu.size() ? m_node_of_cpu[cpu] : 0;
}

bool topology::pin_this_thread(unsigned cpu, std::string& why) const {
  if (m_impl->topo == nullptr) {
    why = "hwloc could not load the topology";
    return false;
  }
  hwloc_bitmap_t set = hwloc_bitmap_alloc();
  hwloc_bitmap_only(set, cpu);
  int rc;
  {
    std::lock_guard lock(m_impl->mutex);
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

}  // namespace tessera::detail
