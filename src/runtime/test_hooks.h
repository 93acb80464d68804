// src/runtime/test_hooks.h — seams that let a test hold a worker at one point of the runtime and
// so force an interleaving that a stress test would only hit by chance. Built only with
// TESSERA_DEBUG_CHECKS (the dev, asan and tsan presets); release builds have no hooks and pay
// nothing.
//
//   detail::test_hooks::reclaim_task_made.store(+[](detail::worker& w) { ... });
//   ...                                  // the hook runs on the worker thread, may block it
//   detail::test_hooks::reclaim_task_made.store(nullptr);
#pragma once

#if defined(TESSERA_DEBUG_CHECKS)
#include <atomic>

namespace tessera::detail {

class worker;

namespace test_hooks {

/// Called by worker::maybe_reclaim after it made a reclamation task and before the task is
/// counted as spawned (which is when stop() can first see it). Acquire/release: the test's
/// state set before the store is visible to the hook.
inline std::atomic<void (*)(worker&)> reclaim_task_made{nullptr};

}  // namespace test_hooks
}  // namespace tessera::detail
#endif
