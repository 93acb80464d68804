#pragma once
// kv::task_tree — the B-link tree built out of tessera tasks ([MxTasks] §5.1, Fig. 6;
// docs/references.md).
//
// Every node is a tessera resource (the runtime keeps its version, latch word and pool in the
// 64-byte header before the kv::node body). Every operation is a chain of tasks, one node per
// task: a task reads its node, picks the next one (child, or right sibling when the key is at or
// beyond the high key), validates its read, re-annotates itself for it and returns itself, so a
// traversal costs no allocation (and, since nothing changes before the validation, the task
// declares `validates_first`: an optimistic read of a node takes no copy of it). Tasks annotate
// nodes as readers while descending and as writers one level early
// (at a branch node, whose children are leaves) when the operation will modify the leaf; the
// runtime picks the primitive from the node's hints (inner nodes: read-mostly and hot; leaves:
// balanced) unless `tree_options::sync` forces one, and prefetches each node before its task.
//
// Splits: a full leaf is split by the inserting task, or by submit() where it writes the leaf
// coupled (the new right node is linked as sibling at once); a separate task then inserts the separator into the parent, starting at the branch node
// the inserting task came down from (moving right if that one split meanwhile), splitting
// further up if needed (from the root); when the root itself split, that task creates the new
// root (compare-and-swap of the root pointer). The link task runs at high priority: until it
// has run, operations routed to the split leaf for keys of its new right node take a detour.
// An operation that follows more than two right links starts again from the root: it read its
// parent long before (queued behind thousands of operations) and may face a run of leaves split
// since, one execution and one trip through the queue each.
//
// Deletes remove the key from its leaf. A leaf that becomes empty and has a left neighbour under
// the same parent is unlinked by three tasks: `kill` (on the leaf: still empty? mark it dead),
// `merge` (on the left neighbour: take over the dead leaf's range and sibling link) and `unhook`
// (on the parent: drop the separator and child pointer), then retired through the runtime's
// epoch-based reclamation. A task that reaches a dead leaf restarts from the root. Other empty
// leaves (the leftmost child of a parent) and empty inner nodes stay: they are valid nodes.
//
// Scans (YCSB E) visit leaves left to right from the first key >= `key`, each leaf read as one
// validated snapshot; results land in ascending key order.
//
// Upper levels (tree_options::coupled_bytes) are read in the run of the node above them, by
// optimistic lock coupling (tessera/coupled_read.h); submit() from a task reads them before the
// operation's first spawn, and submit(span) reads every level above the leaves so, for groups
// of requests level by level (their prefetches overlapping the misses). While the whole tree
// fits tree_options::coupled_leaf_bytes (by default the last-level cache), every level above
// the leaves is read so, a lookup submitted from a task reads its leaf the same way and
// completes inside submit(): no task, and any other request but a scan (update, insert, upsert,
// remove) submitted from a task takes its leaf's writers' side there without waiting
// (tessera/coupled_write.h) where the leaf's primitive allows it, and completes inside submit()
// too; a split or an unlink it needs is spawned there.
//
// Completion: each operation is described by a kv::request the caller owns until its
// `on_done` callback ran (on some worker, possibly inside submit()), or, for a request that
// submit(span, ctx, inline_completion::counted) completed inside the call and counted in its
// result, until that call returned. Results are in the request.
//
// Thread-safety: submit() may be called from tasks and from other threads concurrently. The
// destructor, size(), root() and check_tree() need a quiescent tree (runtime::wait_idle()).
//
//   kv::task_tree tree(rt);
//   kv::request r{.type = kv::request_type::insert, .key = 7, .value = 70,
//                 .on_done = [](kv::request& q) { /* q.status */ }};
//   tree.submit(r);
//   rt.wait_idle();

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include <tessera/coupled_read.h>
#include <tessera/tessera.h>

#include "kv/node.h"

namespace kv {

/// Node metadata and keys: the part of a node an in-node search reads.
inline constexpr std::size_t node_search_bytes =
    node::meta_bytes + node::leaf_capacity * sizeof(key_type);

enum class request_type : std::uint8_t { lookup, insert, update, upsert, remove, scan };
enum class request_status : std::uint8_t {
  ok,         ///< done (lookup: found; insert: inserted; update/remove: key was present)
  not_found,  ///< lookup/update/remove: key absent
  exists,     ///< insert: key already present (nothing changed)
};

/// What submit(span) does with a request that completes inside the call.
enum class inline_completion : std::uint8_t {
  on_done,  ///< its on_done runs there, on the submitting worker, as any completion's does
  counted,  ///< its on_done does not run: submit(span) counts it in what it returns, and the
            ///< caller does what the on_done would have (one step for all of them, e.g. one
            ///< atomic subtraction from a batch's outstanding count instead of one per request)
};

/// The synchronization the tree asks the runtime for.
enum class tree_sync : std::uint8_t {
  automatic,   ///< from the hints: inner nodes read-mostly+hot, leaves balanced
  spinlock,    ///< every node: exclusive spinlock
  rwlatch,     ///< every node: reader/writer latch
  optimistic,  ///< every node: optimistic versioning with writer latches (OLFIT)
  scheduling,  ///< every node: serialized through its pool
};

/// tree_options::coupled_leaf_bytes where hwloc reports no last-level cache.
inline constexpr std::size_t coupled_leaf_fallback_bytes = std::size_t{8} * 1024 * 1024;

/// tree_options::coupled_leaf_bytes as a tree resolves it: `given` if set, else the last-level
/// cache's size, else coupled_leaf_fallback_bytes.
std::size_t resolve_coupled_leaf_bytes(std::optional<std::size_t> given) noexcept;

struct tree_options {
  tree_sync sync = tree_sync::automatic;
  /// Bytes of a node each visit annotates (and so prefetches), from the node's start. The
  /// default covers the metadata and the key array (what the binary search reads); the value or
  /// child slot is one more line read on demand. sizeof(node) prefetches whole nodes.
  std::size_t visit_bytes = node_search_bytes;
  /// Upper levels a single request's descent (submit(request&), a task's restart from the
  /// root) reads in the run of the node above them (a coupled read, tessera/coupled_read.h)
  /// instead of one run per node: every level whose nodes, together with those of the levels
  /// above it, take at most this many bytes. Such nodes are read by every operation and stay in
  /// the caches, where a trip through the queue and the prefetch window costs more than the
  /// read. A batch (submit(span)) reads every level above the leaves so, whatever the size,
  /// level by level for groups of requests whose prefetches overlap each level's misses.
  /// 0: one run per node on every level, batches too.
  std::size_t coupled_bytes = std::size_t{256} * 1024;
  /// The whole tree: while every level (the leaves too) takes at most this many bytes, a
  /// descent reads every level above its target coupled, whatever coupled_bytes says (unless it
  /// is 0), and a lookup submitted from a task reads its leaf coupled in submit() and completes
  /// there (on_done runs before submit returns), like a descent of the threads baseline; a read
  /// that does not validate, or a leaf whose primitive keeps no version, takes the ordinary
  /// task. An update, insert, upsert or remove submitted from a task is written there too where
  /// the leaf's primitive lets the submitting task take its writers' side at once
  /// (tessera/coupled_write.h: spinlock, rwlatch, optimistic_latch, none); a full leaf is split
  /// there and the separator's link task spawned, an emptied leaf's unlink task likewise; a held
  /// latch, or a leaf serialized through its pool (scheduling), takes the ordinary task. Such a
  /// tree stays in the last-level cache, where a task's run through the queue and the prefetch
  /// window costs more than the misses it overlaps; a larger tree keeps one task per operation
  /// on its leaf (and, for a single request, on each level below coupled_bytes), whose misses to
  /// DRAM the window overlaps with other operations'. Scans always take a task at the leaf.
  /// Empty (the default): tessera::last_level_cache_bytes(), the cache the runtime's first
  /// workers share (coupled_leaf_fallback_bytes where hwloc does not tell). 0: never.
  std::optional<std::size_t> coupled_leaf_bytes{};
};

struct request {
  request_type type = request_type::lookup;
  key_type key = 0;
  value_t value = 0;             ///< insert/update/upsert: the value; lookup: the result
  std::uint32_t scan_count = 0;  ///< scan: entries wanted
  entry* scan_out = nullptr;     ///< scan: room for scan_count entries
  std::uint32_t scanned = 0;     ///< scan: entries delivered
  request_status status = request_status::ok;
  void (*on_done)(request&) = nullptr;  ///< called once, on a worker, when the request is done
  void* user = nullptr;                 ///< for the caller (e.g. its batch)
  // internal: scan progress
  key_type scan_from = 0;
};

class task_tree {
 public:
  explicit task_tree(tessera::runtime& rt, tree_options options = {});
  task_tree(const task_tree&) = delete;
  task_tree& operator=(const task_tree&) = delete;
  /// Frees every node. The runtime must be idle (no task of this tree queued or running).
  ~task_tree();

  /// Starts a request. From inside a task pass its context (the first task then stays on that
  /// worker); from any other thread pass nullptr. From a task, any request but a scan
  /// may complete inside the call (tree_options::coupled_leaf_bytes): its on_done runs, on this
  /// worker, before submit returns.
  void submit(request& r, tessera::context* ctx = nullptr);
  /// Starts every request of `requests` from inside a task, as submit(r, &ctx) would each, and
  /// spawns their tasks together (tessera::context::spawn of a span: counted and queued once).
  /// Requests other than scans may complete inside the call, as in submit(r, &ctx); returns how
  /// many did. With inline_completion::on_done their on_done runs there, and once the on_done of
  /// every request ran the call touches `requests` no more (the last on_done may hand them on).
  /// With inline_completion::counted the requests completed inside the call run no on_done (the
  /// others run theirs, from their tasks): their results are written when the call returns, and
  /// the caller accounts for them by the count returned. A caller that counts its requests down
  /// must count those before the last of the others can reach zero: e.g. start the count at the
  /// span's size and subtract the returned value after the call.
  std::size_t submit(std::span<request> requests, tessera::context& ctx,
                     inline_completion done = inline_completion::on_done);

  /// Quiescent-only helpers.
  [[nodiscard]] std::size_t size() const;
  [[nodiscard]] std::size_t height() const;
  [[nodiscard]] const node* root() const noexcept { return m_root.load(std::memory_order_acquire); }
  /// Nodes unlinked and handed to the runtime's reclamation so far.
  [[nodiscard]] std::uint64_t retired_nodes() const noexcept {
    return m_retired.load(std::memory_order_acquire);  // see retire_node
  }

  // ---- internal, used by the tree's tasks ------------------------------------------------------
  tessera::runtime& runtime() noexcept { return m_rt; }
  node* make_node(node_kind kind, std::uint8_t level);
  void retire_node(node* n);
  std::size_t visit_bytes() const noexcept { return m_options.visit_bytes; }
  /// tree_options::coupled_leaf_bytes as resolved at construction.
  std::size_t coupled_leaf_bytes() const noexcept { return m_coupled_leaf_bytes; }
  /// The lowest level a descent reads coupled (see tree_options::coupled_bytes); levels at or
  /// above it, but never a task's target level, are read in the run of the node above. 0 (the
  /// whole tree fits tree_options::coupled_leaf_bytes): every level above the leaves, and the
  /// leaves too by lookups submitted from a task.
  std::uint8_t coupled_level() const noexcept {
    return m_coupled_level.load(std::memory_order_relaxed);
  }
  /// Whether submit(span) reads every level above the leaves coupled (tree_options::coupled_bytes
  /// not 0), level by level for groups of requests.
  bool couples_batches() const noexcept { return m_options.coupled_bytes != 0; }
  node* load_root() const noexcept { return m_root.load(std::memory_order_acquire); }
  bool replace_root(node* expected, node* desired) noexcept {
    // acq_rel: the new root's contents are published with it; a failed CAS sees the winner's.
    return m_root.compare_exchange_strong(expected, desired, std::memory_order_acq_rel);
  }

 private:
  tessera::runtime& m_rt;
  tree_options m_options;
  std::size_t m_coupled_leaf_bytes;
  alignas(64) std::atomic<node*> m_root;
  std::atomic<std::uint64_t> m_retired{0};
  /// Nodes made per level (never decremented: inner nodes are never freed, and the few leaves
  /// retired only make the leaves' count, for coupled_leaf_bytes, err high). 64 levels: more
  /// than any tree of 2^64 keys has.
  std::atomic<std::uint64_t> m_level_nodes[64] = {};
  /// The highest level a node was made on (the root's, or the one a new root is being made on):
  /// make_node sums m_level_nodes up to it, not over all 64.
  std::atomic<std::uint8_t> m_top_level{0};
  /// Read on every step (relaxed: a stale value only moves where the runs split).
  std::atomic<std::uint8_t> m_coupled_level{255};
};

}  // namespace kv
