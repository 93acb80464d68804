// src/memory/epoch.h — per-epoch task counters: quiescence, statistics and reclamation in one.
//
// Every task carries the epoch slot (epoch mod `epoch_slots`) of the operation it belongs to:
// tasks spawned from outside take the current global epoch, tasks spawned by a task and
// follow-ups inherit their parent's slot. Each worker counts the tasks it spawned per slot
// (published at once, before the task becomes visible) and the tasks it completed per slot
// (published every `epoch_interval_tasks` tasks and whenever it is idle, [MxTasks] §4.4).
//
// A task's first spawn of a child into its own group (same group, same slot) is counted neither
// as a spawn nor, later, as the task's completion: the child carries its parent's count (see
// worker::take_token). In a chain or a recursion that halves the counting, and the sums stay
// balanced exactly as before: one count per task in flight, counted in once and out once.
//
// Reading all `completed` counters (acquire) and then all `spawned` counters gives, when the
// sums are equal, a moment at which no task of that slot was queued or running (completions only
// follow their spawn). That answers three questions:
// - quiescence (wait_idle/stop): all slots balanced;
// - may the global epoch advance from E to E+1: slot (E+1) mod K balanced, i.e. no task of the
//   operation epoch E+1-K is left;
// - may a resource retired at epoch r be freed: the global epoch reached r+K, so every task that
//   could still hold a pointer to it (its operation started at or before r) has finished.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

namespace tessera::detail {

inline constexpr unsigned epoch_slots = 4;

struct alignas(64) epoch_counters {
  std::array<std::atomic<std::uint64_t>, epoch_slots> spawned{};
  alignas(64) std::array<std::atomic<std::uint64_t>, epoch_slots> completed{};
  // Owner-only: completions not yet published.
  std::array<std::uint64_t, epoch_slots> completed_local{};
  // Owner-only: tasks that handed their count to their first child (worker::take_token): each is
  // one execution and one spawn that neither `spawned` nor `completed` counts. For statistics and
  // completions() only; published as `transferred` (publish_transfers) before the completions
  // and before tasks leave the worker (worker::before_tasks_leave), see publish_transfers.
  std::uint64_t transferred_local = 0;
  std::atomic<std::uint64_t> transferred{0};

  /// Owner-only: adds `n` (modulo 2^64: a negative change wraps) to the spawn count of `slot`.
  /// A load and a store, not an atomic read-modify-write: only the owner writes the count.
  template <std::memory_order Order>
  void add_spawns(unsigned slot, std::uint64_t n) noexcept {
    spawned[slot].store(spawned[slot].load(std::memory_order_relaxed) + n, Order);
  }
  /// Owner-only. Relaxed: the task becomes visible through a release in the queue, after this.
  void count_spawn(unsigned slot) noexcept { count_spawns(slot, 1); }
  /// count_spawn for `n` tasks at once (context::spawn of a span).
  void count_spawns(unsigned slot, std::uint64_t n) noexcept {
    add_spawns<std::memory_order_relaxed>(slot, n);
  }
  /// Owner-only, seq_cst: adds `d` (+1 or -1) to a spawn count, for a task that starts an
  /// operation (epoch_clock::count_in_current_slot). The reclamation task's count is also one
  /// side of a Dekker pair with `stopping` (worker::maybe_reclaim, scheduler::stop() and
  /// scheduler::quiescent()), without a fence.
  void add_spawn_seq_cst(unsigned slot, int d) noexcept {
    add_spawns<std::memory_order_seq_cst>(slot,
                                          static_cast<std::uint64_t>(static_cast<std::int64_t>(d)));
  }
  void count_completion(unsigned slot) noexcept { ++completed_local[slot]; }
  void count_transfer() noexcept { ++transferred_local; }
  /// Undoes count_transfer() of the running task (worker::reacquire_token).
  void uncount_transfer() noexcept { --transferred_local; }
  /// Owner-only: tasks completed so far, published or not (a monotone count between tasks).
  std::uint64_t completions() const noexcept {
    std::uint64_t n = transferred_local;
    for (const std::uint64_t c : completed_local) n += c;
    return n;
  }
  /// Relaxed: a reader that acquired the balanced counts (wait_idle) sees this store, because a
  /// release follows it on every path to that balance. A transferred count ends with the
  /// completion of a child, published with release either by this worker's publish(), which
  /// stores this first (published after the completions, a CI run read 1951 of 2000 executions
  /// after wait_idle), or, when the child left in a hand-over (a pool, a steal answer), by the
  /// worker that took it: worker::before_tasks_leave stores this before the hand-over's release
  /// (the giver may complete nothing more before the runtime is idle).
  void publish_transfers() noexcept {
    transferred.store(transferred_local, std::memory_order_relaxed);
  }
  void publish() noexcept {
    publish_transfers();
    for (unsigned s = 0; s < epoch_slots; ++s) {
      // release: a reader that sees the count also sees the spawns these tasks made.
      completed[s].store(completed_local[s], std::memory_order_release);
    }
  }
};

}  // namespace tessera::detail
