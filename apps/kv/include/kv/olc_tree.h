#pragma once
// kv::olc_tree — the thread baseline: a B-link tree over kv::node with hand-written optimistic
// lock coupling (OLC, like BtreeOLC of Leis et al.), for plain threads and oneTBB tasks.
//
// Each node is one 64-byte-aligned `node_bytes` block: the 64-byte header holds the node's
// version lock (see src/version_lock.h), the body is a kv::node. Readers never write shared
// memory: they read a node's version, read the node with relaxed loads, and re-check the
// version; on a conflict they retry at the same node (low fences never change, so any node a
// search validly reached stays a correct place to resume). Writers lock only the leaf they
// modify (CAS on the version word). A full node is split under its own lock, the new right
// sibling is linked (B-link), the lock is released, and only then is the parent locked to add
// the separator, so no thread ever holds two locks; searches that arrive in between follow
// the right link (key >= high key). A split root gets a new root while its lock is held.
// A descent prefetches each node's header, metadata and key lines as soon as it has validated the
// pointer to it, so that the misses of one node visit overlap (src/olc_tree.cpp, prefetch_node).
//
// Invariants (kv::check_tree verifies them when quiescent): see kv/node.h for ranges and the
// child convention. Removal only deletes the key from its leaf: empty leaves stay linked and
// nodes are never merged or freed before the tree is destroyed (no memory reclamation needed).
//
// A split allocates nodes while holding a lock; allocation failure there terminates.
//
// Memory-ordering contract: every operation is linearizable; an operation that returns after
// changing the tree happens-before any operation that observes the change. scan() returns a
// sequence of per-leaf atomic snapshots in strictly ascending key order (not a snapshot of
// the whole range). size() is exact only when no writer runs.
//
//   kv::olc_tree tree;
//   tree.insert(7, 70);                       // false if 7 was present
//   tree.upsert(8, 80);  tree.update(7, 71);  // update: false if absent
//   std::array<kv::entry, 16> out;  const std::size_t n = tree.scan(0, out.size(), out.data());
//   assert(n == 2 && tree.lookup(7) == 71 && tree.remove(8) && !tree.lookup(8));

#include <atomic>
#include <cstddef>
#include <optional>

#include "kv/node.h"

namespace kv {

class olc_tree {
 public:
  /// An empty tree: one empty leaf as the root.
  olc_tree();
  /// Frees every node; no operation may run concurrently.
  ~olc_tree();
  olc_tree(const olc_tree&) = delete;
  olc_tree& operator=(const olc_tree&) = delete;

  /// Adds (k, v); false (and no change) if k is present.
  bool insert(key_type k, value_t v);
  [[nodiscard]] std::optional<value_t> lookup(key_type k) const;
  /// Replaces the value of k; false (and no change) if k is absent.
  bool update(key_type k, value_t v);
  /// Inserts (k, v) or replaces the value of k.
  void upsert(key_type k, value_t v);
  /// Removes k from its leaf; false if absent.
  bool remove(key_type k);
  /// Writes up to max_count entries with key >= from, in ascending key order, to out.
  std::size_t scan(key_type from, std::size_t max_count, entry* out) const;

  /// Number of keys (walks the leaves).
  [[nodiscard]] std::size_t size() const;
  /// Number of levels (1 for a lone leaf).
  [[nodiscard]] std::size_t height() const;
  /// The root, for kv::check_tree and statistics on a quiescent tree.
  [[nodiscard]] const node* root() const noexcept;

 private:
  /// alignas: the root pointer is read by every operation; keep it off other hot lines.
  alignas(64) std::atomic<node*> m_root;
};

}  // namespace kv
