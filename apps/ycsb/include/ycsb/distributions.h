// ycsb/distributions.h: the random number generator and the key distributions of YCSB's
// CoreWorkload (uniform, Zipfian, scrambled Zipfian, skewed-latest, counter) plus YCSB's 64-bit FNV
// hash, ported from the Java sources named at each class so that the skew a benchmark sees is the
// one YCSB produces.
//
// Usage:
//   ycsb::rng r{42};                                            // deterministic for a seed
//   ycsb::zipfian_generator z{0, 999};                          // items 0..999, theta 0.99
//   uint64_t item = z.next(r);                                  // item 0 is the most popular
//   ycsb::scrambled_zipfian_generator s{0, 999};                // hot items scattered by fnvhash64
//   uint64_t k = s.next(r);                                     // in [0, 999]
//
// Everything here is a small value type without locks: give each thread its own rng (and its own
// copy of a generator whose item count grows, i.e. zipfian_generator::next(rng&, count) and
// skewed_latest_generator). The const next() functions only read the generator and may share one
// instance between threads.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

namespace ycsb {

// -------------------------------------------------------------------------------------------------
// fnvhash64: site.ycsb.Utils.fnvhash64 (and Utils.hash, which CoreWorkload.buildKeyName uses for
// insertorder=hashed). 64-bit FNV-1a over the 8 bytes of the value, low byte first; Java then
// returns Math.abs(hashval) of the signed result. Math.abs(Long.MIN_VALUE) is Long.MIN_VALUE, whose
// bits are 0x8000000000000000: unsigned negation reproduces that too.
// -------------------------------------------------------------------------------------------------
inline constexpr uint64_t fnv_offset_basis_64 = 0xCBF29CE484222325ULL;
inline constexpr uint64_t fnv_prime_64 = 1099511628211ULL;

[[nodiscard]] constexpr uint64_t fnvhash64(uint64_t val) noexcept {
  uint64_t hashval = fnv_offset_basis_64;
  for (int i = 0; i < 8; ++i) {
    const uint64_t octet = val & 0x00ffU;
    val >>= 8;  // Java shifts arithmetically: the low octet never sees the difference
    hashval ^= octet;
    hashval *= fnv_prime_64;
  }
  if ((hashval >> 63) != 0) hashval = 0 - hashval;  // Math.abs on the two's-complement value
  return hashval;
}

// -------------------------------------------------------------------------------------------------
// rng: xoshiro256** (Blackman & Vigna), seeded through splitmix64. YCSB draws from
// ThreadLocalRandom, which cannot be seeded; this engine makes every sequence reproducible. Meets
// UniformRandomBitGenerator.
// -------------------------------------------------------------------------------------------------
[[nodiscard]] constexpr uint64_t splitmix64(uint64_t& state) noexcept {
  uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

class rng {
 public:
  using result_type = uint64_t;

  constexpr explicit rng(uint64_t seed = 0) noexcept {
    for (auto& word : m_state) word = splitmix64(seed);
  }

  static constexpr result_type min() noexcept { return 0; }
  static constexpr result_type max() noexcept { return std::numeric_limits<uint64_t>::max(); }

  constexpr result_type operator()() noexcept { return next_u64(); }

  constexpr uint64_t next_u64() noexcept {
    const uint64_t result = rotl(m_state[1] * 5, 7) * 9;
    const uint64_t t = m_state[1] << 17;
    m_state[2] ^= m_state[0];
    m_state[3] ^= m_state[1];
    m_state[1] ^= m_state[2];
    m_state[0] ^= m_state[3];
    m_state[2] ^= t;
    m_state[3] = rotl(m_state[3], 45);
    return result;
  }

  // Uniform in [0, 1) with 53 random bits, like java.util.Random.nextDouble().
  constexpr double next_double() noexcept {
    return static_cast<double>(next_u64() >> 11) * 0x1.0p-53;
  }

 private:
  static constexpr uint64_t rotl(uint64_t x, int k) noexcept { return (x << k) | (x >> (64 - k)); }

  uint64_t m_state[4]{};
};

// -------------------------------------------------------------------------------------------------
// zeta: ZipfianGenerator.zetastatic. zeta(n, theta) = sum_{i=1..n} 1 / i^theta, summed in the same
// order as YCSB; the four-argument form continues a sum that covered the first st items. O(n - st)
// calls to pow().
// -------------------------------------------------------------------------------------------------
[[nodiscard]] double zeta(uint64_t st, uint64_t n, double theta, double initial_sum) noexcept;
[[nodiscard]] inline double zeta(uint64_t n, double theta) noexcept {
  return zeta(0, n, theta, 0.0);
}

// -------------------------------------------------------------------------------------------------
// uniform_long_generator: site.ycsb.generator.UniformLongGenerator, uniform over [lb, ub]
// inclusive: Math.abs(nextLong()) % interval + lb. (For the one draw in 2^64 where Java's abs
// overflows to a negative number, this port yields 2^63 % interval instead of a negative value.)
// -------------------------------------------------------------------------------------------------
class uniform_long_generator {
 public:
  constexpr uniform_long_generator(uint64_t lb, uint64_t ub) noexcept
      : m_lb{lb}, m_interval{ub - lb + 1} {}

  [[nodiscard]] constexpr uint64_t next(rng& r) const noexcept {
    uint64_t v = r.next_u64();
    if ((v >> 63) != 0) v = 0 - v;                              // Math.abs
    return m_interval == 0 ? m_lb + v : v % m_interval + m_lb;  // interval 0: the full 2^64 range
  }

  [[nodiscard]] constexpr uint64_t lower() const noexcept { return m_lb; }
  [[nodiscard]] constexpr uint64_t upper() const noexcept { return m_lb + m_interval - 1; }

 private:
  uint64_t m_lb;
  uint64_t m_interval;
};

// -------------------------------------------------------------------------------------------------
// zipfian_generator: site.ycsb.generator.ZipfianGenerator, the algorithm of Gray et al., "Quickly
// generating billion-record synthetic databases", SIGMOD'94. Items min..max (inclusive); item min
// is the most popular, P(min) = 1 / zeta(items, theta), P(min + 1) = 0.5^theta / zeta(items,
// theta), then Gray's approximation. next(r, itemcount) with a larger itemcount extends zeta
// incrementally, as YCSB's nextLong(itemcount) does (and, as in YCSB, eta keeps using the item
// count given at construction: that quirk is kept on purpose). A smaller itemcount than the one
// zeta was computed for is used as-is (YCSB's allowitemcountdecrease=false). One deviation: the
// result is clamped to the last item, which YCSB can only exceed for degenerate counts (fewer than
// 3 items) where its eta is NaN or negative.
// -------------------------------------------------------------------------------------------------
class zipfian_generator {
 public:
  static constexpr double zipfian_constant = 0.99;  // ZipfianGenerator.ZIPFIAN_CONSTANT

  // Computes zeta(max - min + 1, theta): O(items) work, about a second for 50 M items.
  zipfian_generator(uint64_t min, uint64_t max, double theta = zipfian_constant);
  // Uses a precomputed zeta for max - min + 1 items (ZipfianGenerator's 4-argument constructor).
  zipfian_generator(uint64_t min, uint64_t max, double theta, double zetan);

  // nextValue(): an item in [min, max]. Does not modify the generator.
  [[nodiscard]] uint64_t next(rng& r) const noexcept { return draw(r, m_items); }

  // nextLong(itemcount): an item in [min, min + itemcount - 1]. Grows zeta first when itemcount
  // exceeds the count zeta was computed for (one pow() per new item).
  [[nodiscard]] uint64_t next(rng& r, uint64_t itemcount) noexcept {
    if (itemcount > m_count_for_zeta) grow(itemcount);
    return draw(r, itemcount);
  }

  [[nodiscard]] uint64_t items() const noexcept { return m_items; }
  [[nodiscard]] uint64_t base() const noexcept { return m_base; }
  [[nodiscard]] double theta() const noexcept { return m_theta; }
  [[nodiscard]] double zetan() const noexcept { return m_zetan; }
  [[nodiscard]] uint64_t count_for_zeta() const noexcept { return m_count_for_zeta; }

 private:
  void grow(uint64_t itemcount) noexcept;

  [[nodiscard]] uint64_t draw(rng& r, uint64_t itemcount) const noexcept {
    const double u = r.next_double();
    const double uz = u * m_zetan;
    if (uz < 1.0) return m_base;
    if (uz < 1.0 + m_half_pow_theta) return m_base + 1;
    const double count = static_cast<double>(itemcount);
    double offset = count * std::pow(m_eta * u - m_eta + 1, m_alpha);
    // !(offset < count) also catches NaN; see the class comment.
    if (!(offset < count)) offset = itemcount == 0 ? 0.0 : static_cast<double>(itemcount - 1);
    uint64_t ret = static_cast<uint64_t>(offset);
    if (itemcount != 0 && ret > itemcount - 1) ret = itemcount - 1;  // double rounding near 2^64
    return m_base + ret;
  }

  uint64_t m_items;
  uint64_t m_base;
  double m_theta;
  double m_zeta2theta;
  double m_alpha;
  double m_zetan;
  double m_eta;
  double m_half_pow_theta;  // Math.pow(0.5, theta), hoisted out of nextLong
  uint64_t m_count_for_zeta;
};

// -------------------------------------------------------------------------------------------------
// scrambled_zipfian_generator: site.ycsb.generator.ScrambledZipfianGenerator with the Zipfian
// constant 0.99. Draws from a ZipfianGenerator(0, ITEM_COUNT) (so ITEM_COUNT + 1 items, with YCSB's
// precomputed ZETAN instead of an O(10^10) sum), hashes the item with fnvhash64 and takes it modulo
// max - min + 1. The hottest value is min + fnvhash64(0) % (max - min + 1), with probability about
// 1/ZETAN = 3.78 %.
// -------------------------------------------------------------------------------------------------
class scrambled_zipfian_generator {
 public:
  static constexpr double zetan = 26.46902820178302;      // ScrambledZipfianGenerator.ZETAN
  static constexpr double used_zipfian_constant = 0.99;   // USED_ZIPFIAN_CONSTANT
  static constexpr uint64_t item_count = 10000000000ULL;  // ITEM_COUNT (10^10)

  scrambled_zipfian_generator(uint64_t min, uint64_t max);

  [[nodiscard]] uint64_t next(rng& r) const noexcept {
    return m_min + fnvhash64(m_gen.next(r)) % m_itemcount;
  }

  [[nodiscard]] uint64_t min() const noexcept { return m_min; }
  [[nodiscard]] uint64_t max() const noexcept { return m_min + m_itemcount - 1; }

 private:
  zipfian_generator m_gen;
  uint64_t m_min;
  uint64_t m_itemcount;
};

// -------------------------------------------------------------------------------------------------
// counter_generator: site.ycsb.generator.CounterGenerator. next() returns start, start + 1, ...;
// last_value() is the last value handed out (start - 1 before the first). In a single thread this
// is also AcknowledgedCounterGenerator, whose lastValue() is the highest contiguously acknowledged
// value: YCSB acknowledges each insert key right after the insert, so with one client thread the
// two coincide.
// -------------------------------------------------------------------------------------------------
class counter_generator {
 public:
  constexpr explicit counter_generator(uint64_t start) noexcept : m_next{start} {}
  constexpr uint64_t next() noexcept { return m_next++; }
  [[nodiscard]] constexpr uint64_t last_value() const noexcept { return m_next - 1; }

 private:
  uint64_t m_next;
};

// -------------------------------------------------------------------------------------------------
// skewed_latest_generator: site.ycsb.generator.SkewedLatestGenerator. Built on a ZipfianGenerator
// with basis.lastValue() items; nextValue() returns max - zipfian.nextLong(max) with max =
// basis.lastValue() at the time of the call, so the most recently inserted items are the most
// popular. As in YCSB the result is in [1, max] (item 0 is never chosen). The caller passes the
// basis's current last value.
// -------------------------------------------------------------------------------------------------
class skewed_latest_generator {
 public:
  // Computes zeta(last_value): O(last_value).
  explicit skewed_latest_generator(uint64_t last_value);
  // Uses zetan = zeta(last_value, 0.99), computed once and shared by many streams.
  skewed_latest_generator(uint64_t last_value, double zetan);

  [[nodiscard]] uint64_t next(rng& r, uint64_t last_value) noexcept {
    return last_value - m_zipfian.next(r, last_value);
  }

  [[nodiscard]] const zipfian_generator& zipfian() const noexcept { return m_zipfian; }

 private:
  zipfian_generator m_zipfian;
};

}  // namespace ycsb
