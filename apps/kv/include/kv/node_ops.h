#pragma once
// kv/node_ops.h — single-node operations on kv::node: in-node search, leaf insert / update /
// remove / scan, separator insert, split, new root. Used by every tree in apps/kv.
//
// Invariants kept by the writers: keys strictly ascending within a node; every key of a node
// lies in its range [low, high); a split leaves left = [low, s) and right = [s, high) with
// left.right == &right; separators follow the convention in kv/node.h.
//
// Concurrency contract: the writers (non-const functions) need exclusive access to the nodes
// they modify; the caller provides it (a lock, or the tessera runtime's write annotation).
// The readers (const functions) may run concurrently with a writer on the same node: they
// never index outside the node and always terminate, but their result is meaningful only if
// the caller's version check afterwards succeeds. No function here orders memory.
//
//   kv::node leaf(kv::node_kind::leaf, 0), right(kv::node_kind::leaf, 0);
//   for (kv::key_type k = 1;
//        kv::leaf_insert(leaf, k, k * 10) == kv::insert_result::inserted; ++k) {}
//   const kv::key_type sep = kv::split(leaf, right);   // leaf = [0, sep), right = [sep, +inf)
//   assert(kv::leaf_lookup(right, sep) == sep * 10 && leaf.right() == &right);
//   assert(kv::must_move_right(leaf, sep) && !kv::must_move_right(right, sep));

#include <cstddef>
#include <optional>

#include "kv/node.h"

namespace kv {

/// True if k lies beyond the node range whose exclusive upper bound is `high` (move right).
[[nodiscard]] inline bool beyond_high_key(key_type k, key_type high) noexcept {
  return k >= high && high != key_infinity;
}
[[nodiscard]] inline bool must_move_right(const node& n, key_type k) noexcept {
  return beyond_high_key(k, n.high_key());
}

/// First index i < count() with key(i) >= k, or count(). Branch-free loop (cmov), log2 steps.
/// Always inlined (both searches): a call costs as much as a few probes, and GCC's LTO left the
/// task tree's step calling upper_bound once the step had a second caller of it.
[[nodiscard, gnu::always_inline]] inline std::size_t lower_bound(const node& n, key_type k) noexcept {
  std::size_t len = n.count();
  if (len == 0) return 0;
  std::size_t base = 0;
  while (len > 1) {
    const std::size_t half = len / 2;
    base = n.key(base + half) < k ? base + half : base;
    len -= half;
  }
  return base + static_cast<std::size_t>(n.key(base) < k);
}

/// First index i < count() with key(i) > k, or count().
[[nodiscard, gnu::always_inline]] inline std::size_t upper_bound(const node& n, key_type k) noexcept {
  std::size_t len = n.count();
  if (len == 0) return 0;
  std::size_t base = 0;
  while (len > 1) {
    const std::size_t half = len / 2;
    base = n.key(base + half) <= k ? base + half : base;
    len -= half;
  }
  return base + static_cast<std::size_t>(n.key(base) <= k);
}

/// Branch/inner: index of the child whose range holds k (k must not be beyond the high key).
[[nodiscard]] inline std::size_t child_index(const node& n, key_type k) noexcept {
  return upper_bound(n, k);
}
[[nodiscard]] inline node* child_for(const node& n, key_type k) noexcept {
  return n.child(child_index(n, k));
}

[[nodiscard]] inline bool is_full(const node& n) noexcept { return n.count() >= n.capacity(); }

// ---- leaf readers --------------------------------------------------------------------------

[[nodiscard]] inline std::optional<value_t> leaf_lookup(const node& leaf, key_type k) noexcept {
  const std::size_t pos = lower_bound(leaf, k);
  if (pos < leaf.count() && leaf.key(pos) == k) return leaf.value(pos);
  return std::nullopt;
}

/// Copies up to `max_count` entries with key >= from, in key order, to out; returns how many.
inline std::size_t leaf_scan(const node& leaf, key_type from, entry* out,
                             std::size_t max_count) noexcept {
  const std::size_t count = leaf.count();
  std::size_t pos = lower_bound(leaf, from);
  std::size_t produced = 0;
  for (; pos < count && produced < max_count; ++pos, ++produced) {
    out[produced] = entry{leaf.key(pos), leaf.value(pos)};
  }
  return produced;
}

// ---- leaf writers --------------------------------------------------------------------------

enum class insert_result : std::uint8_t {
  inserted,  ///< the key was absent and is now stored
  exists,    ///< the key was present; nothing changed
  full,      ///< the key was absent but the leaf is full; nothing changed (split first)
};

enum class upsert_result : std::uint8_t {
  inserted,  ///< the key was absent and is now stored
  updated,   ///< the key was present; its value was replaced
  full,      ///< the key was absent but the leaf is full; nothing changed (split first)
};

/// Inserts (k, v) at index pos (the lower bound of k); the leaf must not be full.
inline void leaf_insert_at(node& leaf, std::size_t pos, key_type k, value_t v) noexcept {
  const std::size_t count = leaf.count();
  KV_ASSERT(count < node::leaf_capacity && pos <= count, "leaf_insert_at on a full leaf");
  for (std::size_t i = count; i > pos; --i) {
    leaf.set_key(i, leaf.key(i - 1));
    leaf.set_value(i, leaf.value(i - 1));
  }
  leaf.set_key(pos, k);
  leaf.set_value(pos, v);
  leaf.set_count(count + 1);
}

inline insert_result leaf_insert(node& leaf, key_type k, value_t v) noexcept {
  const std::size_t pos = lower_bound(leaf, k);
  const std::size_t count = leaf.count();
  if (pos < count && leaf.key(pos) == k) return insert_result::exists;
  if (count == node::leaf_capacity) return insert_result::full;
  leaf_insert_at(leaf, pos, k, v);
  return insert_result::inserted;
}

inline upsert_result leaf_upsert(node& leaf, key_type k, value_t v) noexcept {
  const std::size_t pos = lower_bound(leaf, k);
  const std::size_t count = leaf.count();
  if (pos < count && leaf.key(pos) == k) {
    leaf.set_value(pos, v);
    return upsert_result::updated;
  }
  if (count == node::leaf_capacity) return upsert_result::full;
  leaf_insert_at(leaf, pos, k, v);
  return upsert_result::inserted;
}

/// Replaces the value of k; false if k is absent.
inline bool leaf_update(node& leaf, key_type k, value_t v) noexcept {
  const std::size_t pos = lower_bound(leaf, k);
  if (pos == leaf.count() || leaf.key(pos) != k) return false;
  leaf.set_value(pos, v);
  return true;
}

/// Removes k; false if k is absent. The leaf may become empty; its range does not change.
inline bool leaf_remove(node& leaf, key_type k) noexcept {
  const std::size_t pos = lower_bound(leaf, k);
  const std::size_t count = leaf.count();
  if (pos == count || leaf.key(pos) != k) return false;
  for (std::size_t i = pos + 1; i < count; ++i) {
    leaf.set_key(i - 1, leaf.key(i));
    leaf.set_value(i - 1, leaf.value(i));
  }
  leaf.set_count(count - 1);
  return true;
}

// ---- inner writers -------------------------------------------------------------------------

/// Adds separator s with `right_child` covering [s, next separator): the child left of it,
/// which covered s before, was split at s. The node must cover s and must not be full.
inline void inner_insert(node& inner, key_type s, node* right_child) noexcept {
  const std::size_t count = inner.count();
  KV_ASSERT(!inner.is_leaf() && count < node::inner_capacity, "inner_insert on a full node");
  const std::size_t pos = upper_bound(inner, s);
  KV_ASSERT(pos == 0 || inner.key(pos - 1) != s, "separator already present");
  for (std::size_t i = count; i > pos; --i) {
    inner.set_key(i, inner.key(i - 1));
    inner.set_child(i + 1, inner.child(i));
  }
  inner.set_key(pos, s);
  inner.set_child(pos + 1, right_child);
  inner.set_count(count + 1);
}

/// Fills a fresh root above a split former root: children left = [0, s) and right = [s, +inf).
inline void make_root(node& root, node* left, key_type s, node* right) noexcept {
  KV_ASSERT(root.count() == 0 && !root.is_leaf(), "make_root needs a fresh inner node");
  root.set_key(0, s);
  root.set_child(0, left);
  root.set_child(1, right);
  root.set_count(1);
  root.set_high_key(key_infinity);
  root.set_right(nullptr);
}

// ---- split ---------------------------------------------------------------------------------

/// Moves the upper half of `left` into `right` (a fresh, empty node of the same kind and
/// level) and links it as left's right sibling. Returns the separator s: afterwards left
/// covers [low, s) and right covers [s, old high). A leaf keeps keys < s (s = right's first
/// key); an inner node hands its middle separator s up and keeps the children left of it.
/// Writes `left.right` last, so `right` is complete before it is reachable from `left`.
inline key_type split(node& left, node& right) noexcept {
  KV_ASSERT(right.count() == 0 && right.kind() == left.kind() && right.level() == left.level(),
            "split needs a fresh right node of the same kind and level");
  const std::size_t count = left.count();
  KV_ASSERT(count >= 3, "split of a node with fewer than 3 entries");
  const std::size_t mid = count / 2;
  key_type separator = 0;
  if (left.is_leaf()) {
    for (std::size_t i = mid; i < count; ++i) {
      right.set_key(i - mid, left.key(i));
      right.set_value(i - mid, left.value(i));
    }
    right.set_count(count - mid);
    separator = left.key(mid);
  } else {
    // Separators mid+1.. and children mid+1.. move; separator mid goes up.
    for (std::size_t i = mid + 1; i < count; ++i) right.set_key(i - mid - 1, left.key(i));
    for (std::size_t i = mid + 1; i <= count; ++i) right.set_child(i - mid - 1, left.child(i));
    right.set_count(count - mid - 1);
    separator = left.key(mid);
  }
  right.set_high_key(left.high_key());
  right.set_right(left.right());
  left.set_count(mid);
  left.set_high_key(separator);
  left.set_right(&right);
  return separator;
}

}  // namespace kv
