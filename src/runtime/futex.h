// src/runtime/futex.h — the one way the runtime sleeps on and wakes a word (Linux futex,
// process-private): parked workers, group waiters, wait_idle() waiters.
//
//   futex_wait(word, 1);               // sleeps while word == 1 (or until woken, or spuriously)
//   futex_wait_for(word, 1, 50'000'000);
//   futex_wake(word);                  // one sleeper; futex_wake(word, futex_wake_all) all
//
// Callers re-check their condition after every return: a wait ends by a wake, a change of the
// word before it slept, a timeout or a signal alike.
#pragma once

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <cstdint>
#include <ctime>

namespace tessera::detail {

inline constexpr int futex_wake_all = INT_MAX;

/// Sleeps while `word` holds `expected`, without a time limit.
inline void futex_wait(std::atomic<std::uint32_t>& word, std::uint32_t expected) noexcept {
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAIT_PRIVATE, expected, nullptr,
          nullptr, 0);
}

/// Sleeps while `word` holds `expected`, at most `timeout_ns`.
inline void futex_wait_for(std::atomic<std::uint32_t>& word, std::uint32_t expected,
                           std::uint64_t timeout_ns) noexcept {
  const timespec ts{.tv_sec = static_cast<time_t>(timeout_ns / 1'000'000'000),
                    .tv_nsec = static_cast<long>(timeout_ns % 1'000'000'000)};
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAIT_PRIVATE, expected, &ts,
          nullptr, 0);
}

/// Wakes up to `count` threads sleeping on `word`.
inline void futex_wake(std::atomic<std::uint32_t>& word, int count = 1) noexcept {
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAKE_PRIVATE, count, nullptr,
          nullptr, 0);
}

}  // namespace tessera::detail
