// bench/common/random.h — the cheap deterministic randomness the benchmarks share.
//
//   std::uint64_t r = mix64(seed + i);      // splitmix64 finalizer of a counter
//   std::uint64_t k = below(r, n);          // uniform in [0, n), no division
#pragma once

#include <cstdint>

namespace tessera::bench {

/// splitmix64's finalizer: a well-mixed 64-bit value from a counter.
inline std::uint64_t mix64(std::uint64_t x) noexcept {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/// Uniform in [0, n) from a uniform 64-bit r, without division (Lemire's multiply-high).
inline std::uint64_t below(std::uint64_t r, std::uint64_t n) noexcept {
  __extension__ using uint128 = unsigned __int128;
  return static_cast<std::uint64_t>((static_cast<uint128>(r) * n) >> 64);
}

}  // namespace tessera::bench
