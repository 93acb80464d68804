// bench/common/openmp_runtime.h — what the OpenMP runtime linked in does with a new task, asked at
// run time: GCC's libgomp and LLVM's libomp differ, and a benchmark built with either compiler
// must measure what it can and say what it cannot, never overflow its stack.
//
//   if (openmp_runs_tasks_at_once()) ...   // a chain of tasks in a team of one thread recurses
#pragma once

#include <omp.h>

#include <atomic>

namespace tessera::bench {

/// True if a task created in a team of one thread runs at once, inside the construct that creates
/// it. LLVM's libomp does so (the region is serialized), libgomp queues it: under libomp a chain
/// of tasks, each creating the next, is a recursion as deep as the chain is long. Asked in a team
/// of one thread only: in a larger one another thread may take the task before its creator looks.
/// The answer is computed once.
inline bool openmp_runs_tasks_at_once() {
  static const bool at_once = [] {
    std::atomic<bool> ran{false};
    bool seen = false;
#pragma omp parallel num_threads(1) shared(ran, seen)
    {
#pragma omp task shared(ran)
      ran.store(true, std::memory_order_relaxed);
      seen = ran.load(std::memory_order_relaxed);
#pragma omp taskwait
    }
    return seen;
  }();
  return at_once;
}

}  // namespace tessera::bench
