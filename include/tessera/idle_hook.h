// tessera/idle_hook.h — letting an idle worker wait on the application's events instead of the
// runtime's own sleep (an event loop on the workers: sockets, timers, pipes).
//
// A worker without a task spins a while, then parks: it sleeps until a spawn into its pools, a
// steal request or the runtime's stop wakes it (or a 50 ms safety timeout). An application
// whose work starts from outside events (a server's sockets) would need a thread of its own to
// wait for those and hand each one over to a worker by a spawn: a wake-up of that thread, a
// spawn from outside, a wake-up of the worker. With an idle hook the worker waits for both
// itself:
//
//   runtime_options o;
//   o.idle.wait = [&](tessera::worker_id w, std::chrono::nanoseconds timeout) {
//     if (timeout.count() == 0) { poll_events(0); return tessera::idle_wait::waited; }
//     if (poller_busy.exchange(true)) return tessera::idle_wait::declined;  // another waits
//     // Woken already, its wake_fd write maybe read by another worker's wait: do not block.
//     poll_events(tessera::idle_woken() ? 0ns : timeout);  // epoll_wait: sockets, wake_fd
//     poller_busy.store(false);
//     return tessera::idle_wait::waited;
//   };
//   o.idle.wake = [&](tessera::worker_id) { eventfd_write(wake_fd, 1); };
//
// The contract:
// - wait(w, timeout) is called by worker w's own thread, outside any task, in two ways:
//   with timeout 0 (a poll, while the worker spins before parking: it must not block), and with
//   timeout > 0 instead of the worker's park (it may block up to `timeout`; returning earlier,
//   also for no reason, is allowed). It may spawn (runtime::spawn): each task spawned there
//   begins an operation of its own for the epoch mechanism, as a spawn from outside the runtime
//   does, and goes to worker w's pools (unless annotated otherwise), so the worker runs it when
//   wait returns. It must not wait for a group or call stop().
// - A blocking wait that returns idle_wait::declined did not wait: the worker parks as it does
//   without a hook. idle_wait::waited: the worker looks for work again (and calls wait again if
//   it finds none).
// - wake(w) is called, from any thread, when something woke worker w while it was inside a
//   blocking wait (a spawn into its pools, a steal request, set_active_workers, stop()). It must
//   make that wait return soon, and it must be sticky: a wake(w) that comes before w's wait got
//   to block (the runtime marks the worker asleep, seq_cst, before it checks its queues a last
//   time and calls wait; a spawner pushes its task, then reads the mark, seq_cst) must make that
//   wait return at once (an eventfd or a pipe in the set the wait blocks on has that property).
//   A wake may come late, after the wait returned for another reason: the next wait may then
//   return at once for nothing, which is allowed. wake is never called for a poll.
// - Sticky for w, not for whichever worker waits next: when the workers share one wake fd, a
//   wake(w) written before w blocked may be read by another worker's wait (the holder of the
//   role above), and w would then block with a task in its pools until its timeout. So a wait
//   that shares its fd asks idle_woken() after it took the role and before it blocks, and does
//   not block if it says true: the runtime marks w awake (seq_cst) before it calls wake(w), so
//   a wake not seen there writes the fd after that point, where only the role's holder, w, reads
//   it. An fd per worker needs no such question.
// - Only active workers call wait; a worker made inactive (set_active_workers) parks as without
//   a hook. Both functions are called until stop() has joined the workers: what they use must
//   outlive that.
// - An empty `wait` (the default) is no hook. `wake` must be set when `wait` is.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>

#include "tessera/ids.h"

namespace tessera {

/// What an idle hook's wait did.
enum class idle_wait : std::uint8_t {
  waited,    ///< returned after events, a wake(), its timeout, or for no reason
  declined,  ///< did not wait (a blocking call only): the worker parks as without a hook
};

/// From a blocking wait of the idle hook, on the worker's thread: true if a wake for this
/// worker came since the runtime called wait (its wake() has been or is being called), so the
/// wait must not block (see "Sticky for w" above). Also true outside a worker's thread.
[[nodiscard]] bool idle_woken() noexcept;

struct idle_hook {
  /// See above; empty: no hook.
  std::function<idle_wait(worker_id, std::chrono::nanoseconds timeout)> wait{};
  /// Ends worker w's blocking wait (sticky); required when `wait` is set.
  std::function<void(worker_id)> wake{};
};

}  // namespace tessera
