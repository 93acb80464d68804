// bench/ycsb/baseline.h — the thread and oneTBB baselines of the ycsb subcommand: kv::olc_tree
// (optimistic lock coupling) driven by kv::thread_driver or kv::tbb_driver, which hand out the
// operation indices in chunks of the batch size. Each call executes one operation synchronously
// and checks its answer; each worker has its own scan buffer and progress counter.
//
// With `pin`, worker i runs on the CPU of tessera's worker i (common/placement.h), as tessera's do.
//
//   std::unique_ptr<store> s = std::make_unique<olc_store<kv::thread_driver>>(2, 500, true);
#pragma once

#include <algorithm>
#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "common/onetbb_placement.h"
#include "common/placement.h"
#include "common/timing.h"
#include "kv/batch.h"
#include "kv/olc_tree.h"
#include "kv/tbb_driver.h"
#include "kv/thread_driver.h"
#include "ycsb/ycsb.h"

namespace tessera::bench::ycsb_bench {

/// Executes `op` on `tree`; what is wrong with the answer (false if it is right). `scan_out` has
/// room for op.scan_length entries; `stable_keys` are the keys a scan must not skip (scan_error).
inline wrong_answer execute_checked(kv::olc_tree& tree, const ::ycsb::operation& op, expect e,
                                    kv::entry* scan_out,
                                    std::span<const std::uint64_t> stable_keys) {
  using ::ycsb::op_type;
  switch (op.type) {
    case op_type::insert: return presence_error(e, !tree.insert(op.key, op.value));
    case op_type::read: {
      const std::optional<kv::value_t> v = tree.lookup(op.key);
      return lookup_error(e, op, v.has_value(), v.value_or(0));
    }
    case op_type::update: return presence_error(e, tree.update(op.key, op.value));
    case op_type::scan:
      return scan_error(e, op, scan_out, tree.scan(op.key, op.scan_length, scan_out), stable_keys);
    case op_type::read_modify_write: {
      const std::optional<kv::value_t> v = tree.lookup(op.key);
      const char* read_error = lookup_error(e, op, v.has_value(), v.value_or(0));
      const char* write_error = presence_error(e, tree.update(op.key, op.value));
      return read_error != nullptr ? read_error : write_error;
    }
    case op_type::remove: return presence_error(e, tree.remove(op.key));
  }
  return "unknown operation type";
}

template <class Driver>
class olc_store final : public store {
 public:
  olc_store(unsigned workers, std::size_t batch, bool pin)
      : m_driver(make_driver(workers, batch, pin)), m_scan(workers) {
    if constexpr (std::is_same_v<Driver, kv::tbb_driver>)
      m_placement.emplace(m_driver.arena(), pin);
  }

  void create_tree() override { m_tree = std::make_unique<kv::olc_tree>(); }
  void destroy_tree() override { m_tree.reset(); }
  [[nodiscard]] const kv::node* root() const override { return m_tree->root(); }
  [[nodiscard]] std::size_t size() const override { return m_tree->size(); }

  double execute(const phase_data& phase, progress& meter, error_log& errors) override {
    for (auto& buffer : m_scan) buffer.resize(std::max<std::size_t>(phase.max_scan_length, 1));
    kv::olc_tree& tree = *m_tree;
    const ::ycsb::operation* ops = phase.ops.data();
    const expect* expected = phase.expected.data();
    const std::span<const std::uint64_t> stable_keys = phase.stable_keys;
    stopwatch clock;
    m_driver.run(phase.ops.size(), [&](std::size_t i, kv::worker_id w) {
      const unsigned self = kv::to_index(w);
      if (const wrong_answer what = execute_checked(tree, ops[i], expected[i], m_scan[self].data(),
                                                    stable_keys)) [[unlikely]] {
        errors.record(i, ops[i], what);
      }
      meter.tick(self);
    });
    const double seconds = clock.seconds();
    meter.require_all_done();
    return seconds;
  }

 private:
  static Driver make_driver(unsigned workers, std::size_t batch, bool pin) {
    if constexpr (std::is_same_v<Driver, kv::thread_driver>) {
      if (pin)
        return Driver(workers, batch, [](kv::worker_id w) { pin_worker_thread(kv::to_index(w)); });
    }
    return Driver(workers, batch);
  }

  Driver m_driver;
  std::optional<onetbb_placement> m_placement;  // kv::tbb_driver: slots pinned like tessera's
  std::unique_ptr<kv::olc_tree> m_tree;
  std::vector<std::vector<kv::entry>> m_scan;  ///< per worker
};

}  // namespace tessera::bench::ycsb_bench
