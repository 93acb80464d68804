// bench/common/placement.h — the same CPUs for every implementation of a comparison.
//
// tessera pins worker i to tessera::default_worker_cpus()[i] (wrapping): the CPUs the process may
// run on, node by node, one hardware thread of each core before SMT siblings. With --pin (the
// default), the competitors' threads go to the same CPUs: the oneTBB thread in arena slot i
// (onetbb_placement.h), the OpenMP thread numbered i (openmp_placement.h), the pool's thread i.
// Otherwise a competitor's thread may migrate to whichever CPU the kernel finds least busy, while
// tessera's stays put: on a shared VM, where one virtual CPU can run slower than another for
// seconds, the ratio would then measure where the threads ran, not what they ran.
//
//   pin_worker_thread(2);    // the calling thread: onto tessera's CPU of worker 2
#pragma once

#include <pthread.h>
#include <sched.h>

namespace tessera::bench {

/// Pins the calling thread to `cpu`; false if refused (or `cpu` is beyond CPU_SETSIZE). Inline,
/// so that harness code without the runtime (common/handoff.cpp, its tests) can use it.
inline bool pin_this_thread_to(unsigned cpu) {
  if (cpu >= CPU_SETSIZE) return false;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  return pthread_setaffinity_np(pthread_self(), sizeof one, &one) == 0;
}

/// Pins the calling thread to tessera::default_worker_cpus()[worker % count]; best effort
/// (false if refused).
bool pin_worker_thread(unsigned worker);

}  // namespace tessera::bench
