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
#include <cstddef>
#include <cstdint>

namespace tessera::detail {

class worker;

namespace test_hooks {

/// Called by worker::maybe_reclaim after it made a reclamation task and before the task is
/// counted as spawned (which is when stop() can first see it). Acquire/release: the test's
/// state set before the store is visible to the hook.
inline std::atomic<void (*)(worker&)> reclaim_task_made{nullptr};

/// Called by worker::request_steal on the thief's thread once its request is posted to
/// `victim` (before the victim is notified).
inline std::atomic<void (*)(worker& victim, unsigned thief)> steal_requested{nullptr};

/// Called by worker::answer_steal_request on the victim's thread when the answer will be tasks
/// of its home pool (neither pool rule applied), after it checked that the thief is active and
/// before it moves anything.
inline std::atomic<void (*)(worker& victim, unsigned thief)> steal_answering{nullptr};

/// Called by worker::idle on the worker's thread after it flushed its group batch and published
/// its epoch counts, before its quick poll for a task handed over by another worker.
inline std::atomic<void (*)(worker&)> idle_polling{nullptr};

/// Called by worker::idle on the worker's thread once it chose how long to spin before it parks
/// (`spin_ns`: 0 after a sleep that ended by the safety timeout with nothing found since), after
/// the quick poll, the epoch advance and the reclamation check, before the first round.
inline std::atomic<void (*)(worker&, std::uint64_t spin_ns)> idle_spinning{nullptr};

/// Called by worker::park on the worker's thread when it starts, before anything of parking
/// (the worker is neither marked asleep nor counted as parked yet).
inline std::atomic<void (*)(worker&)> parking{nullptr};

/// Called by worker::choose_step_mode, on the worker's thread, for each periodic() interval it
/// takes as a sample: returns the interval's length in clock ticks in place of the clock's, given
/// the worker's index, the prefetch distance and the step mode (worker::step_mode) it ran at. A
/// test so decides which distance or mode is faster and watches the sampler's choices.
inline std::atomic<std::uint64_t (*)(unsigned worker, unsigned distance, unsigned mode)>
    interval_ticks{nullptr};

/// While true, worker::periodic() acts as if it had woken a parked peer less than
/// peer_wake_interval_ns ago (its once-per-millisecond limit in force), whatever the clock says.
inline std::atomic<bool> peer_wake_limited{false};

/// Called by worker::start on the thread that constructs the runtime, before the worker's
/// thread is created; a hook that throws stands for a thread the OS could not create.
inline std::atomic<void (*)(unsigned index)> worker_starting{nullptr};

/// Called by runtime::wait(g) on the waiting thread after its first check that g is current,
/// before it takes the group's mutex.
inline std::atomic<void (*)()> group_wait_checked{nullptr};

/// Called by epoch_clock::count_in_current_slot on the thread that starts an operation (a spawn
/// from outside, a spawn on a worker outside any task, a reclamation task) after it read the
/// global epoch `e` and before it counts the task in e's slot.
inline std::atomic<void (*)(std::uint64_t e)> epoch_read_for_count{nullptr};

/// Called by scheduler::try_advance_epoch on the advancing thread once it found balanced the
/// slot that the move from `e` to e + 1 reuses, before its compare-and-swap of the epoch.
inline std::atomic<void (*)(std::uint64_t e)> epoch_advance_checked{nullptr};

/// Called by worker::retire, on the retiring worker, for the resource whose object is at `object`
/// once it is in the worker's retired list, stamped with `epoch` (it may be freed when the global
/// epoch reaches epoch + epoch_slots). A resource retired by a thread that is not a worker is
/// stamped when a worker adopts it. Use the address as an identity only.
inline std::atomic<void (*)(const void* object, std::uint64_t epoch)> resource_retired{nullptr};

/// Called by free_resource (memory/resource_memory.h), on the freeing thread, for the resource whose object is at
/// `object`, after its destructor ran and its mark was cleared (every check takes it for freed
/// from then on), just before its memory is deleted: use the address as an identity only.
inline std::atomic<void (*)(const void* object)> resource_freed{nullptr};

/// Called by detail::allocate_task_memory, make_task's out-of-line path (every task under
/// task_allocator::system; a refill of the pool allocator's cache), on the allocating thread
/// before it allocates `bytes`. A hook that throws std::bad_alloc stands for memory exhausted.
inline std::atomic<void (*)(std::size_t bytes)> task_allocating{nullptr};

/// How long park() sleeps at most, in ns; 0: the built-in safety net (50 ms). A test that must
/// not pass by the timeout's rescue (a missed wake-up) sets it to hours.
inline std::atomic<std::uint64_t> park_timeout_ns{0};

/// How long wait_idle() sleeps at most between its checks, in ns; 0: the built-in safety net
/// (50 ms). A test that must not pass by the timeout's rescue (a missed notification) sets it
/// to hours.
inline std::atomic<std::uint64_t> idle_wait_timeout_ns{0};

}  // namespace test_hooks
}  // namespace tessera::detail
#endif
