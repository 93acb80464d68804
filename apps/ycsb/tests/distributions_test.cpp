// Tests of the YCSB generator ports (ycsb/distributions.h): fnvhash64, zeta, Zipfian, scrambled
// Zipfian, uniform, skewed-latest, counter.
#include "ycsb/distributions.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <vector>

namespace {

// site.ycsb.Utils.fnvhash64 transcribed with Java's signed long semantics (wrapping multiply,
// arithmetic shift, Math.abs), as an independent reference for the unsigned port.
int64_t java_fnvhash64(int64_t val) {
  int64_t hashval = static_cast<int64_t>(0xCBF29CE484222325ULL);
  for (int i = 0; i < 8; i++) {
    const int64_t octet = val & 0x00ff;
    val = val >> 8;
    hashval = hashval ^ octet;
    hashval = static_cast<int64_t>(static_cast<uint64_t>(hashval) * 1099511628211ULL);
  }
  return hashval == std::numeric_limits<int64_t>::min() ? hashval
                                                        : (hashval < 0 ? -hashval : hashval);
}

TEST(Fnvhash64, KnownValues) {
  // Computed from the YCSB algorithm; fnvhash64(0) is the first key of every YCSB load,
  // user6284781860667377211.
  static_assert(ycsb::fnvhash64(0) == 6284781860667377211ULL);
  EXPECT_EQ(ycsb::fnvhash64(0), 6284781860667377211ULL);
  EXPECT_EQ(ycsb::fnvhash64(1), 8517097267634966620ULL);
  EXPECT_EQ(ycsb::fnvhash64(2), 1820151046732198393ULL);
  EXPECT_EQ(ycsb::fnvhash64(12345), 1792800413050876852ULL);
  EXPECT_EQ(ycsb::fnvhash64(1000000), 1011632231655643464ULL);
  EXPECT_EQ(ycsb::fnvhash64(0x7FFFFFFFFFFFFFFFULL), 8289549613075766851ULL);
  EXPECT_EQ(ycsb::fnvhash64(0xFFFFFFFFFFFFFFFFULL), 8289690350564177859ULL);  // Java's -1L
  EXPECT_EQ(ycsb::fnvhash64(0x8000000000000000ULL), 6284922598155788219ULL);  // Long.MIN_VALUE
}

TEST(Fnvhash64, MatchesJavaSemantics) {
  ycsb::rng r{7};
  for (int i = 0; i < 20000; ++i) {
    const uint64_t v = i < 10000 ? static_cast<uint64_t>(i) : r.next_u64();
    const uint64_t h = ycsb::fnvhash64(v);
    EXPECT_EQ(h, static_cast<uint64_t>(java_fnvhash64(static_cast<int64_t>(v)))) << v;
    EXPECT_LE(h, 0x8000000000000000ULL);  // Math.abs: non-negative as a Java long
  }
}

TEST(Rng, DeterministicForSeed) {
  ycsb::rng a{123};
  ycsb::rng b{123};
  ycsb::rng c{124};
  int same_as_c = 0;
  for (int i = 0; i < 1000; ++i) {
    const uint64_t x = a.next_u64();
    EXPECT_EQ(x, b.next_u64());
    same_as_c += x == c.next_u64() ? 1 : 0;
  }
  EXPECT_EQ(same_as_c, 0);
  for (int i = 0; i < 10000; ++i) {
    const double d = a.next_double();
    ASSERT_GE(d, 0.0);
    ASSERT_LT(d, 1.0);
  }
}

TEST(Zeta, SmallValuesAndIncrementalSum) {
  EXPECT_DOUBLE_EQ(ycsb::zeta(1, 0.99), 1.0);
  EXPECT_DOUBLE_EQ(ycsb::zeta(2, 0.99), 1.0 + std::pow(2.0, -0.99));
  // Continuing a sum adds the same terms in the same order: bit-identical.
  EXPECT_EQ(ycsb::zeta(1000, 0.99), ycsb::zeta(500, 1000, 0.99, ycsb::zeta(500, 0.99)));
}

TEST(Zeta, ScrambledZipfianConstantIsZetaOfItemCount) {
  // Euler-Maclaurin for sum_{i=1..N} i^-s: direct sum below M, integral and end corrections above.
  const double s = ycsb::scrambled_zipfian_generator::used_zipfian_constant;
  const double n = static_cast<double>(ycsb::scrambled_zipfian_generator::item_count);
  const uint64_t m = 1000;
  const double md = static_cast<double>(m);
  double sum = ycsb::zeta(m - 1, s);
  sum += (std::pow(n, 1 - s) - std::pow(md, 1 - s)) / (1 - s);
  sum += (std::pow(md, -s) + std::pow(n, -s)) / 2;
  sum += s / 12 * (std::pow(md, -s - 1) - std::pow(n, -s - 1));
  EXPECT_NEAR(sum, ycsb::scrambled_zipfian_generator::zetan, 1e-9);
}

TEST(Zipfian, ItemZeroAndOneHaveTheExactProbabilities) {
  constexpr uint64_t n = 1000;
  constexpr int samples = 200000;
  const ycsb::zipfian_generator z{0, n - 1};
  EXPECT_DOUBLE_EQ(z.zetan(), ycsb::zeta(n, 0.99));
  ycsb::rng r{1};
  std::vector<int> count(n, 0);
  for (int i = 0; i < samples; ++i) {
    const uint64_t v = z.next(r);
    ASSERT_LT(v, n);
    ++count[v];
  }
  const double p0 = 1.0 / z.zetan();
  const double p1 = std::pow(0.5, 0.99) / z.zetan();
  const auto tolerance = [&](double p) { return 5 * std::sqrt(p * (1 - p) / samples); };
  EXPECT_NEAR(count[0] / double{samples}, p0, tolerance(p0));
  EXPECT_NEAR(count[1] / double{samples}, p1, tolerance(p1));
}

TEST(Zipfian, RanksFollowThePowerLaw) {
  constexpr uint64_t n = 10000;
  constexpr int samples = 400000;
  const ycsb::zipfian_generator z{0, n - 1};
  ycsb::rng r{2};
  std::vector<int> count(n, 0);
  for (int i = 0; i < samples; ++i) ++count[z.next(r)];
  // Average frequency per rank over the decades [1,10), [10,100), [100,1000), [1000,10000): a power
  // law with exponent 0.99 divides it by 10^0.99 = 9.77 per decade (Gray's approximation: roughly).
  std::vector<double> decade_mean;
  for (uint64_t lo = 1; lo < n; lo *= 10) {
    double sum = 0;
    for (uint64_t i = lo; i < lo * 10; ++i) sum += count[i];
    decade_mean.push_back(sum / static_cast<double>(lo * 9));
  }
  for (std::size_t d = 0; d + 1 < decade_mean.size(); ++d) {
    const double ratio = decade_mean[d] / decade_mean[d + 1];
    EXPECT_GT(ratio, 7.0) << "decade " << d;
    EXPECT_LT(ratio, 13.0) << "decade " << d;
  }
  // And frequency falls with rank at the head.
  EXPECT_GT(count[0], count[1]);
  EXPECT_GT(count[1], count[2]);
  EXPECT_GT(count[2], count[5]);
}

TEST(Zipfian, RespectsBaseAndGrowsItsItemCountIncrementally) {
  ycsb::zipfian_generator z{100, 199};
  ycsb::rng r{3};
  for (int i = 0; i < 10000; ++i) {
    const uint64_t v = z.next(r);
    ASSERT_GE(v, 100u);
    ASSERT_LE(v, 199u);
  }
  bool saw_new_item = false;
  for (int i = 0; i < 20000; ++i) {
    const uint64_t v = z.next(r, 300);
    ASSERT_GE(v, 100u);
    ASSERT_LT(v, 400u);
    saw_new_item = saw_new_item || v >= 200;
  }
  EXPECT_TRUE(saw_new_item);
  EXPECT_EQ(z.count_for_zeta(), 300u);
  EXPECT_DOUBLE_EQ(z.zetan(), ycsb::zeta(100, 300, 0.99, ycsb::zeta(100, 0.99)));
  EXPECT_THROW((ycsb::zipfian_generator{5, 4}), std::invalid_argument);
}

TEST(ScrambledZipfian, StaysInRangeAndHotKeysTakeTheExpectedShare) {
  constexpr uint64_t n = 10000;
  constexpr int samples = 300000;
  const ycsb::scrambled_zipfian_generator s{0, n - 1};
  ycsb::rng r{4};
  std::vector<int> count(n, 0);
  for (int i = 0; i < samples; ++i) {
    const uint64_t v = s.next(r);
    ASSERT_LT(v, n);
    ++count[v];
  }
  const uint64_t hottest = ycsb::fnvhash64(0) % n;
  const uint64_t second = ycsb::fnvhash64(1) % n;
  ASSERT_NE(hottest, second);
  const double zetan = ycsb::scrambled_zipfian_generator::zetan;
  // Item 0 and 1 of the underlying Zipfian, plus about 1/n of the remaining mass landing on the
  // same key.
  EXPECT_NEAR(count[hottest] / double{samples}, 1.0 / zetan + 1.0 / n, 0.003);
  EXPECT_NEAR(count[second] / double{samples}, std::pow(0.5, 0.99) / zetan + 1.0 / n, 0.002);
  EXPECT_EQ(static_cast<uint64_t>(std::max_element(count.begin(), count.end()) - count.begin()),
            hottest);
  // The hot items are scattered: they are not the low key numbers.
  EXPECT_LT(count[0] + count[1] + count[2], count[hottest]);
}

TEST(ScrambledZipfian, HonoursMin) {
  const ycsb::scrambled_zipfian_generator s{1000, 1009};
  ycsb::rng r{5};
  std::map<uint64_t, int> seen;
  for (int i = 0; i < 20000; ++i) ++seen[s.next(r)];
  EXPECT_EQ(seen.size(), 10u);
  EXPECT_EQ(seen.begin()->first, 1000u);
  EXPECT_EQ(seen.rbegin()->first, 1009u);
  EXPECT_EQ(s.min(), 1000u);
  EXPECT_EQ(s.max(), 1009u);
}

TEST(UniformLong, IsFlat) {
  constexpr int buckets = 100;
  constexpr int samples = 200000;
  const ycsb::uniform_long_generator u{0, buckets - 1};
  ycsb::rng r{6};
  std::vector<int> count(buckets, 0);
  for (int i = 0; i < samples; ++i) {
    const uint64_t v = u.next(r);
    ASSERT_LT(v, static_cast<uint64_t>(buckets));
    ++count[v];
  }
  const double expected = double{samples} / buckets;
  double chi2 = 0;
  for (const int c : count) chi2 += (c - expected) * (c - expected) / expected;
  // 99 degrees of freedom: mean 99, standard deviation 14.
  EXPECT_LT(chi2, 99 + 6 * 14.07);
  const ycsb::uniform_long_generator one{10, 10};
  for (int i = 0; i < 100; ++i) EXPECT_EQ(one.next(r), 10u);
  const ycsb::uniform_long_generator scan{1, 100};
  EXPECT_EQ(scan.lower(), 1u);
  EXPECT_EQ(scan.upper(), 100u);
}

TEST(SkewedLatest, FavoursTheMostRecentItems) {
  constexpr uint64_t last = 9999;
  constexpr int samples = 100000;
  ycsb::skewed_latest_generator latest{last};
  ycsb::rng r{8};
  int recent = 0;
  uint64_t oldest_half = 0;
  for (int i = 0; i < samples; ++i) {
    const uint64_t v = latest.next(r, last);
    ASSERT_GE(v, 1u);  // SkewedLatestGenerator never returns 0: max - nextLong(max), nextLong < max
    ASSERT_LE(v, last);
    recent += v > last - 10 ? 1 : 0;
    oldest_half += v < last / 2 ? 1 : 0;
  }
  // The 10 newest items of 9999: zeta(10)/zeta(9999) of the mass, about 30 %; a uniform draw gives
  // 0.1 %.
  EXPECT_GT(recent / double{samples}, 0.25);
  EXPECT_LT(oldest_half / double{samples}, 0.10);
}

TEST(SkewedLatest, FollowsTheGrowingCounter) {
  ycsb::skewed_latest_generator latest{999, ycsb::zeta(999, 0.99)};
  ycsb::rng r{9};
  ycsb::counter_generator counter{1000};
  EXPECT_EQ(counter.last_value(), 999u);
  int newest = 0;
  for (int i = 0; i < 5000; ++i) {
    const uint64_t inserted = counter.next();
    EXPECT_EQ(counter.last_value(), inserted);
    const uint64_t v = latest.next(r, counter.last_value());
    ASSERT_LE(v, inserted);
    newest += v == inserted ? 1 : 0;
  }
  EXPECT_EQ(counter.last_value(), 5999u);
  EXPECT_EQ(latest.zipfian().count_for_zeta(), 5999u);
  // The newest item is the most popular one, about 1/zeta(~3500) = 9.5 %.
  EXPECT_GT(newest, 5000 / 20);
}

}  // namespace
