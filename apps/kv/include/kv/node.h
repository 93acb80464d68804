#pragma once
// kv::node — the memory layout of one B-link tree node, shared by every tree in apps/kv.
//
// A node is one `node_bytes` block (default 1 KiB, CMake cache variable KV_NODE_BYTES):
// a 64-byte synchronisation header owned by whoever manages the node (the OLC baseline keeps
// its version lock there; the tessera runtime keeps version, latch word and owning pool),
// followed by the node body, `kv::node`. Trees hold `node*` pointing at the body; the header
// is at `header_of(n) == reinterpret_cast<std::byte*>(n) - header_bytes`.
//
// Key ranges and the child convention (both trees, the checker and node_ops follow it):
//   * Every node covers the half-open key range [low, high). `high_key()` is stored; `low` is
//     implicit: the high key of the left sibling, or 0 for the leftmost node of a level. Low
//     fences never change, so a search may always restart at any node it validly reached.
//     `high_key() == key_infinity` means +infinity: only the rightmost node of a level has it,
//     and that node also holds the key `key_infinity` itself if present.
//   * A key k >= high_key() (high not infinite) lives to the right: follow `right()` (B-link).
//   * Inner and branch nodes hold `count()` separators and `count() + 1` children. Child i
//     covers [key(i-1), key(i)), with key(-1) = low and key(count) = high; a search for k
//     takes child upper_bound(k) (the number of separators <= k). Separators s satisfy
//     low < s < high, so they are unique within a level.
//   * kind: leaf (level 0), branch (level 1: an inner node whose children are leaves), inner
//     (level >= 2). A node's kind and level never change.
//
// Concurrency contract: every field is read and written through relaxed std::atomic_ref
// (plain movs on x86-64), so an optimistic reader may read a node while its owner writes it
// without a data race; what it reads may be inconsistent, and only the owner's version check
// decides whether to use it. `count()` is clamped to the capacity, so no index derived from a
// torn read leaves the node. Ordering (which writes a reader sees) comes from the header.
//
//   kv::node* leaf = new kv::node(kv::node_kind::leaf, 0);   // empty, range [0, +inf)
//   kv::leaf_insert(*leaf, 42, 4200);                         // see kv/node_ops.h
//   assert(leaf->count() == 1 && leaf->key(0) == 42);
//   assert(kv::header_of(leaf) + kv::header_bytes == reinterpret_cast<std::byte*>(leaf));
//   delete leaf;                                              // trees allocate with a header

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <type_traits>

#ifndef KV_NODE_BYTES
#define KV_NODE_BYTES 1024
#endif

// Programmer-error checks: on in Debug builds, or everywhere with TESSERA_DEBUG_CHECKS.
#if !defined(NDEBUG) || defined(TESSERA_DEBUG_CHECKS)
#define KV_ASSERT(cond, msg)                                                                   \
  do {                                                                                         \
    if (!(cond)) [[unlikely]] {                                                                \
      std::fprintf(stderr, "%s:%d: kv assertion '%s' failed: %s\n", __FILE__, __LINE__, #cond, \
                   msg);                                                                       \
      std::abort();                                                                            \
    }                                                                                          \
  } while (false)
#else
#define KV_ASSERT(cond, msg) static_cast<void>(0)
#endif

namespace kv {

using key_type = std::uint64_t;
using value_t = std::uint64_t;

/// One key-value pair, the unit of scans.
struct entry {
  key_type key;
  value_t value;
  friend bool operator==(const entry&, const entry&) = default;
};

inline constexpr std::size_t node_bytes = KV_NODE_BYTES;
inline constexpr std::size_t header_bytes = 64;
inline constexpr std::size_t body_bytes = node_bytes - header_bytes;
/// High key of the rightmost node of each level: the range extends to +infinity.
inline constexpr key_type key_infinity = std::numeric_limits<key_type>::max();

static_assert(node_bytes % header_bytes == 0, "KV_NODE_BYTES must be a multiple of 64");
static_assert(node_bytes >= 256, "KV_NODE_BYTES must be at least 256");

enum class node_kind : std::uint8_t {
  leaf,    ///< level 0: keys and values
  branch,  ///< level 1: separators and children that are leaves
  inner,   ///< level >= 2: separators and children that are inner or branch nodes
};

[[nodiscard]] constexpr node_kind kind_for_level(std::uint8_t level) noexcept {
  return level == 0 ? node_kind::leaf : level == 1 ? node_kind::branch : node_kind::inner;
}

/// Relaxed atomic load of a field that another thread may write concurrently.
template <class T>
[[nodiscard]] inline T load_relaxed(const T& field) noexcept {
  // const_cast: atomic_ref<const T> is C++26; nodes are never const objects.
  return std::atomic_ref<T>(const_cast<T&>(field)).load(std::memory_order_relaxed);
}

/// Relaxed atomic store to a field that another thread may read concurrently.
template <class T>
inline void store_relaxed(T& field, std::type_identity_t<T> value) noexcept {
  std::atomic_ref<T>(field).store(value, std::memory_order_relaxed);
}

class alignas(header_bytes) node {
 public:
  /// kind, level, count, reserved, high key, right: the first 24 bytes of the first line.
  static constexpr std::size_t meta_bytes = 24;
  static constexpr std::size_t leaf_capacity = (body_bytes - meta_bytes) / (2 * sizeof(key_type));
  /// Separators; an inner node has one child more.
  static constexpr std::size_t inner_capacity =
      (body_bytes - meta_bytes - sizeof(std::uint64_t)) / (2 * sizeof(key_type));
  static constexpr std::size_t slot_count = std::max(leaf_capacity, inner_capacity + 1);

  /// An empty node covering [low, +infinity) with no right sibling; the low fence is implicit.
  node(node_kind kind, std::uint8_t level) noexcept : m_kind(kind), m_level(level) {
    KV_ASSERT(kind == kind_for_level(level), "node kind does not match its level");
  }
  node(const node&) = delete;
  node& operator=(const node&) = delete;
  ~node() = default;

  [[nodiscard]] node_kind kind() const noexcept { return load_relaxed(m_kind); }
  [[nodiscard]] std::uint8_t level() const noexcept { return load_relaxed(m_level); }
  [[nodiscard]] bool is_leaf() const noexcept { return kind() == node_kind::leaf; }
  [[nodiscard]] std::size_t capacity() const noexcept {
    return is_leaf() ? leaf_capacity : inner_capacity;
  }

  /// Number of keys (leaf) or separators (inner), clamped to capacity() for racing readers.
  [[nodiscard]] std::size_t count() const noexcept {
    return std::min<std::size_t>(load_relaxed(m_count), capacity());
  }
  void set_count(std::size_t count) noexcept {
    KV_ASSERT(count <= capacity(), "count beyond capacity");
    store_relaxed(m_count, static_cast<std::uint16_t>(count));
  }

  /// Exclusive upper bound of the node's range; key_infinity means +infinity.
  [[nodiscard]] key_type high_key() const noexcept { return load_relaxed(m_high_key); }
  void set_high_key(key_type high) noexcept { store_relaxed(m_high_key, high); }

  /// A leaf unlinked by kv::task_tree's delete protocol: its range moved to its left neighbour
  /// (or, if that was unlinked too, further left). Never cleared. An operation that meets a dead
  /// leaf starts again at the root (not at the left neighbour the leaf had when it died, which
  /// may have been merged and freed since).
  [[nodiscard]] bool dead() const noexcept { return load_relaxed(m_reserved) != 0; }
  void set_dead() noexcept { store_relaxed(m_reserved, std::uint32_t{1}); }

  /// Right sibling on the same level, nullptr for the rightmost node.
  [[nodiscard]] node* right() const noexcept { return load_relaxed(m_right); }
  void set_right(node* right) noexcept { store_relaxed(m_right, right); }

  [[nodiscard]] key_type key(std::size_t i) const noexcept {
    KV_ASSERT(i < leaf_capacity, "key index out of range");
    return load_relaxed(m_keys[i]);
  }
  void set_key(std::size_t i, key_type k) noexcept {
    KV_ASSERT(i < leaf_capacity, "key index out of range");
    store_relaxed(m_keys[i], k);
  }

  /// Leaves only.
  [[nodiscard]] value_t value(std::size_t i) const noexcept {
    KV_ASSERT(i < leaf_capacity, "value index out of range");
    return load_relaxed(m_slots[i]);
  }
  void set_value(std::size_t i, value_t v) noexcept {
    KV_ASSERT(i < leaf_capacity, "value index out of range");
    store_relaxed(m_slots[i], v);
  }

  /// Branch and inner nodes only; child i for i in [0, count()].
  [[nodiscard]] node* child(std::size_t i) const noexcept {
    KV_ASSERT(i <= inner_capacity, "child index out of range");
    return reinterpret_cast<node*>(static_cast<std::uintptr_t>(load_relaxed(m_slots[i])));
  }
  void set_child(std::size_t i, node* c) noexcept {
    KV_ASSERT(i <= inner_capacity, "child index out of range");
    store_relaxed(m_slots[i], static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(c)));
  }

 private:
  node_kind m_kind;
  std::uint8_t m_level;
  std::uint16_t m_count = 0;
  std::uint32_t m_reserved = 0;
  key_type m_high_key = key_infinity;
  node* m_right = nullptr;
  key_type m_keys[leaf_capacity] = {};
  /// Values of a leaf, or child pointers of an inner node (as integers: one array, no union).
  std::uint64_t m_slots[slot_count] = {};
};

static_assert(sizeof(node) == body_bytes, "node body must fill the block after the header");
static_assert(alignof(node) == header_bytes);
static_assert(std::is_standard_layout_v<node>);
static_assert(node::leaf_capacity >= 4 && node::inner_capacity >= 4);
static_assert(node::leaf_capacity <= std::numeric_limits<std::uint16_t>::max());
static_assert(sizeof(std::uintptr_t) == sizeof(std::uint64_t), "child pointers are stored as u64");

/// The 64-byte synchronisation header that precedes every node body in memory.
[[nodiscard]] inline std::byte* header_of(node* n) noexcept {
  return reinterpret_cast<std::byte*>(n) - header_bytes;
}
[[nodiscard]] inline const std::byte* header_of(const node* n) noexcept {
  return reinterpret_cast<const std::byte*>(n) - header_bytes;
}

}  // namespace kv
