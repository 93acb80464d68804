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
/// (false if refused). Remembers the CPU per thread and makes no system call when asked for the
/// same one again: a thread that changes its own mask otherwise must call forget_worker_pin().
bool pin_worker_thread(unsigned worker);

/// The calling thread's mask changed outside pin_worker_thread (e.g. restored to the process's
/// CPUs): its next pin_worker_thread pins again.
void forget_worker_pin() noexcept;

/// The calling thread's CPU mask, saved when made and given back to it when destroyed. For the
/// thread that runs a competitor's share of the work (oneTBB's arena slot 0, OpenMP's thread 0),
/// pinned to worker 0's CPU while it does: afterwards it waits for tessera's runs on the CPUs it
/// had, as it did before the competitor ran.
class saved_cpu_mask {
 public:
  saved_cpu_mask() noexcept
      : m_saved(pthread_getaffinity_np(pthread_self(), sizeof m_mask, &m_mask) == 0) {}
  ~saved_cpu_mask() {
    if (!m_saved) return;
    pthread_setaffinity_np(pthread_self(), sizeof m_mask, &m_mask);
    forget_worker_pin();  // pinned again by its next pin_worker_thread
  }
  saved_cpu_mask(const saved_cpu_mask&) = delete;
  saved_cpu_mask& operator=(const saved_cpu_mask&) = delete;

 private:
  cpu_set_t m_mask{};
  bool m_saved;
};

}  // namespace tessera::bench
