// The external competitors of the ycsb subcommand, built only when CMake is given
// TESSERA_INDEX_MICROBENCH_DIR (a checkout of github.com/wangziqi2016/index-microbench, kept
// outside this repository and never committed): its BTreeOLC (Leis et al.'s B+-tree with
// optimistic lock coupling, 4 KiB nodes) and ART-OLC (the adaptive radix tree with optimistic lock
// coupling), driven exactly as the `threads` baseline is (kv::thread_driver, the same chunks,
// pinned alike) on the same operations, each answer checked.
//
// They are wrapped as index-microbench's own harness (index.h) wraps them: BTreeOLC stores the
// value and its insert is an upsert; ART-OLC stores no values but a TID that points at an 8-byte
// copy of the key (index-microbench's `values[i] = key; insert(key, &values[i])`), so here it
// points at the `key` field of the operation that wrote it, and a read is right if it finds a TID
// whose key is the one looked up. Neither reports whether an upsert found its key, so an update's
// presence is checked after the phase: every loaded key is looked up and must be there (for
// BTreeOLC with the value the phase left: updated_value_of(key) if the phase updated it, else
// value_of(key)). Scans and removes are refused (bench_failure): the comparison is workloads A,
// B, C and F.
#include <sched.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ARTOLC/Tree.h"
#include "BTreeOLC/BTreeOLC.h"
#include "common/placement.h"
#include "common/timing.h"
#include "kv/thread_driver.h"
#include "ycsb/ycsb.h"

namespace tessera::bench::ycsb_bench {

namespace {

using ::ycsb::op_type;
using ::ycsb::operation;

/// BTreeOLC as index-microbench runs it: BTree<uint64_t, uint64_t>, insert = upsert.
class btreeolc_index {
 public:
  static constexpr const char* name = "btreeolc";
  static constexpr bool stores_values = true;

  btreeolc_index() = default;
  btreeolc_index(const btreeolc_index&) = delete;
  btreeolc_index& operator=(const btreeolc_index&) = delete;
  ~btreeolc_index() { free_subtree(m_tree.root.load()); }  // BTreeOLC frees nothing itself

  void begin_worker(unsigned /*worker*/) {}
  void upsert(const operation& op, unsigned /*worker*/) { m_tree.insert(op.key, op.value); }
  /// The value stored for k, if found.
  std::optional<std::uint64_t> lookup(std::uint64_t k, unsigned /*worker*/) {
    std::uint64_t value = 0;
    // BTreeOLC's lookup leaves its result flag uninitialized when the key is absent (reads of
    // loaded keys only: workloads A, B, C, F), so the found key is confirmed by the value too.
    const bool found = m_tree.lookup(k, value);
    if (!found) return std::nullopt;
    return value;
  }

 private:
  using leaf_t = btreeolc::BTreeLeaf<std::uint64_t, std::uint64_t>;
  using inner_t = btreeolc::BTreeInner<std::uint64_t>;

  static void free_subtree(btreeolc::NodeBase* n) {
    if (n == nullptr) return;
    if (n->type == btreeolc::PageType::BTreeLeaf) {
      delete static_cast<leaf_t*>(n);
      return;
    }
    auto* inner = static_cast<inner_t*>(n);
    for (unsigned i = 0; i <= inner->count; ++i) free_subtree(inner->children[i]);
    delete inner;
  }

  btreeolc::BTree<std::uint64_t, std::uint64_t> m_tree;
};

/// ART-OLC as index-microbench runs it: the TID points at an 8-byte copy of the key.
class artolc_index {
 public:
  static constexpr const char* name = "artolc";
  static constexpr bool stores_values = false;

  explicit artolc_index(unsigned workers)
      : m_tree([](TID tid, Key& key) { key.setInt(*reinterpret_cast<const std::uint64_t*>(tid)); }),
        m_info(workers) {}

  /// Each worker keeps one ThreadInfo (epoch membership) per tree; index-microbench's harness
  /// asks the tree for it per operation, which costs a thread-local lookup more.
  void begin_worker(unsigned worker) {
    if (!m_info[worker]) m_info[worker].emplace(m_tree.getThreadInfo());
  }
  void upsert(const operation& op, unsigned worker) {
    Key key;
    key.setInt(op.key);
    m_tree.insert(key, reinterpret_cast<TID>(&op.key), *m_info[worker]);
  }
  /// value_of(k) if a TID pointing at k was found (ART stores no values), 0 if another key's.
  std::optional<std::uint64_t> lookup(std::uint64_t k, unsigned worker) {
    Key key;
    key.setInt(k);
    const TID tid = m_tree.lookup(key, *m_info[worker]);
    if (tid == 0) return std::nullopt;
    return *reinterpret_cast<const std::uint64_t*>(tid) == k ? ::ycsb::value_of(k) : 0;
  }

 private:
  ART_OLC::Tree m_tree;
  std::vector<std::optional<ART::ThreadInfo>> m_info;  ///< per worker
};

template <class Index>
class external_store final : public store {
 public:
  external_store(unsigned workers, std::size_t batch, bool pin)
      : m_workers(workers),
        m_driver(workers, batch, [pin](kv::worker_id w) {
          if (pin) pin_worker_thread(kv::to_index(w));
        }) {}

  void create_tree() override {
    if constexpr (std::is_constructible_v<Index, unsigned>) {
      m_index = std::make_unique<Index>(m_workers);
    } else {
      m_index = std::make_unique<Index>();
    }
    m_loaded = nullptr;
  }
  void destroy_tree() override { m_index.reset(); }
  [[nodiscard]] const kv::node* root() const override { return nullptr; }
  [[nodiscard]] std::size_t size() const override { return 0; }

  double execute(const phase_data& phase, progress& meter, error_log& errors) override {
    for (const operation& op : phase.ops) {
      if (op.type == op_type::scan || op.type == op_type::remove)
        throw bench_failure(std::string(Index::name) +
                            ": only inserts, reads, updates and read-modify-writes are run "
                            "(workloads a, b, c, f)");
    }
    if (m_loaded == nullptr) m_loaded = &phase;  // the first phase on a fresh tree: the load
    Index& index = *m_index;
    const operation* ops = phase.ops.data();
    const expect* expected = phase.expected.data();
    stopwatch clock;
    m_driver.run(phase.ops.size(), [&](std::size_t i, kv::worker_id w) {
      const unsigned self = kv::to_index(w);
      index.begin_worker(self);
      const operation& op = ops[i];
      const char* what = nullptr;
      switch (op.type) {
        case op_type::insert:
        case op_type::update: index.upsert(op, self); break;
        case op_type::read: {
          const std::optional<std::uint64_t> v = index.lookup(op.key, self);
          what = lookup_error(expected[i], op, v.has_value(), v.value_or(0));
          break;
        }
        case op_type::read_modify_write: {
          const std::optional<std::uint64_t> v = index.lookup(op.key, self);
          what = lookup_error(expected[i], op, v.has_value(), v.value_or(0));
          index.upsert(op, self);
          break;
        }
        default: what = "operation not supported"; break;
      }
      if (what != nullptr) [[unlikely]] {
        errors.record(i, op, what);
      }
      meter.tick(self);
    });
    const double seconds = clock.seconds();
    meter.require_all_done();
    return seconds;
  }

  /// Every loaded key looked up (on the calling thread, as worker 0) after the phase.
  wrong_answer check_by_lookups(const phase_data& phase, std::uint64_t& keys) const override {
    keys = 0;
    if (m_loaded == nullptr) return "no phase ran on this tree";
    Index& index = *m_index;
    index.begin_worker(0);
    const std::span<const std::uint64_t> updated = phase.updated_keys;
    for (const operation& op : m_loaded->ops) {
      const std::optional<std::uint64_t> v = index.lookup(op.key, 0);
      if (!v) return wrong_answer::naming("loaded key", op.key, " is missing after the phase");
      ++keys;
      if constexpr (Index::stores_values) {
        const bool was_updated = std::binary_search(updated.begin(), updated.end(), op.key);
        if (*v != (was_updated ? ::ycsb::updated_value_of(op.key) : ::ycsb::value_of(op.key)))
          return wrong_answer::naming("key", op.key, " holds the wrong value after the phase");
      } else if (*v != ::ycsb::value_of(op.key)) {
        return wrong_answer::naming("key", op.key, " has a TID that points at another key");
      }
    }
    return nullptr;
  }

 private:
  unsigned m_workers;
  kv::thread_driver m_driver;
  std::unique_ptr<Index> m_index;
  const phase_data* m_loaded = nullptr;  ///< the load phase of the current tree
};

}  // namespace

std::unique_ptr<store> make_btreeolc_store(unsigned workers, std::size_t batch, bool pin) {
  return std::make_unique<external_store<btreeolc_index>>(workers, batch, pin);
}

std::unique_ptr<store> make_artolc_store(unsigned workers, std::size_t batch, bool pin) {
  return std::make_unique<external_store<artolc_index>>(workers, batch, pin);
}

}  // namespace tessera::bench::ycsb_bench
