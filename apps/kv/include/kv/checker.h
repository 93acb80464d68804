#pragma once
// kv::check_tree — a structural consistency checker for any B-link tree built from kv::node
// (the OLC baseline and the tessera tree share the layout, so both use it).
//
// Verifies, level by level from the root: the root is alone on its level (no right sibling,
// high key +infinity); each level's sibling chain, walked from its leftmost node, is exactly the
// concatenation of the children of the level above, in order (every node reachable from the
// root and through the chain, nothing extra, no cycles); levels and kinds match; counts within
// capacity; keys strictly ascending in every node; every leaf key in [low, high) and every
// separator in (low, high), where low is the left neighbour's high key (0 at the left edge);
// each child's high key equals the upper bound its parent gives it (separator or parent's
// high key); only the rightmost node of a level has high key +infinity.
//
// Contract: the tree must be quiescent (no concurrent writer); the checker only reads, through
// the node's relaxed accessors, and never follows a pointer it has not checked for null.
//
//   kv::olc_tree tree;  /* ... operations, then join all threads ... */
//   const kv::check_result r = kv::check_tree(tree.root());
//   if (!r.ok) std::puts(r.message.c_str());           // the first violation found
//   std::printf("%zu keys in %zu leaves, height %zu\n", r.stats.keys, r.stats.leaves,
//               r.stats.height);

#include <cstddef>
#include <string>

#include "kv/node.h"

namespace kv {

struct tree_stats {
  std::size_t height = 0;        ///< levels, 1 for a lone leaf
  std::size_t nodes = 0;         ///< all nodes
  std::size_t leaves = 0;        ///< level-0 nodes
  std::size_t empty_leaves = 0;  ///< leaves without keys (removal does not merge)
  std::size_t keys = 0;          ///< keys in leaves
};

struct check_result {
  bool ok = true;
  std::string message;  ///< the first violation; empty if ok
  tree_stats stats;     ///< complete only if ok
};

[[nodiscard]] check_result check_tree(const node* root);

}  // namespace kv
