// tessera/detail/claimed_loop.h — how loops with a body that takes no context run: the range is
// cut into pieces that participants claim from shares, as oneTBB's and OpenMP's threads do.
// Internal. Two forms:
// - blocking (parallel_for(runtime&, ...), parallel_reduce(runtime&, ...), from a thread that is
//   not a worker): the calling thread is participant 0 and runs pieces itself, beside helper
//   tasks on other workers, then waits for the pieces others still run;
// - from a task (parallel_for(context&, g, ...), parallel_reduce(context&, ...)): every
//   participant is a helper task, 0 on the calling worker, and the call returns at once; the loop
//   holds its group open until its last piece finished.
//
// The range is cut into `pieces` pieces of at most `grain` indices, sizes differing by at most
// one. Each participant (number 0, and helpers 1..k) has a share: the unclaimed pieces
// [next, end) of one packed word. Participant 0's share starts with every piece and the others'
// empty. A participant takes pieces from the front of its own share, one compare-exchange per
// claim; when its share is empty (a helper at its start, anyone at the end) it takes the back
// half of the fullest share, then goes on from its front.
//
// A claim takes a batch of adjacent pieces (claim_batch): one at first, twice as many after a
// batch that ran in less than claim_batch::short_ticks (about 1.5 µs), half as many after one
// that took over four times that, at most claim_batch::max_pieces. Each piece of a batch is
// still run on its own, with its own bounds (the body sees the pieces the grain asked for), in
// index order, and is tested for a stop, a cancellation and a failure just before it starts,
// as a piece claimed alone is; only the claim (the compare-exchange and its loop) is shared by
// the batch. So short pieces (a join's morsel of 128 rows, ~250 ns) cost a claim per ~1.5 µs of
// work instead of one each, and the locked instruction, which waits for the loads of the piece
// before it, no longer separates two pieces of a batch; long pieces are claimed one at a time,
// and a thief finds every piece not claimed. Where the cost of adjacent pieces jumps from short
// to long (a join's heavy key range), the batch is cut short. The clock is read after every
// claim_batch::clock_every (4) pieces of a batch: once a batch has run over
// claim_batch::cut_ticks (4 x short_ticks), its pieces not started go back to the front of the
// own share (give_back), where thieves find them, and the next claim takes at most half of the
// pieces that ran. So a batch sized on short pieces keeps from thieves at most ~4 x short_ticks
// of work and the clock_every pieces that ran before the next reading of the clock, not up to
// max_pieces long ones. A piece must not wait for another piece of the same loop (one in its
// batch would never start): no loop promises that, as no oneTBB partitioner does.
//
// So a loop too small for a helper's start-up runs on participant 0 alone (the helper finds
// nothing and leaves), a large one is split in halves as helpers arrive, and a participant keeps
// one contiguous block, roughly the same from loop to loop (the data it writes stays in its
// core's cache). A piece is only ever held by a thread that runs it: a helper that starts late
// (its worker was busy) delays nothing, and the loop waits at most for the batches other
// threads are running.
//
// Why shares and not tasks split in halves: a blocking caller that slept on the loop's group
// until a worker woke it paid 7-20 µs per loop on the 2-core VM where oneTBB's parallel_for took
// 1-2 µs, and halves spawned from a task reached a second worker only through steal requests
// (100,000-element loops at 0.53-0.69x oneTBB at 2 workers, no faster than at 1;
// docs/architecture.md, "Loops").
//
// Lifetime: the work (the body, the reduction's slots; in the blocking form references to the
// caller's frame) is called only for claimed pieces, and destroyed by the participant that
// finishes the last piece, before the caller returns (blocking) or the loop's group can complete
// (from a task). The shared state is reference-counted (the caller and each helper task, whose
// destructor drops its reference, also when the runtime refuses the spawn), so a helper that
// runs after the loop ended touches only that.
//
// Memory ordering: claims are relaxed compare-exchanges: each piece handed out once is all they
// need. A share's word is the whole state of that share (the pieces in it, nothing else), so a
// word that went away and came back (a last piece stolen and stolen back) is the same share, and
// a compare-exchange that succeeds on it is right (no ABA problem). Giving pieces back keeps
// that so (give_back): only the owner moves a share's next, so next is still where its batch
// ended, and the pieces given back are adjacent to the share's and not started; relaxed, as a
// claim, since nothing of them was written (a thief that claims them calls the work as for any
// piece it claims).
// A participant adds the pieces it claimed to `finished` with a seq_cst (so also acq_rel)
// read-modify-write after its last use of the work; the one that brings it to the total has
// read every other's, so every piece's writes (and the first exception) happen before it
// destroys the work and, from a task, drops the group's hold (acq_rel, the group's completion);
// in the blocking form the caller's acquire load that sees every piece finished orders them
// before its return. seq_cst, with the caller's store of `sleeping`, also closes the sleep race:
// either the last finisher sees `sleeping` and wakes the caller, or the caller sees every piece
// finished before it sleeps.
#pragma once

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <new>
#include <stdexcept>
#include <stop_token>
#include <utility>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

#include "tessera/context.h"
#include "tessera/ids.h"
#include "tessera/loop_options.h"
#include "tessera/runtime.h"
#include "tessera/task.h"

namespace tessera::detail {

/// What a loop started from a task needs of the runtime (defined in the library).
struct loop_access {
  /// The group the loop's pieces count in: `g`, or with group{} the running task's (group{} if
  /// it has none); joined once, the loop's hold on it until its last piece finished. Throws
  /// std::logic_error if `g` is stale or completed.
  static group hold(context& ctx, group g);
  /// Spawns helper `t` in no group (the loop's group waits for the pieces, not for the helpers:
  /// one that starts late, after the pieces were done, finds nothing and leaves), in the running
  /// task's epoch slot, placed by its worker annotation.
  static void spawn_helper(context& ctx, task* t);
  /// After the last piece: `error` (the loop's first exception, or null) goes to `held` (to the
  /// unhandled list without one), then the hold is dropped, which may complete the group.
  static void finish(runtime& rt, group held, std::exception_ptr error) noexcept;
  /// The flag that says `held` (valid, held by a loop) was cancelled (runtime::cancel); it
  /// stays the group's while the loop holds it. Read relaxed, per piece.
  static const std::atomic<bool>* cancel_flag(runtime& rt, group held) noexcept;
};

/// At most this many pieces in a loop (a share's bounds are 32-bit): the grain grows beyond.
inline constexpr std::size_t claimed_max_pieces = 0xFFFF'FFFFu;

/// A cheap clock for sizing batches: the time-stamp counter on x86 (constant rate on the CPUs
/// tessera runs on; ~25 cycles, no system call), steady_clock's nanoseconds elsewhere.
inline std::uint64_t claim_ticks() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  return __rdtsc();
#else
  return static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
#endif
}

/// How many adjacent pieces a participant claims at once (see the top of this file). One per
/// participant, on its stack: no sharing.
class claim_batch {
 public:
  /// Below this a batch counts as short: ~1.6 µs at a 2.6 GHz time-stamp counter, 1.5 µs of
  /// steady_clock. A claim costs ~20-40 ns; with batches of at least this much work it is 1-3 %.
#if defined(__x86_64__) || defined(__i386__)
  static constexpr std::uint64_t short_ticks = 4096;
#else
  static constexpr std::uint64_t short_ticks = 1500;
#endif
  /// The most pieces one claim takes.
  static constexpr std::uint32_t max_pieces = 64;

  /// A batch that has run this long is cut: its pieces not started go back to the share.
  static constexpr std::uint64_t cut_ticks = 4 * short_ticks;
  /// Within a batch, the clock is read after every this many pieces (and after the last): a
  /// reading costs ~25-40 cycles, ~10 instructions a piece with the registers it takes.
  static constexpr std::uint32_t clock_every = 4;

  std::uint32_t pieces() const noexcept { return m_pieces; }
  /// A batch of `claimed` pieces took `ticks` (claim_ticks): the next claim's size. It grows
  /// only after a full batch (a share's last few pieces say nothing about the pieces' length).
  void ran(std::uint32_t claimed, std::uint64_t ticks) noexcept {
    if (ticks < short_ticks) {
      if (claimed == m_pieces && m_pieces < max_pieces) m_pieces *= 2;
    } else if (ticks > cut_ticks && m_pieces > 1) {
      m_pieces /= 2;
    }
  }
  /// A batch was cut after `ran` of its pieces (they took over cut_ticks): the next claim takes
  /// at most half of them, a power of two (at least one piece).
  void cut(std::uint32_t ran) noexcept { m_pieces = std::bit_floor(std::max(ran / 2, 1u)); }

 private:
  std::uint32_t m_pieces = 1;
};

/// A claimed loop's shared state, with its participants' shares after it in one allocation.
/// `Work` is called as work(first, last, participant), const.
template <class Work>
class claimed_loop {
 public:
  /// `work` is moved into the state. `rt`: nullptr for the blocking form (the caller waits);
  /// for a loop started from a task, its runtime, and `held` the group the loop holds open until
  /// its last piece finished (loop_access::hold; group{}: none).
  static claimed_loop* make(Work&& work, std::size_t first, std::size_t n, std::size_t pieces,
                            unsigned participants, std::stop_token stop, runtime* rt = nullptr,
                            group held = {}) {
    void* memory = ::operator new(sizeof(claimed_loop) + participants * sizeof(share),
                                  std::align_val_t{alignof(claimed_loop)});
    claimed_loop* loop;
    try {
      loop = ::new (memory)
          claimed_loop(std::move(work), first, n, pieces, participants, std::move(stop), rt, held);
    } catch (...) {
      ::operator delete(memory, std::align_val_t{alignof(claimed_loop)});
      throw;
    }
    share* shares = loop->shares();
    for (unsigned k = 0; k < participants; ++k) ::new (&shares[k]) share{};
    shares[0].range.store(pack(0, static_cast<std::uint32_t>(pieces)), std::memory_order_relaxed);
    return loop;
  }

  void acquire() noexcept { m_refs.fetch_add(1, std::memory_order_relaxed); }
  /// acq_rel: the last holder sees every other holder's last use before it frees the state.
  void release() noexcept {
    if (m_refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    const unsigned participants = m_participants;
    share* shares = this->shares();
    for (unsigned k = 0; k < participants; ++k) shares[k].~share();
    this->~claimed_loop();
    ::operator delete(this, std::align_val_t{alignof(claimed_loop)});
  }

  /// Runs the pieces of its own share, in batches of adjacent pieces (claim_batch), and takes
  /// half of the fullest share whenever its own is empty, until every share is. The first
  /// exception is kept (take_error()), and the pieces not started after it are skipped.
  void participate(unsigned who) noexcept {
    share& own = shares()[who];
    std::size_t mine = 0;
    claim_batch batch;
    do {
      std::uint32_t p;
      for (std::uint32_t k; (k = take_front(own, batch.pieces(), p)) != 0;) {
        const std::uint64_t start = claim_ticks();
        // Each piece starts where the one before it ended.
        std::size_t f = first_of(p);
        std::uint32_t j = 0;
        for (;;) {
          const std::size_t l = f + m_size + (p + j < m_larger ? 1 : 0);
          run_piece(f, l, who);
          f = l;
          ++j;
          if (j == k) {
            batch.ran(k, claim_ticks() - start);
            break;
          }
          if (j % claim_batch::clock_every == 0 &&
              claim_ticks() - start > claim_batch::cut_ticks) {  // [p + j, p + k): thieves' again
            give_back(own, p + j);
            batch.cut(j);
            break;
          }
        }
        mine += j;
      }
    } while (steal_into(who));
    if (mine == 0) return;
    if (m_finished.fetch_add(mine, std::memory_order_seq_cst) + mine != m_pieces) return;
    // The last piece finished, and nobody calls the work again (every piece is claimed). The
    // fetch_add read every other participant's, so their last uses of it happened before.
    work()->~Work();
    if (m_runtime != nullptr) {  // started from a task: the group goes on without this loop
      loop_access::finish(*m_runtime, m_held, take_error());
      return;
    }
    if (m_sleeping.load(std::memory_order_seq_cst) != 0) {
      m_sleeping.store(0, std::memory_order_relaxed);  // read by the caller's wait below only
      m_sleeping.notify_one();
    }
  }

  /// The first failure wins; pieces not claimed yet are skipped.
  void fail(std::exception_ptr e) noexcept {
    if (!m_failed.exchange(true, std::memory_order_relaxed)) m_error = std::move(e);
  }

  /// The caller, after its own participate(): until every piece finished. Spins up to ~20 µs
  /// (what is left is at most one piece per other participant), then sleeps (a futex).
  void wait_finished() noexcept {
    if (done()) return;
    const auto start = std::chrono::steady_clock::now();
    for (unsigned round = 1;; ++round) {
      if (done()) return;
      if ((round & 63) == 0 &&
          std::chrono::steady_clock::now() - start > std::chrono::microseconds(20)) {
        break;
      }
      pause();
    }
    for (;;) {
      m_sleeping.store(1, std::memory_order_seq_cst);
      if (m_finished.load(std::memory_order_seq_cst) == m_pieces) return;
      m_sleeping.wait(1, std::memory_order_relaxed);  // returns once a finisher cleared it
    }
  }

  /// After wait_finished(): the first exception of a piece or of starting the loop, or null.
  /// Moved out, so that the caller's thread drops the last reference to it, not a helper that
  /// frees the state later (ThreadSanitizer cannot see libstdc++'s reference count, and would
  /// report the exception's destruction as a race with the caller's catch).
  std::exception_ptr take_error() noexcept { return std::move(m_error); }

 private:
  /// A participant's unclaimed pieces [next, end): next in the low half, end in the high half.
  struct alignas(64) share {
    std::atomic<std::uint64_t> range{0};
  };
  static constexpr std::uint64_t pack(std::uint32_t next, std::uint32_t end) noexcept {
    return (std::uint64_t{end} << 32) | next;
  }
  static constexpr std::uint32_t next_of(std::uint64_t r) noexcept {
    return static_cast<std::uint32_t>(r);
  }
  static constexpr std::uint32_t end_of(std::uint64_t r) noexcept {
    return static_cast<std::uint32_t>(r >> 32);
  }
  static constexpr std::uint32_t left_in(std::uint64_t r) noexcept {
    return end_of(r) > next_of(r) ? end_of(r) - next_of(r) : 0;
  }

  claimed_loop(Work&& work, std::size_t first, std::size_t n, std::size_t pieces,
               unsigned participants, std::stop_token stop, runtime* rt, group held)
      : m_stop(std::move(stop)),
        m_first(first),
        m_pieces(pieces),
        m_size(n / pieces),
        m_larger(n % pieces),
        m_participants(participants),
        m_runtime(rt),
        m_held(held),
        m_cancelled(rt != nullptr && held.valid() ? loop_access::cancel_flag(*rt, held) : nullptr) {
    ::new (static_cast<void*>(m_work)) Work(std::move(work));
  }

  /// The work, alive from the construction until the last piece finished (participate).
  Work* work() noexcept { return std::launder(reinterpret_cast<Work*>(m_work)); }

  /// The shares, right after the object (its size is a multiple of its 64-byte alignment).
  share* shares() noexcept { return reinterpret_cast<share*>(this + 1); }

  /// The owner's claim: up to `want` pieces from the front of its share, [first, first + k);
  /// returns k, 0 once the share is empty.
  static std::uint32_t take_front(share& s, std::uint32_t want, std::uint32_t& first) noexcept {
    std::uint64_t r = s.range.load(std::memory_order_relaxed);
    while (left_in(r) != 0) {
      const std::uint32_t k = std::min(want, left_in(r));
      if (s.range.compare_exchange_weak(r, pack(next_of(r) + k, end_of(r)),
                                        std::memory_order_relaxed)) {
        first = next_of(r);
        return k;
      }
    }
    return 0;
  }

  /// The owner's return of the pieces of its last claim not started, [from, to) where `to` is
  /// where that claim (take_front) ended, to the front of its share. Only the owner moves a
  /// share's next (take_front, and steal_into's store, which it makes only between batches); a
  /// thief only lowers end, to at least next. So next is still `to`, the share is [to, end) with
  /// end >= to, and [from, end) is contiguous with not one piece of it claimed: the new word
  /// says exactly what the share holds, as every word of a share does. The compare-exchange
  /// fails only when a thief lowered end meanwhile; a thief's succeeds only on a word that is
  /// the share's state. Relaxed: see the top of this file.
  static void give_back(share& s, std::uint32_t from) noexcept {
    std::uint64_t r = s.range.load(std::memory_order_relaxed);
    while (!s.range.compare_exchange_weak(r, pack(from, end_of(r)), std::memory_order_relaxed)) {
    }
  }

  /// With its own share empty: moves the back half (rounded up) of the fullest other share into
  /// it. False once every share is empty. The own share is empty until the store below, so no
  /// thief takes from it meanwhile (a thief skips empty shares).
  bool steal_into(unsigned who) noexcept {
    share* all = shares();
    for (;;) {
      unsigned victim = who;
      std::uint64_t seen = 0;
      std::uint32_t most = 0;
      for (unsigned k = 0; k < m_participants; ++k) {
        if (k == who) continue;
        const std::uint64_t r = all[k].range.load(std::memory_order_relaxed);
        if (left_in(r) > most) {
          most = left_in(r);
          seen = r;
          victim = k;
        }
      }
      if (most == 0) return false;
      const std::uint32_t split = end_of(seen) - (most + 1) / 2;
      if (all[victim].range.compare_exchange_strong(seen, pack(next_of(seen), split),
                                                    std::memory_order_relaxed)) {
        all[who].range.store(pack(split, end_of(seen)), std::memory_order_relaxed);
        return true;
      }
      // The owner or another thief changed it: look again.
    }
  }

  /// Where piece p starts: the first m_larger pieces hold one index more. p * m_size <= n: no
  /// overflow.
  std::size_t first_of(std::size_t p) const noexcept {
    return m_first + p * m_size + std::min(p, m_larger);
  }

  /// Runs the piece [f, l).
  void run_piece(std::size_t f, std::size_t l, unsigned who) noexcept {
    // Counted, not run: after an exception, once a stop was requested, or once the loop's
    // group was cancelled.
    if (m_failed.load(std::memory_order_relaxed) || m_stop.stop_requested() ||
        (m_cancelled != nullptr && m_cancelled->load(std::memory_order_relaxed))) {
      return;
    }
    try {
      std::as_const(*work())(f, l, who);
    } catch (...) {
      fail(std::current_exception());
    }
  }

  bool done() const noexcept { return m_finished.load(std::memory_order_acquire) == m_pieces; }
  static void pause() noexcept {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
  }

  // Read-only after construction (the work until it is destroyed).
  alignas(Work) unsigned char m_work[sizeof(Work)];
  std::stop_token m_stop;
  std::size_t m_first;
  std::size_t m_pieces;
  std::size_t m_size;    // indices in a piece, but for
  std::size_t m_larger;  // the first m_larger pieces, which hold one more
  unsigned m_participants;
  runtime* m_runtime;  // started from a task: see make()
  group m_held;
  const std::atomic<bool>* m_cancelled;  // m_held's cancellation (runtime::cancel), or null
  std::exception_ptr m_error;  // written once, by the winner of m_failed
  std::atomic<bool> m_failed{false};
  // Written by every participant: a line of its own.
  alignas(64) std::atomic<std::size_t> m_finished{0};
  std::atomic<std::uint32_t> m_sleeping{0};
  std::atomic<unsigned> m_refs{1};  // the caller's
};

/// A participant other than the caller: a task that runs pieces until none is left.
template <class Work>
class loop_helper final : public task {
 public:
  loop_helper(claimed_loop<Work>* loop, unsigned who) noexcept : m_loop(loop), m_who(who) {}
  ~loop_helper() { m_loop->release(); }  // also when the runtime refuses the spawn
  task* execute(context&) override {
    m_loop->participate(m_who);
    return nullptr;
  }

 private:
  claimed_loop<Work>* m_loop;
  unsigned m_who;
};

/// Holds one reference to a loop's state for a scope: the caller's.
template <class Work>
struct loop_reference {
  claimed_loop<Work>* loop;
  ~loop_reference() { loop->release(); }
};

/// Helper `who` of `loop`, made through `maker` (the runtime, or a running task's context), with
/// a reference of its own, which its destructor drops (nothing taken if it cannot be made).
template <class Work, class Maker>
task* make_loop_helper(Maker& maker, claimed_loop<Work>* loop, unsigned who) {
  loop->acquire();
  try {
    return maker.template make_task<loop_helper<Work>>(loop, who);
  } catch (...) {
    loop->release();
    throw;
  }
}

/// How [first, last) (not empty) is cut for `participants` threads: at most loop_grain(...,
/// participants) indices a piece, and at most claimed_max_pieces pieces (larger ones beyond:
/// n / claimed_max_pieces, rounded up, is at most 2^32). Returns the number of pieces.
inline std::size_t claimed_pieces(std::size_t first, std::size_t last, const loop_options& options,
                                  unsigned participants) {
  const std::size_t n = last - first;
  std::size_t grain = loop_grain(first, last, options.grain, participants);
  grain = std::max(grain, n / claimed_max_pieces + (n % claimed_max_pieces != 0));
  return n / grain + (n % grain != 0);
}

/// Runs [first, last) (not empty) in claimed_pieces(...) pieces on the calling thread and on up
/// to `participants - 1` helper tasks, helper i on worker i - 1 (the last workers stay free for
/// the caller's CPU, as oneTBB's arena counts its waiting thread among its slots). Throws
/// std::logic_error if stop() began (with one worker no spawn would say so). Rethrows the first
/// exception; a helper the runtime refuses (stop() began meanwhile) counts as one too, and the
/// caller then skips every piece not claimed yet. Without memory for a helper task, the loop runs
/// on the caller and the helpers spawned before it (no failure: the result is the same). `work`
/// refers to the caller's frame: it must be trivially destructible (the last finisher destroys
/// it, maybe after the caller returned).
template <class Work>
void run_claimed_loop(runtime& rt, std::size_t first, std::size_t last, const loop_options& options,
                      unsigned participants, Work work) {
  static_assert(std::is_trivially_destructible_v<Work>);
  if (!rt.running()) throw std::logic_error("tessera: a loop on a runtime after stop() began");
  const std::size_t pieces = claimed_pieces(first, last, options, participants);
  const auto helpers = static_cast<unsigned>(
      std::min<std::size_t>(participants > 0 ? participants - 1 : 0, pieces - 1));
  using loop_t = claimed_loop<Work>;
  loop_t* loop =
      loop_t::make(std::move(work), first, last - first, pieces, helpers + 1, options.stop);
  const loop_reference<Work> own{loop};
  try {
    for (unsigned who = 1; who <= helpers; ++who) {
      task* t = make_loop_helper(rt, loop, who);
      t->annotate(options.priority).annotate(worker_id{static_cast<std::uint16_t>(who - 1)});
      rt.spawn(t);  // refused: the runtime destroyed it, and with it its reference
    }
  } catch (const std::bad_alloc&) {
    // No memory for a helper task: the participants there are take every share between them.
  } catch (...) {
    loop->fail(std::current_exception());
  }
  loop->participate(0);
  loop->wait_finished();
  if (std::exception_ptr e = loop->take_error()) std::rethrow_exception(e);
}

/// From a running task: runs [first, last) (not empty) in claimed_pieces(...) pieces on helper
/// tasks, participant 0 on the calling worker (at the front of its pool: it runs once the
/// calling task returned) and one on each of the next `participants` - 1 workers, and returns
/// at once. The loop holds group `g` (group{}: the running task's) open until its last piece
/// finished; the helpers are in no group, so a helper whose worker is busy delays nothing. The
/// first exception goes to the group. Throws only if nothing was started (no memory for the
/// state, a stale group). Without memory for a helper task, the loop runs on those spawned
/// before it, or with none on the calling task itself, before this returns.
template <class Work>
void run_claimed_loop_in_tasks(context& ctx, group g, std::size_t first, std::size_t last,
                               const loop_options& options, unsigned participants, Work&& work) {
  runtime& rt = ctx.runtime();
  participants = std::max(1u, participants);
  const std::size_t pieces = claimed_pieces(first, last, options, participants);
  const auto helpers = static_cast<unsigned>(std::min<std::size_t>(participants - 1, pieces - 1));
  using loop_t = claimed_loop<Work>;
  const group held = loop_access::hold(ctx, g);
  loop_t* loop;
  try {
    loop = loop_t::make(std::forward<Work>(work), first, last - first, pieces, helpers + 1,
                        options.stop, &rt, held);
  } catch (...) {
    loop_access::finish(rt, held, nullptr);  // drops the hold
    throw;
  }
  const loop_reference<Work> own{loop};
  const unsigned self = ctx.worker().value;
  // Participant 0 last: the others take every piece from its share if it cannot be made.
  unsigned spawned = 0;
  try {
    for (unsigned who = helpers;; --who) {
      task* t = make_loop_helper(ctx, loop, who);
      // The next workers after this one (this one itself, inactive during a resize, may be
      // beyond the active ones; a helper then shares a worker, no harm).
      const unsigned to = who == 0 ? self : (self + who) % participants;
      t->annotate(options.priority).annotate(worker_id{static_cast<std::uint16_t>(to)});
      loop_access::spawn_helper(ctx, t);
      ++spawned;
      if (who == 0) return;
    }
  } catch (...) {
    // No memory for a helper task: the loop runs on the helpers that were spawned, which take
    // every share between them (no failure: the loop's result is the same).
    if (spawned != 0) return;
  }
  // Not one helper: this task runs every piece itself, as participant 0.
  loop->participate(0);
}

}  // namespace tessera::detail
