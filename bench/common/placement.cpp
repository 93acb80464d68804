#include "common/placement.h"

#include <vector>

#include "tessera/runtime.h"

namespace tessera::bench {

namespace {
// The CPU this thread was last pinned to: a oneTBB worker enters its arena again each time it
// finds work after sleeping, and the observer calls this each time; no system call then.
thread_local long pinned_to = -1;
}  // namespace

void forget_worker_pin() noexcept { pinned_to = -1; }

bool pin_worker_thread(unsigned worker) {
  // The process's CPUs, read once: a pinned thread's own affinity would be one CPU only.
  static const std::vector<unsigned> cpus = default_worker_cpus();
  if (cpus.empty()) return false;
  const unsigned cpu = cpus[worker % cpus.size()];
  if (pinned_to == static_cast<long>(cpu)) return true;
  if (!pin_this_thread_to(cpu)) return false;
  pinned_to = cpu;
  return true;
}

}  // namespace tessera::bench
