// The ycsb subcommand's workload: both phases generated (ycsb::workload_generator) or replayed
// from traces, and every operation classified by the answer it must give (see verify.h).
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "ycsb/trace.h"
#include "ycsb/ycsb.h"

namespace tessera::bench::ycsb_bench {

namespace {

using ::ycsb::op_type;
using ::ycsb::operation;

/// Scans in a trace are limited so that the per-request result buffers stay small.
constexpr std::uint32_t max_trace_scan_length = 4096;

/// How often a key occurs in each role; the counts saturate at 2 ("more than once").
struct key_roles {
  std::uint8_t loaded = 0;
  std::uint8_t inserted = 0;  ///< by the run phase
  std::uint8_t removed = 0;   ///< by the run phase
  bool used = false;          ///< table slot occupied
};

void bump(std::uint8_t& count) noexcept {
  if (count < 2) ++count;
}

/// Open addressing, linear probing, at most two thirds full: `max_keys` is a hard bound.
class key_table {
 public:
  explicit key_table(std::size_t max_keys) {
    std::size_t capacity = 16;
    while (capacity < max_keys + max_keys / 2) capacity *= 2;
    m_keys.resize(capacity);
    m_roles.resize(capacity);
    m_mask = capacity - 1;
  }

  key_roles& operator[](std::uint64_t key) {
    for (std::size_t i = slot(key);; i = (i + 1) & m_mask) {
      if (!m_roles[i].used) {
        m_roles[i].used = true;
        m_keys[i] = key;
        return m_roles[i];
      }
      if (m_keys[i] == key) return m_roles[i];
    }
  }

  [[nodiscard]] const key_roles* find(std::uint64_t key) const noexcept {
    for (std::size_t i = slot(key);; i = (i + 1) & m_mask) {
      if (!m_roles[i].used) return nullptr;
      if (m_keys[i] == key) return &m_roles[i];
    }
  }

  template <class F>
  void for_each(F&& f) const {
    for (const key_roles& r : m_roles)
      if (r.used) f(r);
  }

 private:
  /// MurmurHash3's fmix64: trace keys may be dense integers.
  [[nodiscard]] std::size_t slot(std::uint64_t k) const noexcept {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    k *= 0xc4ceb3fe1a85ec53ULL;
    k ^= k >> 33;
    return static_cast<std::size_t>(k) & m_mask;
  }

  std::vector<std::uint64_t> m_keys;
  std::vector<key_roles> m_roles;
  std::size_t m_mask = 0;
};

/// What an operation on a key with these roles must answer.
expect classify(op_type type, const key_roles& r) noexcept {
  const bool order_dependent = type == op_type::insert   ? r.removed > 0 || r.inserted > 1
                               : type == op_type::remove ? r.inserted > 0 || r.removed > 1
                                                         : r.inserted > 0 || r.removed > 0;
  if (order_dependent) return expect::either;
  return r.loaded > 0 ? expect::present : expect::absent;
}

enum class trace_phase : std::uint8_t { load, run };

/// ycsb::read_trace plus the benchmark's own limits, each reported with its line number.
std::vector<operation> read_trace_file(const std::string& path, trace_phase phase) {
  std::ifstream in(path);
  if (!in.is_open())
    throw ::ycsb::trace_error(path, 0, std::string("cannot open file: ") + std::strerror(errno));
  std::vector<operation> ops;
  std::string line;
  std::uint64_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    const std::optional<operation> op = ::ycsb::parse_trace_line(line, path, number);
    if (!op) continue;
    if (phase == trace_phase::load && op->type != op_type::insert)
      throw ::ycsb::trace_error(path, number,
                                std::string("a load trace may only hold INSERT lines, not ") +
                                    ::ycsb::to_string(op->type));
    if (op->type == op_type::scan && op->scan_length > max_trace_scan_length)
      throw ::ycsb::trace_error(path, number,
                                "SCAN of " + std::to_string(op->scan_length) +
                                    " records, more than the benchmark's limit of " +
                                    std::to_string(max_trace_scan_length));
    ops.push_back(*op);
  }
  if (in.bad()) throw ::ycsb::trace_error(path, number, "read error");
  if (ops.empty()) throw ::ycsb::trace_error(path, number, "holds no operations");
  return ops;
}

std::uint32_t max_scan_length(const std::vector<operation>& ops) {
  std::uint32_t longest = 0;
  for (const operation& op : ops)
    if (op.type == op_type::scan) longest = std::max(longest, op.scan_length);
  return longest;
}

/// Sorts `keys` ascending and drops duplicates.
void sort_unique(std::vector<std::uint64_t>& keys) {
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
}

/// Fills `expected`, `keys_after`, `max_scan_length`, `stable_keys`, `updated_keys` and
/// `unsettled_keys` of both phases. With a
/// generated run, the table holds only the run's inserts: every other key the generator names was
/// loaded.
void classify_phases(workload_data& w, bool generated_run, std::uint64_t generated_records) {
  std::size_t role_ops = generated_run ? 0 : w.load.ops.size();
  for (const operation& op : w.run.ops)
    role_ops += op.type == op_type::insert || op.type == op_type::remove ? 1 : 0;
  key_table table(role_ops);
  if (!generated_run)
    for (const operation& op : w.load.ops) bump(table[op.key].loaded);
  for (const operation& op : w.run.ops) {
    if (op.type == op_type::insert) bump(table[op.key].inserted);
    if (op.type == op_type::remove) bump(table[op.key].removed);
  }
  const key_roles not_in_table{.loaded = static_cast<std::uint8_t>(generated_run ? 1 : 0)};
  auto roles_of = [&](std::uint64_t key) -> const key_roles& {
    const key_roles* r = table.find(key);
    return r != nullptr ? *r : not_in_table;
  };

  w.load.expected.resize(w.load.ops.size());
  for (std::size_t i = 0; i < w.load.ops.size(); ++i)
    w.load.expected[i] = roles_of(w.load.ops[i].key).loaded > 1 ? expect::either : expect::absent;
  w.run.expected.resize(w.run.ops.size());
  for (std::size_t i = 0; i < w.run.ops.size(); ++i)
    w.run.expected[i] = classify(w.run.ops[i].type, roles_of(w.run.ops[i].key));

  std::uint64_t loaded = generated_run ? generated_records : 0;
  std::uint64_t added = 0;
  std::uint64_t dropped = 0;
  bool order_dependent = false;
  table.for_each([&](const key_roles& r) {
    loaded += !generated_run && r.loaded > 0 ? 1 : 0;
    added += r.inserted > 0 && r.loaded == 0 ? 1 : 0;
    dropped += r.removed > 0 && r.loaded > 0 ? 1 : 0;
    order_dependent = order_dependent || (r.inserted > 0 && r.removed > 0);
  });
  w.load.keys_after = loaded;
  if (!order_dependent) w.run.keys_after = loaded + added - dropped;
  w.load.max_scan_length = 0;
  w.run.max_scan_length = max_scan_length(w.run.ops);

  // The run's stable keys: loaded and neither inserted nor removed by it, so present from its
  // first operation to its last. The load phase has no scans and needs none.
  w.load.stable_keys.clear();
  w.run.stable_keys.clear();
  if (w.run.max_scan_length > 0) {
    std::vector<std::uint64_t>& stable = w.run.stable_keys;
    stable.reserve(w.load.ops.size());
    for (const operation& op : w.load.ops) {
      const key_roles& r = roles_of(op.key);
      if (r.inserted == 0 && r.removed == 0) stable.push_back(op.key);
    }
    sort_unique(stable);  // a trace may repeat a key
  }

  // The content after each phase. The load phase inserts every key with its loaded value (a
  // load trace holds INSERT lines only); the run leaves the keys it updates, stable ones, with
  // the updated value, and the keys it inserts or removes in a state that depends on the order.
  w.load.updated_keys.clear();
  w.load.unsettled_keys.clear();
  w.run.updated_keys.clear();
  w.run.unsettled_keys.clear();
  for (const operation& op : w.run.ops) {
    switch (op.type) {
      case op_type::update:
      case op_type::read_modify_write: {
        const key_roles& r = roles_of(op.key);
        if (r.loaded > 0 && r.inserted == 0 && r.removed == 0) w.run.updated_keys.push_back(op.key);
        break;
      }
      case op_type::insert:
      case op_type::remove: w.run.unsettled_keys.push_back(op.key); break;
      default: break;
    }
  }
  sort_unique(w.run.updated_keys);
  sort_unique(w.run.unsettled_keys);
  w.load.settled_count = loaded;
  std::uint64_t loaded_unsettled = 0;
  for (const std::uint64_t k : w.run.unsettled_keys) loaded_unsettled += roles_of(k).loaded > 0;
  w.run.settled_count = loaded - loaded_unsettled;
}

}  // namespace

workload_data prepare_workload(const workload_options& options) {
  if (!options.load_file.empty() && options.run_file.empty())
    throw std::invalid_argument(
        "a load trace needs a run trace (the generated run names "
        "generated keys)");
  workload_data w;
  const bool generated_run = options.run_file.empty();
  if (options.load_file.empty()) {
    const ::ycsb::workload_generator gen({.workload = options.workload,
                                          .record_count = options.records,
                                          .operation_count = options.operations,
                                          .request_distribution = options.distribution,
                                          .seed = options.seed});
    w.load.ops = gen.load_operations();
    if (generated_run) {
      w.run.ops = gen.run_operations();
      w.workload = std::string(1, options.workload);
      w.distribution = ::ycsb::to_string(gen.request_distribution());
      w.description = gen.describe();
    } else {
      w.description = std::to_string(options.records) + " generated records, run trace '" +
                      options.run_file + "'";
    }
  } else {
    w.load.ops = read_trace_file(options.load_file, trace_phase::load);
    w.description = "load trace '" + options.load_file + "', run trace '" + options.run_file + "'";
  }
  if (!generated_run) {
    w.run.ops = read_trace_file(options.run_file, trace_phase::run);
    w.workload = "trace";
    w.distribution = "trace";
  }
  classify_phases(w, generated_run, options.records);
  return w;
}

}  // namespace tessera::bench::ycsb_bench
