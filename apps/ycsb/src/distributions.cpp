// Ports of the YCSB generators declared in ycsb/distributions.h; see there for the Java sources.
#include "ycsb/distributions.h"

#include <cmath>
#include <stdexcept>

namespace ycsb {

// ZipfianGenerator.zetastatic(st, n, theta, initialsum): the same loop, the same summation order.
double zeta(uint64_t st, uint64_t n, double theta, double initial_sum) noexcept {
  double sum = initial_sum;
  for (uint64_t i = st; i < n; ++i) sum += 1 / std::pow(static_cast<double>(i + 1), theta);
  return sum;
}

namespace {

uint64_t checked_items(uint64_t min, uint64_t max) {
  if (max < min) throw std::invalid_argument("ycsb::zipfian_generator: max < min");
  if (max - min + 1 == 0) throw std::invalid_argument("ycsb::zipfian_generator: 2^64 items");
  return max - min + 1;
}

}  // namespace

zipfian_generator::zipfian_generator(uint64_t min, uint64_t max, double theta)
    : zipfian_generator(min, max, theta, zeta(checked_items(min, max), theta)) {}

// ZipfianGenerator(min, max, zipfianconstant, zetan).
zipfian_generator::zipfian_generator(uint64_t min, uint64_t max, double theta, double zetan)
    : m_items{checked_items(min, max)},
      m_base{min},
      m_theta{theta},
      m_zeta2theta{zeta(2, theta)},
      m_alpha{1.0 / (1.0 - theta)},
      m_zetan{zetan},
      m_eta{(1 - std::pow(2.0 / static_cast<double>(m_items), 1 - theta)) /
            (1 - m_zeta2theta / zetan)},
      m_half_pow_theta{std::pow(0.5, theta)},
      m_count_for_zeta{m_items} {
  if (!(theta > 0.0 && theta < 1.0))
    throw std::invalid_argument("ycsb::zipfian_generator: theta not in (0, 1)");
}

// nextLong's "itemcount > countforzeta" branch: extend zeta, recompute eta with the original item
// count.
void zipfian_generator::grow(uint64_t itemcount) noexcept {
  m_zetan = zeta(m_count_for_zeta, itemcount, m_theta, m_zetan);
  m_count_for_zeta = itemcount;
  m_eta = (1 - std::pow(2.0 / static_cast<double>(m_items), 1 - m_theta)) /
          (1 - m_zeta2theta / m_zetan);
}

// ScrambledZipfianGenerator(min, max, 0.99): gen = new ZipfianGenerator(0, ITEM_COUNT, 0.99,
// ZETAN).
scrambled_zipfian_generator::scrambled_zipfian_generator(uint64_t min, uint64_t max)
    : m_gen{0, item_count, used_zipfian_constant, zetan}, m_min{min}, m_itemcount{max - min + 1} {
  if (max < min || m_itemcount == 0)
    throw std::invalid_argument("ycsb::scrambled_zipfian_generator: bad range");
}

namespace {

uint64_t checked_last_value(uint64_t last_value) {
  if (last_value == 0)
    throw std::invalid_argument("ycsb::skewed_latest_generator: needs a last value >= 1");
  return last_value;
}

}  // namespace

// SkewedLatestGenerator(basis): zipfian = new ZipfianGenerator(basis.lastValue()), i.e. (0,
// lastValue - 1).
skewed_latest_generator::skewed_latest_generator(uint64_t last_value)
    : m_zipfian{0, checked_last_value(last_value) - 1} {}

skewed_latest_generator::skewed_latest_generator(uint64_t last_value, double zetan)
    : m_zipfian{0, checked_last_value(last_value) - 1, zipfian_generator::zipfian_constant, zetan} {
}

}  // namespace ycsb
