// bench/common/onetbb_placement.h — for every thread that enters a oneTBB arena: records its slot
// in this_worker (worker_counters.h), and with pinning on puts it on the CPU of tessera's worker
// with that index (placement.h).
//
//   tbb::task_arena arena(workers);
//   const onetbb_placement place(arena, cfg.tessera.pin);  // observes until destroyed
//   ... inside the arena: counts.add(this_worker);
//
// onetbb_arena is how every oneTBB competitor runs: at most `workers` threads in the process
// (global_control), an arena of that many slots (the caller of execute takes one), placed so.
//
//   onetbb_arena arena(cfg.workers, cfg.tessera.pin);
//   arena.execute([&] { ... });
#pragma once

#include <optional>
#include <utility>

#include <tbb/global_control.h>
#include <tbb/task_arena.h>
#include <tbb/task_scheduler_observer.h>

#include "common/placement.h"
#include "common/worker_counters.h"

namespace tessera::bench {

class onetbb_placement final : public tbb::task_scheduler_observer {
 public:
  onetbb_placement(tbb::task_arena& arena, bool pin)
      : tbb::task_scheduler_observer(arena), m_pin(pin) {
    observe(true);
  }
  ~onetbb_placement() override { observe(false); }

  void on_scheduler_entry(bool is_worker) override {
    const int slot = tbb::this_task_arena::current_thread_index();
    if (slot < 0) return;
    this_worker = static_cast<unsigned>(slot);
    if (!m_pin) return;
    // The thread that calls arena.execute (main) takes slot 0 while inside; it gets its own CPUs
    // back when it leaves (m_caller), so that it does not stay on worker 0's CPU for the rest of
    // the process, also while tessera's runs wait on it. The restore also resets
    // pin_worker_thread's remembered CPU: otherwise the caller's next entry would skip the pin
    // and slot 0 would run unpinned in every execute after the first.
    if (!is_worker) m_caller.emplace();
    pin_worker_thread(this_worker);
  }

  void on_scheduler_exit(bool is_worker) override {
    if (!is_worker) m_caller.reset();
  }

 private:
  bool m_pin;
  // The caller's mask, saved on entry: one thread (the caller of execute) enters as a non-worker.
  std::optional<saved_cpu_mask> m_caller;
};

class onetbb_arena {
 public:
  onetbb_arena(unsigned workers, bool pin)
      : m_limit(tbb::global_control::max_allowed_parallelism, workers),
        m_arena(static_cast<int>(workers)),
        m_place(m_arena, pin) {}
  onetbb_arena(const onetbb_arena&) = delete;
  onetbb_arena& operator=(const onetbb_arena&) = delete;

  template <class F>
  decltype(auto) execute(F&& f) {
    return m_arena.execute(std::forward<F>(f));
  }

 private:
  tbb::global_control m_limit;
  tbb::task_arena m_arena;
  onetbb_placement m_place;  // observes m_arena: declared after it, destroyed before it
};

}  // namespace tessera::bench
