#pragma once
// server::load_bytes — up to 8 bytes of a byte string as one little-endian word, without a call
// to memcpy for the variable length (a header's, a hint's or a key's last partial word: a
// memcpy of a variable length is a library call, ~20 instructions, where these are a few loads).
//
// server::same_bytes compares up to 16 bytes the same way (a short memcmp is a call too);
// server::compare_bytes orders two byte strings as memcmp then length do (std::string_view's
// order) by 8-byte words for up to 32 bytes, and server::shared_prefix counts the bytes two
// strings share by words.
//
//   std::uint64_t w = server::load_bytes(key.data() + at, std::min<std::size_t>(8, n));
//   if (server::compare_bytes(a, b) < 0) ...  // a < b as byte strings
#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

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

/// The number of leading bytes `a` and `b` share (std::mismatch's distance), by 8-byte words.
[[gnu::always_inline]] inline std::size_t shared_prefix(std::string_view a,
                                                        std::string_view b) noexcept {
  static_assert(std::endian::native == std::endian::little);
  const std::size_t n = std::min(a.size(), b.size());
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    std::uint64_t x = 0;
    std::uint64_t y = 0;
    std::memcpy(&x, a.data() + i, 8);
    std::memcpy(&y, b.data() + i, 8);
    // Little-endian: the first differing byte is the lowest differing one.
    if (x != y) return i + static_cast<std::size_t>(std::countr_zero(x ^ y)) / 8;
  }
  if (i < n) {
    const std::uint64_t d = load_bytes(a.data() + i, n - i) ^ load_bytes(b.data() + i, n - i);
    if (d != 0) return i + static_cast<std::size_t>(std::countr_zero(d)) / 8;
  }
  return n;
}

/// -1, 0, 1: `a` against `b` as byte strings (unsigned bytes, then the shorter first), as
/// std::string_view::compare orders them. Up to 32 shared bytes are compared without a call, by
/// shared_prefix's words and then the first differing byte (keys of a few words: a memcmp call
/// cost ~25 instructions a compare); longer ones by memcmp.
[[gnu::always_inline]] inline int compare_bytes(std::string_view a, std::string_view b) noexcept {
  const std::size_t n = std::min(a.size(), b.size());
  if (n > 32) {
    const int c = std::memcmp(a.data(), b.data(), n);
    if (c != 0) return c < 0 ? -1 : 1;
  } else if (const std::size_t p = shared_prefix(a, b); p < n) {
    return static_cast<unsigned char>(a[p]) < static_cast<unsigned char>(b[p]) ? -1 : 1;
  }
  if (a.size() == b.size()) return 0;
  return a.size() < b.size() ? -1 : 1;
}

}  // namespace server
