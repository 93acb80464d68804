// src/runtime/topology.h — the machine as hwloc and libnuma see it, loaded once per process.
//
//   auto& topo = topology::get();
//   std::vector<unsigned> cpus = topo.allowed_cpus();
//   bool ok = topo.pin_this_thread(cpus[0]);
#pragma once

#include <string>
#include <vector>

namespace tessera::detail {

class topology {
 public:
  static topology& get();

  /// CPUs (OS indices) this process may run on, ascending.
  const std::vector<unsigned>& allowed_cpus() const noexcept { return m_allowed; }
  /// NUMA node of an OS CPU (0 when unknown).
  unsigned node_of_cpu(unsigned cpu) const noexcept;
  /// Binds the calling thread to `cpu`; false (and errno-based reason in `why`) if refused.
  bool pin_this_thread(unsigned cpu, std::string& why) const;

 private:
  topology();
  struct impl;
  impl* m_impl;
  std::vector<unsigned> m_allowed;
  std::vector<unsigned> m_node_of_cpu;
};

}  // namespace tessera::detail
