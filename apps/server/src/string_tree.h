#pragma once
// server::string_tree — the server's ordered store: binary-safe byte-string keys and values,
// built out of tessera tasks beside kv::task_tree (whose 64-bit keys, node layout and YCSB
// figures stay as they are).
//
// Shape: a B-link tree of two levels. Leaves are tessera resources (reader/writer latch: a leaf
// owns memory its writers free, so optimistic readers are ruled out, tessera/resource.h); each
// holds up to `leaf_capacity` sorted slots and covers [low, high) with a right link, as
// kv::node does. Above them a directory (separators and leaf pointers) that is immutable once
// published: a split publishes a copy with the new separator and retires the old one through
// the runtime's epochs, so a task reads the directory without any latch. A stale directory
// routes a key to a leaf left of the right one; the right links lead on (B-link), so splits
// need no coordination with operations in flight. Leaves are never merged or freed before the
// tree is (FLUSHALL empties them).
//
// A request (server::key_op) becomes one task: it reads the directory, annotates the leaf
// (reader or writer), follows right links while the key is at or beyond the leaf's high key,
// runs the request's `apply` under the leaf's latch, then, with the latch released (the task
// returns itself without data: it runs next on its worker, nothing queued), calls `on_done`.
//
// Values live out of line (server::value_blob, a tessera resource): an overwrite or delete
// retires the old value (rt.retire_resource), freed once no task that could hold it is left.
// Expiry: a slot may carry a deadline (milliseconds of a steady clock); leaf_access never
// returns an expired slot (lazy check) and a writer removes it; sweep() walks the leaves as one
// task and removes the expired ones (background reclamation).
//
// Thread-safety: submit() and sweep() from tasks only (the directory's epoch protection needs a
// running operation); counters are relaxed atomics (approximate while requests run).
//
//   server::key_op op{.key = "k", .writes = true, .apply = put_fn, .on_done = done_fn};
//   tree.submit(op, ctx);   // apply(op, leaf_access&) under the latch, then on_done(op)

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <tessera/tessera.h>

namespace server {

/// A value, out of line: a resource so that it is freed through the epochs.
struct value_blob {
  std::string bytes;
};

struct slot {
  std::string key;
  value_blob* value = nullptr;
  std::int64_t expire_ms = 0;  ///< deadline on the steady clock in ms; 0: none
};

/// One leaf: sorted slots, the exclusive high key (none: +infinity) and the right sibling.
struct leaf {
  std::vector<slot> slots;
  std::string high;
  bool high_infinite = true;
  leaf* right = nullptr;
};

/// The directory: leaves[i] covers [seps[i-1], seps[i]); immutable once published.
struct directory {
  std::vector<std::string> seps;
  std::vector<leaf*> leaves;
};

class string_tree;

/// What apply() may do with the leaf that covers its key (writes only for writers).
class leaf_access {
 public:
  leaf_access(string_tree& tree, leaf& l, bool writes, std::int64_t now_ms) noexcept
      : m_tree(&tree), m_leaf(&l), m_writes(writes), m_now(now_ms) {}

  /// The live slot of `key`, or nullptr (absent or expired; a writer removes an expired one).
  slot* find(std::string_view key);
  /// Stores `bytes` under `key` (new slot or new value for the old one), with deadline
  /// `expire_ms` (0: none), or keeps the old deadline when `keep_ttl`. Writers only.
  slot& put(std::string_view key, std::string bytes, std::int64_t expire_ms, bool keep_ttl);
  /// Removes the live slot of `key`. Outcome: false if there was none. Writers only.
  bool erase(std::string_view key);
  /// Sets (0: clears) the deadline of a live slot. Writers only.
  void set_expire(slot& s, std::int64_t expire_ms) noexcept;
  [[nodiscard]] std::int64_t now_ms() const noexcept { return m_now; }
  [[nodiscard]] string_tree& tree() noexcept { return *m_tree; }

 private:
  std::size_t lower_bound(std::string_view key) const noexcept;
  void remove_at(std::size_t i);
  string_tree* m_tree;
  leaf* m_leaf;
  bool m_writes;
  std::int64_t m_now;
};

/// One request on one key. Owned by the caller until on_done ran.
struct key_op {
  std::string_view key;
  bool writes = false;
  void (*apply)(key_op&, leaf_access&) = nullptr;  ///< under the leaf's latch
  void (*on_done)(key_op&, tessera::context&) = nullptr;  ///< after, latch released
  void* user = nullptr;
  std::size_t index = 0;   ///< for the caller (which result slot)
  std::string_view arg;    ///< for the caller (a value, a number)
  std::int64_t number = 0; ///< for the caller
};

/// Where a walk over all leaves (keys, scan, flush, sweep) stopped.
enum class walk_step : std::uint8_t { next_leaf, stop };

/// A walk over the leaves from the one covering `from`, one task per leaf.
struct leaf_walk {
  std::string from;
  bool writes = false;
  walk_step (*visit)(leaf_walk&, leaf_access&, leaf&) = nullptr;
  void (*on_done)(leaf_walk&, tessera::context&) = nullptr;
  void* user = nullptr;
};

struct tree_counters {
  std::atomic<std::int64_t> keys{0};
  std::atomic<std::int64_t> bytes{0};  ///< keys, values and a per-slot overhead
  std::atomic<std::int64_t> volatile_keys{0};  ///< slots with a deadline
  std::atomic<std::uint64_t> expired{0};
  std::atomic<std::uint64_t> leaves{1};
  std::atomic<std::uint64_t> splits{0};
};

class string_tree {
 public:
  static constexpr std::size_t leaf_capacity = 256;
  /// Bytes counted per slot on top of key and value (the slot, the blob, the resource header).
  static constexpr std::int64_t slot_overhead = 128;

  explicit string_tree(tessera::runtime& rt);
  string_tree(const string_tree&) = delete;
  string_tree& operator=(const string_tree&) = delete;
  /// The runtime must be idle.
  ~string_tree();

  void submit(key_op& op, tessera::context& ctx);
  void walk(leaf_walk& w, tessera::context& ctx);
  /// Runs op.apply on the spot, from any thread, while no task runs on the tree (start-up:
  /// replaying the log); a split is linked at once. op.on_done is not called.
  void apply_exclusive(key_op& op);

  [[nodiscard]] const tree_counters& counters() const noexcept { return m_counters; }
  [[nodiscard]] tessera::runtime& runtime() noexcept { return m_rt; }

  // ---- internal, used by the tree's tasks and leaf_access --------------------------------------
  tree_counters& mutable_counters() noexcept { return m_counters; }
  [[nodiscard]] leaf* leaf_for(std::string_view key) const noexcept;
  leaf* make_leaf();
  value_blob* make_value(std::string bytes);
  void retire_value(value_blob* v);
  /// Publishes `right` (split off a leaf at separator `sep`) in a new directory.
  void link(const std::string& sep, leaf* right);
  /// What link tasks annotate as writers: a spinlock resource that serializes them.
  struct dir_lock {
    int unused = 0;
  };
  dir_lock* directory_lock() noexcept { return m_dir_lock; }

 private:
  tessera::runtime& m_rt;
  std::atomic<directory*> m_dir;
  dir_lock* m_dir_lock;
  tree_counters m_counters;
};

/// Milliseconds of the steady clock (expiry deadlines).
std::int64_t steady_ms() noexcept;

}  // namespace server
