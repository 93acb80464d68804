#include "common/placement.h"

#include <pthread.h>
#include <sched.h>

namespace tessera::bench {

std::vector<unsigned> process_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<unsigned> cpus;
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) cpus.push_back(static_cast<unsigned>(c));
  }
  return cpus;
}

bool pin_worker_thread(unsigned worker) {
  // The process's CPUs, read once: a pinned thread's own affinity would be one CPU only.
  static const std::vector<unsigned> cpus = process_cpus();
  if (cpus.empty()) return false;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpus[worker % cpus.size()], &one);
  return pthread_setaffinity_np(pthread_self(), sizeof one, &one) == 0;
}

}  // namespace tessera::bench
