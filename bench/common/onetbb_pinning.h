// bench/common/onetbb_pinning.h — pins every thread that enters a oneTBB arena to the CPU of its
// slot (placement.h): slot i on the CPU of tessera's worker i.
//
//   tbb::task_arena arena(workers);
//   onetbb_pinning pin(arena, cfg.tessera.pin);  // observes until destroyed
#pragma once

#include <tbb/task_arena.h>
#include <tbb/task_scheduler_observer.h>

#include "common/placement.h"

namespace tessera::bench {

class onetbb_pinning final : public tbb::task_scheduler_observer {
 public:
  /// Does nothing unless `enabled`.
  onetbb_pinning(tbb::task_arena& arena, bool enabled) : tbb::task_scheduler_observer(arena) {
    if (enabled) observe(true);
  }
  ~onetbb_pinning() override { observe(false); }

  void on_scheduler_entry(bool /*is_worker*/) override {
    const int slot = tbb::this_task_arena::current_thread_index();
    if (slot >= 0) pin_worker_thread(static_cast<unsigned>(slot));
  }
};

}  // namespace tessera::bench
