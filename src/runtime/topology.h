// src/runtime/topology.h — the machine as hwloc and libnuma see it, loaded once per process.
//
//   auto& topo = topology::get();
//   std::vector<unsigned> cpus = topo.worker_order();  // where workers 0, 1, 2, ... go
//   bool ok = topo.pin_this_thread(cpus[0], why);
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "util/compiler.h"

namespace tessera::detail {

/// Where a CPU sits: its NUMA node, its core, and its rank among the allowed hardware threads
/// of that core (0 for the first, 1 for its SMT sibling, ...).
struct cpu_place {
  unsigned cpu;   ///< OS index
  unsigned node;  ///< NUMA node (OS index), 0 when unknown
  unsigned core;  ///< the core's position in the machine (hwloc's logical index)
  unsigned rank;  ///< hardware thread of that core, counted over allowed CPUs only
};

/// The order in which a runtime's workers take CPUs: NUMA node by node (ascending), and within a
/// node one hardware thread of every core before a second one of any core, the order in which
/// [MxTasks]' evaluation (§6) numbers its logical cores: the physical cores of a NUMA region
/// first, then their hyperthreads. Two workers thus share a core only once every core of their
/// node has one. Pure: tested on made-up machines.
std::vector<unsigned> worker_order(std::vector<cpu_place> places);

class topology {
 public:
  static topology& get();
  /// A topology of hwloc's synthetic description (e.g. "node:2 core:4 pu:2"), for tests: the
  /// process may run on `allowed` (OS indices of its PUs; empty: all of them). Throws
  /// std::invalid_argument if hwloc rejects the description.
  static topology synthetic(const char* description, std::vector<unsigned> allowed = {});

  topology(topology&& other) noexcept;
  topology& operator=(topology&&) = delete;
  ~topology();

  /// CPUs (OS indices) this process may run on, ascending: the main thread's affinity mask when
  /// the topology was loaded (once per process).
  const std::vector<unsigned>& allowed_cpus() const noexcept { return m_allowed; }
  /// The allowed CPUs in the order workers take them (see worker_order()); node by node and
  /// ascending within a node when hwloc could not load the topology.
  const std::vector<unsigned>& worker_order() const noexcept { return m_order; }
  /// NUMA node of an OS CPU (0 when unknown).
  unsigned node_of_cpu(unsigned cpu) const noexcept;
  /// Bytes of the largest data (or unified) cache above the first CPU of worker_order(): the
  /// last-level cache that a runtime's first workers share. 0 when hwloc does not tell.
  std::size_t last_level_cache_bytes() const noexcept { return m_llc_bytes; }
  /// Binds the calling thread to `cpu`; false (and the reason in `why`) if `cpu` is not allowed
  /// or the OS refuses.
  /// Out of line, as unpin_this_thread: inlined into the worker's loop under LTO, their start-up
  /// code (a 64-byte aligned CPU set on the stack) gave the loop a frame pointer and one register
  /// less, and the tree of empty tasks 1 ns more per task.
  TESSERA_NOINLINE bool pin_this_thread(unsigned cpu, std::string& why) const;
  /// Lets the calling thread run on every allowed CPU (an unpinned worker would otherwise keep
  /// the mask of the thread that created it, which may be one CPU).
  TESSERA_NOINLINE void unpin_this_thread() const noexcept;

 private:
  struct impl;
  topology(const char* synthetic_description, std::vector<unsigned> allowed);
  /// m_order from hwloc's view of m_allowed (m_node_of_cpu filled first).
  void order_workers();
  /// m_llc_bytes from hwloc's caches above m_order's first CPU (m_order filled first).
  void find_last_level_cache();

  impl* m_impl;
  std::vector<unsigned> m_allowed;
  std::vector<unsigned> m_node_of_cpu;
  std::vector<unsigned> m_order;
  std::size_t m_llc_bytes = 0;
};

}  // namespace tessera::detail
