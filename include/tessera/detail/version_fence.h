// tessera/detail/version_fence.h — the fences of the optimistic version protocol (a seqlock:
// writers make a resource's version odd while they write, readers check it after reading),
// shared by the runtime (src/sync/latch.h) and by coupled reads (tessera/coupled_read.h).
//
// ThreadSanitizer does not model std::atomic_thread_fence (GCC warns, -Wtsan), and it does not
// need them here: an optimistic reader reads its object with relaxed atomics only (racy_load,
// tessera/optimistic.h), so there is no plain access for it to order. TSan builds on x86-64 use
// a compiler-only fence, which is exact there: TSO keeps load-load and store-store order in
// hardware. Every other build, and TSan elsewhere, the real fence.
#pragma once

#include <atomic>

#if defined(__SANITIZE_THREAD__)
#define TESSERA_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TESSERA_TSAN 1
#endif
#endif

namespace tessera::detail {

/// Orders the data reads before it ahead of the version's re-read (a reader's validation).
inline void version_acquire_fence() noexcept {
#if defined(TESSERA_TSAN) && defined(__x86_64__)
  std::atomic_signal_fence(std::memory_order_acquire);
#else
  std::atomic_thread_fence(std::memory_order_acquire);
#endif
}

/// Orders the odd version's store ahead of the data writes after it (a writer's begin).
inline void version_release_fence() noexcept {
#if defined(TESSERA_TSAN) && defined(__x86_64__)
  std::atomic_signal_fence(std::memory_order_release);
#else
  std::atomic_thread_fence(std::memory_order_release);
#endif
}

}  // namespace tessera::detail
