#pragma once
// server::load_bytes — up to 8 bytes of a byte string as one little-endian word, without a call
// to memcpy for the variable length (a header's, a hint's or a key's last partial word: a
// memcpy of a variable length is a library call, ~20 instructions, where these are a few loads).
//
// server::same_bytes compares up to 16 bytes the same way (a short memcmp is a call too).
//
//   std::uint64_t w = server::load_bytes(key.data() + at, std::min<std::size_t>(8, n));
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace server {

/// Bytes p[0, n) (n <= 8) as a little-endian word, the bytes above them zero: what a memcpy of
/// n bytes into a zeroed word gives. Reads only p[0, n). Always inlined: a call costs about what
/// it saves (GCC outlined it once same_bytes called it too).
[[gnu::always_inline]] inline std::uint64_t load_bytes(const char* p, std::size_t n) noexcept {
  if (n >= 8) {
    std::uint64_t w = 0;
    std::memcpy(&w, p, 8);
    return w;
  }
  if (n >= 4) {
    // Two 4-byte loads that overlap in the middle (n < 8): the shared bytes are the same bytes,
    // so or-ing them in twice changes nothing.
    std::uint32_t lo = 0;
    std::uint32_t hi = 0;
    std::memcpy(&lo, p, 4);
    std::memcpy(&hi, p + n - 4, 4);
    return lo | (std::uint64_t{hi} << (8 * (n - 4)));
  }
  if (n == 0) return 0;
  // 1-3 bytes: the first, the middle and the last (some the same byte).
  const auto byte = [p](std::size_t i) { return std::uint64_t{static_cast<unsigned char>(p[i])}; };
  return byte(0) | (byte(n / 2) << (8 * (n / 2))) | (byte(n - 1) << (8 * (n - 1)));
}

/// Whether a[0, n) and b[0, n) are the same bytes: one or two words for n <= 16 (a command name,
/// a leaf's shared prefix), memcmp above.
[[gnu::always_inline]] inline bool same_bytes(const char* a, const char* b,
                                              std::size_t n) noexcept {
  if (n > 16) return std::memcmp(a, b, n) == 0;
  const std::size_t first = n < 8 ? n : 8;
  if (load_bytes(a, first) != load_bytes(b, first)) return false;
  return n <= 8 || load_bytes(a + 8, n - 8) == load_bytes(b + 8, n - 8);
}

}  // namespace server
