// The YCSB core workloads (site.ycsb.workloads.CoreWorkload); see ycsb/generator.h for what is
// YCSB's and what is this port's (seeded rng, disjoint per-thread streams).
#include "ycsb/generator.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <utility>

namespace ycsb {

const char* to_string(distribution d) noexcept {
  switch (d) {
    case distribution::uniform: return "uniform";
    case distribution::zipfian: return "zipfian";
    case distribution::latest: return "latest";
  }
  return "?";
}

std::optional<distribution> parse_distribution(std::string_view name) noexcept {
  if (name == "uniform") return distribution::uniform;
  if (name == "zipfian") return distribution::zipfian;
  if (name == "latest") return distribution::latest;
  return std::nullopt;
}

namespace {

char normalise_workload(char workload) {
  const char w = static_cast<char>(std::tolower(static_cast<unsigned char>(workload)));
  if (w < 'a' || w > 'f') {
    throw std::invalid_argument(std::string("ycsb: unknown workload '") + workload +
                                "' (expected a..f)");
  }
  return w;
}

}  // namespace

// The proportions of YCSB's workloads/workloada .. workloadf property files.
op_mix op_mix::for_workload(char workload) {
  switch (normalise_workload(workload)) {
    case 'a': return op_mix{.read = 0.5, .update = 0.5};            // update heavy
    case 'b': return op_mix{.read = 0.95, .update = 0.05};          // read mostly
    case 'c': return op_mix{.read = 1.0};                           // read only
    case 'd': return op_mix{.read = 0.95, .insert = 0.05};          // read latest
    case 'e': return op_mix{.insert = 0.05, .scan = 0.95};          // short ranges
    default: return op_mix{.read = 0.5, .read_modify_write = 0.5};  // 'f': read-modify-write
  }
}

distribution default_distribution(char workload) {
  return normalise_workload(workload) == 'd' ? distribution::latest : distribution::zipfian;
}

std::string to_string(const op_mix& mix) {
  const double total = mix.total() > 0 ? mix.total() : 1.0;
  char buffer[160];
  std::snprintf(buffer, sizeof buffer, "read %.2f update %.2f insert %.2f scan %.2f rmw %.2f",
                mix.read / total, mix.update / total, mix.insert / total, mix.scan / total,
                mix.read_modify_write / total);
  return buffer;
}

// -------------------------------------------------------------------------------------------------
// workload_generator
// -------------------------------------------------------------------------------------------------

workload_generator::workload_generator(const workload_spec& spec)
    : m_spec{spec},
      m_mix{spec.mix ? *spec.mix : op_mix::for_workload(spec.workload)},
      m_distribution{spec.request_distribution ? *spec.request_distribution
                                               : default_distribution(spec.workload)} {
  normalise_workload(m_spec.workload);
  if (m_spec.record_count == 0)
    throw std::invalid_argument("ycsb: record_count must be at least 1");
  if (m_distribution == distribution::latest && m_spec.record_count < 2) {
    throw std::invalid_argument("ycsb: the latest distribution needs record_count >= 2");
  }
  if (m_spec.min_scan_length > m_spec.max_scan_length) {
    throw std::invalid_argument("ycsb: min_scan_length > max_scan_length");
  }
  for (const double p :
       {m_mix.read, m_mix.update, m_mix.insert, m_mix.scan, m_mix.read_modify_write}) {
    if (!std::isfinite(p) || p < 0)
      throw std::invalid_argument("ycsb: proportions must be finite and >= 0");
  }
  if (!(m_mix.total() > 0)) throw std::invalid_argument("ycsb: all proportions are zero");

  if (m_distribution == distribution::zipfian) {
    // CoreWorkload.init: expectednewkeys = (int) ((opcount) * insertproportion * 2.0); // 2 is
    // fudge factor
    const double expected = static_cast<double>(m_spec.operation_count) * m_mix.insert * 2.0;
    const double limit = static_cast<double>(UINT64_MAX / 4 - m_spec.record_count);
    m_expected_new_keys =
        expected < limit ? static_cast<uint64_t>(expected) : static_cast<uint64_t>(limit);
  } else if (m_distribution == distribution::latest) {
    // SkewedLatestGenerator's ZipfianGenerator(basis.lastValue()) with lastValue = record_count -
    // 1.
    m_latest_zetan = zeta(m_spec.record_count - 1, zipfian_generator::zipfian_constant);
  }
}

std::string workload_generator::describe() const {
  char buffer[160];
  std::snprintf(buffer, sizeof buffer, "workload %c: %s, %llu records, %llu operations, ",
                normalise_workload(m_spec.workload), to_string(m_distribution),
                static_cast<unsigned long long>(m_spec.record_count),
                static_cast<unsigned long long>(m_spec.operation_count));
  return buffer + to_string(m_mix);
}

void workload_generator::fill_load(std::span<operation> out, uint64_t first_index) const {
  if (first_index > m_spec.record_count || out.size() > m_spec.record_count - first_index) {
    throw std::out_of_range("ycsb: fill_load past record_count");
  }
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = load_operation(first_index + i);
}

std::vector<operation> workload_generator::load_operations() const {
  std::vector<operation> ops(m_spec.record_count);
  fill_load(ops, 0);
  return ops;
}

uint64_t workload_generator::stream_size(uint32_t thread_index,
                                         uint32_t thread_count) const noexcept {
  if (thread_count == 0 || thread_index >= thread_count) return 0;
  return m_spec.operation_count / thread_count +
         (thread_index < m_spec.operation_count % thread_count ? 1 : 0);
}

operation_stream workload_generator::run_stream(uint32_t thread_index,
                                                uint32_t thread_count) const {
  if (thread_count == 0 || thread_index >= thread_count) {
    throw std::invalid_argument("ycsb: run_stream needs thread_index < thread_count");
  }
  return operation_stream{*this, thread_index, thread_count};
}

std::vector<operation> workload_generator::run_operations(uint32_t thread_index,
                                                          uint32_t thread_count) const {
  operation_stream stream = run_stream(thread_index, thread_count);
  std::vector<operation> ops(stream.size());
  stream.fill(ops);
  return ops;
}

// -------------------------------------------------------------------------------------------------
// operation_stream
// -------------------------------------------------------------------------------------------------

namespace {

// The seed of stream t: both inputs go through a full 64-bit finaliser so that nearby seeds and
// nearby thread indices give unrelated xoshiro states.
uint64_t stream_seed(uint64_t seed, uint32_t thread_index) noexcept {
  uint64_t s = seed;
  uint64_t mixed = splitmix64(s);
  uint64_t t = 0x6A09E667F3BCC909ULL ^ (static_cast<uint64_t>(thread_index) << 1);
  mixed ^= splitmix64(t);
  return mixed;
}

}  // namespace

operation_stream::operation_stream(const workload_generator& gen, uint32_t thread_index,
                                   uint32_t thread_count)
    : m_rng{stream_seed(gen.m_spec.seed, thread_index)},
      m_distribution{gen.m_distribution},
      m_ordered_inserts{gen.m_spec.ordered_inserts},
      m_thread_index{thread_index},
      m_thread_count{thread_count},
      m_record_count{gen.m_spec.record_count},
      m_size{gen.stream_size(thread_index, thread_count)},
      // CoreWorkload.init: keychooser = new UniformLongGenerator(insertstart, insertstart +
      // insertcount - 1)
      m_uniform{0, gen.m_spec.record_count - 1},
      // keychooser = new ScrambledZipfianGenerator(insertstart, insertstart + insertcount +
      // expectednewkeys)
      m_scrambled{0, gen.m_spec.record_count + gen.m_expected_new_keys},
      // keychooser = new SkewedLatestGenerator(transactioninsertkeysequence); lastValue() =
      // recordcount - 1. (Unused placeholder for the other distributions, which may have
      // record_count 1.)
      m_latest{gen.m_distribution == distribution::latest
                   ? skewed_latest_generator{gen.m_spec.record_count - 1, gen.m_latest_zetan}
                   : skewed_latest_generator{1, 1.0}},
      // scanlength = new UniformLongGenerator(minscanlength, maxscanlength)
      m_scan_length{gen.m_spec.min_scan_length, gen.m_spec.max_scan_length} {
  // CoreWorkload.createOperationGenerator: values added in this order, only those with proportion >
  // 0.
  const op_mix& mix = gen.m_mix;
  const double sum = mix.total();
  const std::pair<double, op_type> entries[] = {
      {mix.read, op_type::read},
      {mix.update, op_type::update},
      {mix.insert, op_type::insert},
      {mix.scan, op_type::scan},
      {mix.read_modify_write, op_type::read_modify_write}};
  for (const auto& [weight, type] : entries) {
    if (weight > 0) {
      m_weight[m_choice_count] = weight / sum;  // DiscreteGenerator.nextValue: pw = p.weight / sum
      m_choice[m_choice_count] = type;
      ++m_choice_count;
    }
  }
}

// DiscreteGenerator.nextValue. Where YCSB would throw "oops" (rounding leaves val >= the last pw),
// the last value is returned.
op_type operation_stream::choose_op() noexcept {
  double val = m_rng.next_double();
  for (uint32_t i = 0; i + 1 < m_choice_count; ++i) {
    if (val < m_weight[i]) return m_choice[i];
    val -= m_weight[i];
  }
  return m_choice[m_choice_count - 1];
}

// CoreWorkload.nextKeynum with transactioninsertkeysequence.lastValue() = visible_count() - 1.
uint64_t operation_stream::choose_visible() noexcept {
  const uint64_t last_value = visible_count() - 1;
  switch (m_distribution) {
    case distribution::uniform:
      return m_uniform.next(m_rng);  // never beyond record_count - 1 <= last_value
    case distribution::latest:
      return m_latest.next(m_rng, last_value);  // SkewedLatestGenerator: in [1, last_value]
    case distribution::zipfian: break;
  }
  uint64_t keynum;
  do {
    keynum = m_scrambled.next(m_rng);
  } while (keynum > last_value);
  return keynum;
}

uint64_t operation_stream::keynum_of_visible(uint64_t visible) const noexcept {
  if (visible < m_record_count) return visible;
  return m_record_count + m_thread_index + (visible - m_record_count) * m_thread_count;
}

// CoreWorkload.doTransaction: choose the operation, then its key (then, for a scan, the length).
operation operation_stream::next() noexcept {
  ++m_produced;
  operation op{};
  op.type = choose_op();
  if (op.type == op_type::insert) {
    // doTransactionInsert: keynum = transactioninsertkeysequence.nextValue(), then
    // acknowledge(keynum).
    op.key = key_of_keynum(keynum_of_visible(m_record_count + m_inserted));
    op.value = value_of(op.key);
    ++m_inserted;
    return op;
  }
  op.key = key_of_keynum(keynum_of_visible(choose_visible()));
  switch (op.type) {
    case op_type::update:
    case op_type::read_modify_write: op.value = updated_value_of(op.key); break;
    case op_type::scan:
      // scanlength.nextValue().intValue()
      op.scan_length = static_cast<uint32_t>(m_scan_length.next(m_rng));
      break;
    default: break;
  }
  return op;
}

std::size_t operation_stream::fill(std::span<operation> out) noexcept {
  const std::size_t n =
      out.size() < remaining() ? out.size() : static_cast<std::size_t>(remaining());
  for (std::size_t i = 0; i < n; ++i) out[i] = next();
  return n;
}

}  // namespace ycsb
