#pragma once
// Shared helpers for the kv tests: workload sizes that fit Debug and sanitizer builds, and a
// value encoding that lets a concurrent reader tell a legal value from garbage.

#include <cstddef>
#include <cstdint>

#include "kv/node.h"

namespace kv::test {

#if defined(__SANITIZE_THREAD__)
#define KV_TEST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define KV_TEST_TSAN 1
#endif
#endif
#if defined(KV_TEST_TSAN) || defined(__SANITIZE_ADDRESS__)
#define KV_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KV_TEST_SANITIZED 1
#endif
#endif

/// libtbb comes uninstrumented from the distribution: ThreadSanitizer cannot see the
/// synchronisation inside it (task spawn, steal, join) and reports every access of a TBB worker
/// as a race. Under TSan, the tests that would run code on more than one TBB thread are not
/// instantiated (driver_test.cpp); the code they run (the tree, the batch) is covered under TSan
/// by the std::thread tests.
#if defined(KV_TEST_TSAN)
inline constexpr bool tbb_workers_invisible_to_tsan = true;
#else
inline constexpr bool tbb_workers_invisible_to_tsan = false;
#endif

/// Multiplies the sizes of the heavy tests: 1 under sanitizers, 2 in unoptimised (Debug)
/// builds, 4 in optimised ones; keeps the whole binary well under 30 s everywhere.
#if defined(KV_TEST_SANITIZED)
inline constexpr std::size_t scale = 1;
#elif !defined(NDEBUG)
inline constexpr std::size_t scale = 2;
#else
inline constexpr std::size_t scale = 4;
#endif

/// A value that names its key: value_for(k, stamp) decodes back to k with key_of_value.
/// Keys in the tests stay below 2^40.
[[nodiscard]] constexpr value_t value_for(key_type k, std::uint32_t stamp) noexcept {
  return (k << 24) | (stamp & 0xFFFFFFu);
}
[[nodiscard]] constexpr key_type key_of_value(value_t v) noexcept { return v >> 24; }

/// splitmix64: a cheap, well-mixed stream for test keys.
[[nodiscard]] constexpr std::uint64_t mix(std::uint64_t x) noexcept {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/// Distinct keys below 2^40 in a scattered order: i -> i * odd constant mod 2^40 is a bijection.
[[nodiscard]] constexpr key_type spread(std::uint64_t i) noexcept {
  return (i * 0x9E3779B97F4A7C15ull) & ((std::uint64_t{1} << 40) - 1);
}

}  // namespace kv::test
