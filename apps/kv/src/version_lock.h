#pragma once
// kv::version_lock — the optimistic version lock of the OLC baseline ([OLC] in
// docs/references.md: Leis et al., "The ART of practical synchronization", DaMoN 2016, and the
// authors' BTreeOLC), one 64-bit word in the 64-byte header before each node.
//
// Why the baseline has its own and does not share tessera's src/sync/latch.h: the thread and
// oneTBB baselines are the competitors, so they are what a user would write by hand without
// tessera — tessera_kv_baselines does not link tessera, and an app reaches the library through
// its public headers only, which latch.h is not part of. The two are not the same lock either:
// tessera keeps a latch word and a separate odd/even version per resource, because the runtime
// picks per resource whether a task takes the spinlock, the reader/writer latch or reads
// optimistically and never upgrades a reader; this is the textbook optimistic lock of an OLC
// tree, lock bit and version in one word, with the upgrade from an optimistic read to the write
// lock (try_lock(v)) that lock coupling needs. What they share is the seqlock's memory ordering
// (the same fences, below); a waiter waits differently: here 64 pauses and then a yield per
// try, the pause on x86 only; in tessera up to 1024 pauses, also on AArch64, then a yield per
// try (detail::backoff). Neither difference changes what the lock guarantees.
//
// Word layout (BTreeOLC's): bit 0 reserved for "obsolete" (never set: the baseline neither
// merges nor frees nodes while the tree lives), bit 1 "locked", bits 2..63 a version counter.
// Invariant: the node's contents change only while the locked bit is set, and every unlock
// after a change bumps the version, so two equal unlocked reads bracket an unchanged node.
// Unlike BTreeOLC's readLockOrRestart, read_begin() waits for the holder instead of making the
// caller restart from the root (nodes are never freed and a split leaves a right link to follow,
// so a search resumes at the node it was at), and unlock_unchanged() releases without a bump,
// so readers stay valid.
//
// Memory-ordering contract (a seqlock, after Boehm, "Can seqlocks get along with programming
// language memory models?", 2012): if validate(v) returns true for v = read_begin(), every
// relaxed read of the node between the two calls saw the writes of the unlock that produced v
// and no write of a later lock holder. try_lock(v) succeeds only if nothing changed since v,
// and the holder then sees every write made before that unlock.
//
//   kv::version_lock& l = lock_of(leaf);                  // in the header before the node
//   auto v = l.read_begin();                               // optimistic read: waits if locked
//   std::optional<kv::value_t> r = kv::leaf_lookup(*leaf, k);   // racy, relaxed reads
//   if (l.validate(v)) return r;                           // else: the reads may be torn, retry
//   if (l.try_lock(v)) { kv::leaf_update(*leaf, k, x); l.unlock(v); }  // write: upgrade, bump

#include <atomic>
#include <cstdint>
#include <thread>

#if defined(__SANITIZE_THREAD__)
#define KV_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define KV_TSAN 1
#endif
#endif

namespace kv {

namespace detail {

// The seqlock fences. ThreadSanitizer does not model std::atomic_thread_fence (GCC warns,
// -Wtsan); it does not need them either, because every node field the fences order is
// accessed atomically. TSan builds on x86-64 use a compiler-only fence, which is exact there
// (TSO keeps load-load and store-store order; the lock's CAS is a full barrier).
inline void seqlock_acquire_fence() noexcept {
#if defined(KV_TSAN) && defined(__x86_64__)
  std::atomic_signal_fence(std::memory_order_acquire);
#else
  std::atomic_thread_fence(std::memory_order_acquire);
#endif
}

inline void seqlock_release_fence() noexcept {
#if defined(KV_TSAN) && defined(__x86_64__)
  std::atomic_signal_fence(std::memory_order_release);
#else
  std::atomic_thread_fence(std::memory_order_release);
#endif
}

inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

}  // namespace detail

class version_lock {
 public:
  using version_t = std::uint64_t;
  static constexpr version_t obsolete_bit = 1;  // reserved, see above
  static constexpr version_t locked_bit = 2;

  /// Starts an optimistic read: waits until unlocked and returns the version.
  [[nodiscard]] version_t read_begin() const noexcept {
    // acquire: pairs with unlock(); the node's contents written before it are visible.
    const version_t v = m_word.load(std::memory_order_acquire);
    if ((v & locked_bit) == 0) [[likely]] {
      return v;
    }
    return wait_unlocked();
  }

  /// Ends an optimistic read: true if the node did not change since read_begin() returned v.
  [[nodiscard]] bool validate(version_t v) const noexcept {
    detail::seqlock_acquire_fence();  // keeps the relaxed reads of the node before the re-check
    return m_word.load(std::memory_order_relaxed) == v;
  }

  /// Upgrades an optimistic read at version v to the exclusive lock; false if it changed.
  [[nodiscard]] bool try_lock(version_t v) noexcept {
    // acquire: the holder sees every write of the previous holders.
    if (!m_word.compare_exchange_strong(v, v + locked_bit, std::memory_order_acquire,
                                        std::memory_order_relaxed)) {
      return false;
    }
    detail::seqlock_release_fence();  // a reader that sees our writes sees the locked bit too
    return true;
  }

  /// Waits for and takes the exclusive lock; returns the version it was taken at.
  version_t lock() noexcept {
    for (;;) {
      const version_t v = read_begin();
      if (try_lock(v)) return v;
    }
  }

  /// Releases a lock taken at version v after changing the node: bumps the version.
  void unlock(version_t v) noexcept {
    // release: publishes the node's new contents to the next reader and lock holder.
    m_word.store(v + 2 * locked_bit, std::memory_order_release);
  }

  /// Releases a lock taken at version v without having changed the node: readers that
  /// started at v stay valid.
  void unlock_unchanged(version_t v) noexcept {
    // release: orders the holder's reads before the next holder's writes.
    m_word.store(v, std::memory_order_release);
  }

  [[nodiscard]] bool is_locked() const noexcept {
    return (m_word.load(std::memory_order_relaxed) & locked_bit) != 0;
  }

 private:
  [[gnu::noinline]] version_t wait_unlocked() const noexcept {
    for (unsigned spins = 0;; ++spins) {
      // acquire: as in read_begin().
      const version_t v = m_word.load(std::memory_order_acquire);
      if ((v & locked_bit) == 0) return v;
      if (spins < 64) {
        detail::cpu_relax();
      } else {
        std::this_thread::yield();  // the holder may be preempted (more threads than cores)
      }
    }
  }

  std::atomic<version_t> m_word{0};
};

}  // namespace kv
