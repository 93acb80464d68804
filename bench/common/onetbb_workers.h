// bench/common/onetbb_workers.h — joins oneTBB's worker threads before the process exits.
//
//   int main() {
//     const onetbb_workers_joined join;  // first thing, before any arena
//     ... run benchmarks; every arena and observer is gone by the end of the scope ...
//   }
//
// Why: oneTBB keeps its workers alive after the last arena dies, and a worker that was notified
// by a task_scheduler_observer (onetbb_placement.h) holds a reference to the observer's proxy
// until it leaves the arena. observe(false) then leaves the proxy to that worker
// (src/tbb/observer_proxy.cpp, 2021.8). When the process exits first, which a loaded machine
// makes likely, LeakSanitizer reports the proxy as leaked. tbb::finalize waits for every worker
// to leave and end, and so releases it.
#pragma once

#include <cstdio>
#include <new>

#include <tbb/global_control.h>

namespace tessera::bench {

class onetbb_workers_joined {
 public:
  onetbb_workers_joined() : m_handle(tbb::attach{}) {}
  ~onetbb_workers_joined() {
    // Fails only while an arena or an external thread still uses oneTBB; the workers then end
    // with the process, as they would without this guard.
    if (!tbb::finalize(m_handle, std::nothrow))
      std::fprintf(stderr,
                   "tessera-bench: note: oneTBB's worker threads were still in use at exit\n");
  }
  onetbb_workers_joined(const onetbb_workers_joined&) = delete;
  onetbb_workers_joined& operator=(const onetbb_workers_joined&) = delete;

 private:
  tbb::task_scheduler_handle m_handle;
};

}  // namespace tessera::bench
