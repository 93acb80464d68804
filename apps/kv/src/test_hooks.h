// apps/kv/src/test_hooks.h — seams that let a test hold a kv::task_tree task at one point of its
// traversal and so force an interleaving of the tree's tasks that a stress test would only hit
// by chance (the runtime's own seams are in src/runtime/test_hooks.h). Built only with
// TESSERA_DEBUG_CHECKS (the dev, asan and tsan presets); release builds have no hooks and pay
// nothing.
//
//   kv::test_hooks::op_visiting.store(+[](const kv::node* n) { ... });
//   ...                                  // the hook runs on the worker thread, may block it
//   kv::test_hooks::op_visiting.store(nullptr);
#pragma once

#if defined(TESSERA_DEBUG_CHECKS)
#include <atomic>

#include "kv/node.h"

namespace kv::test_hooks {

/// Called by an operation's task on its worker at the start of each execution, before it reads
/// the node `n` it is annotated with. Acquire/release: the test's state set before the store is
/// visible to the hook.
inline std::atomic<void (*)(const node* n)> op_visiting{nullptr};

/// Called by the task that unlinks an empty leaf on its worker at the start of each execution
/// of its merge phase (the leaf is dead, its left neighbour does not cover its range yet), before
/// it reads its node; `leaf` is the leaf it unlinks.
inline std::atomic<void (*)(const node* leaf)> unlink_merging{nullptr};

}  // namespace kv::test_hooks
#endif
