// src/sync/guarded_execution.h — runs a task under its resource's primitive.
//
// The synchronization the runtime injects (MxTasks §4.2, docs/references.md) is applied here
// and nowhere else. A task annotated with a resource runs as the resource's applied primitive
// (resource_header::applied: the selected one, or none in a runtime of one worker for an
// automatic choice) says:
//
//   primitive              writer                              reader
//   spinlock               latch held                          latch held
//   rwlatch                latch held exclusively              latch held shared
//   optimistic_latch       latch held, version odd meanwhile   optimistic: run, validate,
//                                                              retry from a snapshot
//   optimistic_scheduled   (serialized by the resource's pool) optimistic (on the pool's
//                          version odd meanwhile               owner too: see below)
//   scheduling, none       plain (the pool serializes)         plain
//
// An optimistic_scheduled reader validates wherever it runs, on the pool's owner too (where no
// writer can overlap it, so that its first run validates): a worker reading objects of several
// pools in a data-dependent order (a tree's inner nodes) takes one path whichever pool an object
// is in, not a branch mispredicted about as often as the pool changes.
//
// An optimistic read runs at most `optimistic_runs` times; each torn run is undone (its error
// and new follow-up dropped, the task restored from its snapshot, or rerun as is if its type
// validates first, see task.h), then it runs once with the writers kept out: under the latch
// as a writer, or in the resource's pool (outcome `forwarded`: the caller moves the task there).
//
//   guarded_executor g(ctx, worker_index, pools);
//   const guarded_run r = g.run(t, h);   // t annotated with the resource of header h
//   switch (r.outcome) { case run_outcome::done: ...; case run_outcome::follow_up: ...;
//                        case run_outcome::failed: report(g.take_error()); ... }
//
// Owner-only: one executor per worker, used by its thread alone (its counters are read by
// anyone, relaxed).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <utility>
#include <vector>

#include "runtime/context_access.h"
#include "runtime/pool.h"
#include "sync/latch.h"
#include "tessera/context.h"
#include "tessera/detail/resource_header.h"
#include "tessera/detail/task_access.h"
#include "tessera/task.h"
#include "util/compiler.h"
#include "util/owner_counter.h"

namespace tessera::detail {

/// How a task's run under its primitive ended.
enum class run_outcome : std::uint8_t {
  done,       ///< returned nullptr: complete it
  follow_up,  ///< returned a follow-up (`follow`: itself or another task)
  failed,     ///< threw (`error`); there is no follow-up
  forwarded,  ///< a read writers kept tearing must run in its resource's pool: the caller sends
              ///< the task there, where it runs beside no writer (optimistic_scheduled only)
};

/// Trivially copyable, so that it comes back in two registers: the exception of a `failed` run
/// waits in the executor (take_error), not in here (an exception_ptr member made every run
/// return through memory and destroy an empty pointer, ~10 instructions per task).
struct guarded_run {
  run_outcome outcome;
  task* follow = nullptr;
};

class guarded_executor {
 public:
  /// An optimistic read runs optimistically at most this many times; if none validates, it runs
  /// once more excluding the resource's writers, so that writers that keep overlapping it cannot
  /// make it retry without end.
  static constexpr unsigned optimistic_runs = 8;

  guarded_executor(context& ctx, std::uint16_t worker_index,
                   const std::vector<std::unique_ptr<pool>>& pools) noexcept
      : m_ctx(ctx), m_index(worker_index), m_pools(pools) {}
  guarded_executor(const guarded_executor&) = delete;
  guarded_executor& operator=(const guarded_executor&) = delete;

  /// Runs `t`, annotated with the resource whose header is `h`, under the resource's primitive.
  /// The caller has set the running task (context_access::current).
  TESSERA_ALWAYS_INLINE guarded_run run(task* t, resource_header& h) {
    return run(t, h, h.applied);
  }
  /// run() with the header's applied primitive already read (`applied`: h.applied, set once when
  /// the resource is made).
  TESSERA_ALWAYS_INLINE guarded_run run(task* t, resource_header& h, primitive applied);

  /// Runs `t` with no primitive (the caller synchronizes, or nothing needs to).
  TESSERA_ALWAYS_INLINE guarded_run run_plain(task* t) noexcept {
    try {
      task* f = t->execute(m_ctx);
      return {f == nullptr ? run_outcome::done : run_outcome::follow_up, f};
    } catch (...) {
      m_error = std::current_exception();
      return {run_outcome::failed, nullptr};
    }
  }
  /// The exception of the last run whose outcome was `failed` (moved out; empty afterwards).
  std::exception_ptr take_error() noexcept { return std::exchange(m_error, nullptr); }

  std::uint64_t retries() const noexcept { return m_retries.load(std::memory_order_relaxed); }
  std::uint64_t fallbacks() const noexcept { return m_fallbacks.load(std::memory_order_relaxed); }

#if defined(TESSERA_DEBUG_CHECKS)
  /// From context::validate() during an optimistic read: if the running task's type validates
  /// first, notes whether it changed since its snapshot was taken.
  void note_validate(const task* t) noexcept;
#endif

 private:
  /// One optimistic run of a read.
  enum class attempt : std::uint8_t {
    final,  ///< validated (or, with debug checks, broke its promise): `r` is the result
    torn,   ///< a writer overlapped: undone, `t` is as it was dequeued
  };

  guarded_run read_optimistically(task* t, resource_header& h);
  /// The retries of a read whose inline first run was torn or found a writer inside, then the
  /// run that keeps the writers out.
  guarded_run reread(task* t, resource_header& h, bool validates_first);
  /// After optimistic_runs torn runs: under optimistic_latch, the latch held as a writer holds
  /// it (the version left alone); under optimistic_scheduled, a plain run if this worker owns
  /// the resource's pool, else `forwarded`.
  guarded_run read_pessimistically(task* t, resource_header& h);
  attempt try_read(task* t, resource_header& h, std::uint64_t v, bool validates_first,
                   guarded_run& r);
  /// After a torn run: drops its error and its new follow-up, restores `t`.
  void undo_torn_run(task* t, const guarded_run& r, bool validates_first) noexcept;
  /// This worker owns the pool of `h` (where its scheduled writers run).
  bool owns_pool_of(const resource_header& h) const noexcept {
    // acquire: the pool may have just been handed to us (not adopted yet); the giver's owner
    // store follows its last writer, whose writes we must see.
    return m_pools[h.pool.load(std::memory_order_relaxed)]->owner.load(
               std::memory_order_acquire) == m_index;
  }
  void take_snapshot(const task* t);
  void restore_snapshot(task* t) noexcept;
  /// The size of `t`'s most derived type: what an optimistic read copies and restores.
  static std::size_t copied_bytes(const task* t) noexcept {
    return hdr(t).m_bytes & ~std::size_t{task_header::validates_first_bit};
  }
#if defined(TESSERA_DEBUG_CHECKS)
  /// After a run of a task whose type validates first: true if it changed before validating
  /// (then its follow-up is freed and `r` carries a std::logic_error).
  bool broke_promise(task* t, guarded_run& r);
  bool changed_since_snapshot(const task* t) const noexcept;
  bool m_changed_early = false;
#endif

  context& m_ctx;
  std::uint16_t m_index;
  const std::vector<std::unique_ptr<pool>>& m_pools;
  std::unique_ptr<std::byte[]> m_snapshot;  // the copy of the task a read restores from
  std::exception_ptr m_error;  // what the last `failed` run threw, until take_error()
  std::atomic<std::uint64_t> m_retries{0};    // torn optimistic runs
  std::atomic<std::uint64_t> m_fallbacks{0};  // reads run with the writers kept out
};

#if defined(TESSERA_DEBUG_CHECKS)
inline constexpr bool debug_checks = true;
#else
inline constexpr bool debug_checks = false;
#endif

TESSERA_ALWAYS_INLINE guarded_run guarded_executor::run(task* t, resource_header& h,
                                                      primitive applied) {
  // No primitive (an automatic choice at one worker): one compare, not the switch's table jump.
  if (applied == primitive::none) [[likely]] return run_plain(t);
  const bool write = hdr(t).m_access == static_cast<std::uint8_t>(access::write);
  // Readers under either optimistic primitive: one path, tested by a mask before the switch, so
  // that a worker reading objects of both (an automatic choice: a hot read-mostly object
  // optimistic_scheduled, the others optimistic_latch) does not branch on which one it got.
  constexpr unsigned optimistic_readers =
      (1u << static_cast<unsigned>(primitive::optimistic_latch)) |
      (1u << static_cast<unsigned>(primitive::optimistic_scheduled));
  if (!write && ((1u << static_cast<unsigned>(applied)) & optimistic_readers) != 0) {
    return read_optimistically(t, h);
  }
  switch (applied) {
    case primitive::spinlock: {
      spin_lock(h);
      guarded_run r = run_plain(t);
      spin_unlock(h);
      return r;
    }
    case primitive::rwlatch: {
      if (write) {
        write_lock(h);
        guarded_run r = run_plain(t);
        write_unlock(h);
        return r;
      }
      read_lock(h);
      guarded_run r = run_plain(t);
      read_unlock(h);
      return r;
    }
    case primitive::optimistic_latch: {  // a writer (readers took the path above)
      write_lock(h);
      const std::uint64_t v = begin_write(h);
      guarded_run r = run_plain(t);
      end_write(h, v);
      write_unlock(h);
      return r;
    }
    case primitive::optimistic_scheduled: {  // a writer (readers took the path above)
      // Serialized by the pool: no latch, only the version for concurrent readers.
      const std::uint64_t v = begin_write(h);
      guarded_run r = run_plain(t);
      end_write(h, v);
      return r;
    }
    case primitive::scheduling:
    case primitive::none:
    case primitive::automatic:
    default: return run_plain(t);
  }
}

// The first run inline: no writer inside, and a read that validates at once, is the common case
// (a node of a tree). A type that validates first changes nothing before a successful
// validate(): a torn read reruns it as it is, and no snapshot is needed (with debug checks one
// is taken anyway, to check that).
TESSERA_ALWAYS_INLINE guarded_run guarded_executor::read_optimistically(task* t,
                                                                       resource_header& h) {
  const bool first = (hdr(t).m_bytes & task_header::validates_first_bit) != 0;
  if (!first || debug_checks) take_snapshot(t);
  // acquire: as begin_read, which the retries wait in.
  const std::uint64_t v = h.version.load(std::memory_order_acquire);
  guarded_run r{run_outcome::done};
  if ((v & 1) == 0 && try_read(t, h, v, first, r) == attempt::final) return r;
  return reread(t, h, first);
}

TESSERA_ALWAYS_INLINE guarded_executor::attempt guarded_executor::try_read(
    task* t, resource_header& h, std::uint64_t v, bool validates_first, guarded_run& r) {
  context_access::begin_optimistic(m_ctx, &h, v);
#if defined(TESSERA_DEBUG_CHECKS)
  m_changed_early = false;
#endif
  r = run_plain(t);
  context_access::end_optimistic(m_ctx);
#if defined(TESSERA_DEBUG_CHECKS)
  if (validates_first && r.outcome != run_outcome::failed && broke_promise(t, r)) {
    return attempt::final;  // an error
  }
#endif
  if (context_access::validated(m_ctx) || validate_read(h, v)) return attempt::final;
  undo_torn_run(t, r, validates_first);
  return attempt::torn;
}

}  // namespace tessera::detail
