// kv::olc_tree: optimistic lock coupling over a B-link tree. See kv/olc_tree.h for the design
// and src/version_lock.h for the read / validate / upgrade protocol. The baseline is the
// competitor, written as a user would without tessera: its lock is its own (the textbook OLC
// lock, version and lock bit in one word), not tessera's src/sync/latch.h (version_lock.h says
// why and how they differ).
//
// Protocol invariants used below:
//   * A `seen` {n, version} means: at `version` node n covered k (k was not beyond its high
//     key). Reads of n made after read_begin() are trusted only after validate(version), and
//     try_lock(version) succeeds only if n is still exactly as it was then.
//   * A pointer read from a node (child, right) is dereferenced only after that node
//     validated, so it was a real pointer of a consistent node.
//   * Low fences never change and nodes are never freed, so after a failed validation the
//     search resumes at the same node (covering() moves right if it has split meanwhile).
//   * A thread holds at most one lock at a time: no deadlock.

#include "kv/olc_tree.h"

#include <array>
#include <new>

#include "kv/node_ops.h"
#include "version_lock.h"

namespace kv {

namespace {

using version_t = version_lock::version_t;

/// The node visited on each level during a descent: where a split looks for its parent.
using path_t = std::array<node*, 32>;

struct alignas(header_bytes) olc_header {
  version_lock lock;
};
static_assert(sizeof(olc_header) == header_bytes);

struct seen {
  node* n;
  version_t version;
};

version_lock& lock_of(node* n) noexcept {
  return std::launder(reinterpret_cast<olc_header*>(header_of(n)))->lock;
}

node* allocate_node(std::uint8_t level) {
  void* block = ::operator new (node_bytes, std::align_val_t{header_bytes});
  ::new (block) olc_header{};
  return ::new (static_cast<std::byte*>(block) + header_bytes) node(kind_for_level(level), level);
}

void free_node(node* n) noexcept {
  std::byte* block = header_of(n);
  n->~node();
  std::launder(reinterpret_cast<olc_header*>(block))->~olc_header();
  ::operator delete (block, std::align_val_t{header_bytes});  // unsized: clang < 19 has no
  // sized deallocation without -fsized-deallocation
}

/// What a descent prefetches of a node as soon as it has validated the pointer to it: the header
/// (the version lock), the metadata and the key array, requested at once, as pB+-trees do (Chen,
/// Gibbons and Mowry, "Improving index performance through prefetching", SIGMOD 2001; tessera's
/// task tree prefetches the same lines). Without it a visit to a node in DRAM waits for one miss
/// after another: the lock, the count and high key, then each probe of the binary search, whose
/// address depends on the previous comparison. The value or child line is known only after the
/// search. 9 lines of a 1 KiB node.
constexpr std::size_t prefetch_bytes =
    header_bytes + node::meta_bytes + node::leaf_capacity * sizeof(key_type);

void prefetch_node(const node* n) noexcept {
  const std::byte* block = header_of(n);
  for (std::size_t offset = 0; offset < prefetch_bytes; offset += 64)
    __builtin_prefetch(block + offset);
}

/// covering()'s walk along the right links, out of line: a descent rarely takes it.
[[gnu::noinline]] seen move_right(node* n, version_t v, key_type k) noexcept {
  do {
    node* next = n->right();
    if (lock_of(n).validate(v)) n = next;
    v = lock_of(n).read_begin();
  } while (must_move_right(*n, k));
  return {n, v};
}
/// From n (whose low fence is <= k), the node of the same level that covers k, by right links.
[[gnu::always_inline]] inline seen covering(node* n, key_type k) noexcept {
  const version_t v = lock_of(n).read_begin();
  if (must_move_right(*n, k)) [[unlikely]] {
    return move_right(n, v, k);
  }
  return {n, v};
}

/// The node at `level` that covers k, descending from the root; records the path if asked.
seen find(const std::atomic<node*>& root, key_type k, std::uint8_t level, path_t* path) noexcept {
  // acquire: pairs with the store of a new root; its contents are visible.
  seen s = covering(root.load(std::memory_order_acquire), k);
  for (;;) {
    const std::uint8_t at = s.n->level();  // immutable, no validation needed
    if (at == level) return s;
    KV_ASSERT(at > level, "search for a level above the root");
    node* child = child_for(*s.n, k);
    if (!lock_of(s.n).validate(s.version)) {
      s = covering(s.n, k);
      continue;
    }
    if (path != nullptr) (*path)[at] = s.n;
    prefetch_node(child);
    s = covering(child, k);
  }
}

/// Locks the node that covers k, starting from s (as returned by find or covering).
seen lock_covering(seen s, key_type k) noexcept {
  while (!lock_of(s.n).try_lock(s.version)) s = covering(s.n, k);
  return s;
}

/// `left` is locked at its version and was just split at `separator` into left | right.
/// Releases it and adds the separator one level up, splitting upward (or growing a new root)
/// as needed; returns with no lock held. Allocation failure terminates (noexcept).
void finish_split(std::atomic<node*>& root, seen left, key_type separator, node* right,
                  const path_t& path) noexcept {
  for (;;) {
    // relaxed: only the holder of the root's lock replaces the root; if left is it, that is us.
    if (root.load(std::memory_order_relaxed) == left.n) {
      node* new_root = allocate_node(static_cast<std::uint8_t>(left.n->level() + 1));
      make_root(*new_root, left.n, separator, right);
      // release: a search that loads the new root sees its contents.
      root.store(new_root, std::memory_order_release);
      lock_of(left.n).unlock(left.version);
      return;
    }
    // left is not the root, so its parent level exists (the right sibling of a split root is
    // reachable only after the new root is installed). B-link: release left before locking the
    // parent; until the separator is in, searches reach `right` through left's right link.
    const auto level = static_cast<std::uint8_t>(left.n->level() + 1);
    lock_of(left.n).unlock(left.version);
    KV_ASSERT(level < path.size(), "tree too high for the descent path");
    // A recorded parent has a low fence <= separator; it may have split since: move right.
    seen parent = path[level] != nullptr ? covering(path[level], separator)
                                         : find(root, separator, level, nullptr);
    parent = lock_covering(parent, separator);
    if (!is_full(*parent.n)) {
      inner_insert(*parent.n, separator, right);
      lock_of(parent.n).unlock(parent.version);
      return;
    }
    node* parent_right = allocate_node(level);
    const key_type up = split(*parent.n, *parent_right);
    inner_insert(separator < up ? *parent.n : *parent_right, separator, right);
    left = parent;
    separator = up;
    right = parent_right;
  }
}

/// `leaf` is locked and full; splits it, inserts (k, v), and publishes the split.
void split_and_insert(std::atomic<node*>& root, seen leaf, key_type k, value_t v,
                      const path_t& path) noexcept {
  node* right = allocate_node(0);
  const key_type separator = split(*leaf.n, *right);
  [[maybe_unused]] const insert_result r = leaf_insert(k < separator ? *leaf.n : *right, k, v);
  KV_ASSERT(r == insert_result::inserted, "insert after a split must succeed");
  finish_split(root, leaf, separator, right, path);
}

}  // namespace

olc_tree::olc_tree() : m_root(allocate_node(0)) {}

olc_tree::~olc_tree() {
  // Quiescent: walk each level's sibling chain from its leftmost node.
  node* first = m_root.load(std::memory_order_relaxed);
  while (first != nullptr) {
    node* below = first->is_leaf() ? nullptr : first->child(0);
    for (node* n = first; n != nullptr;) {
      node* next = n->right();
      free_node(n);
      n = next;
    }
    first = below;
  }
}

bool olc_tree::insert(key_type k, value_t v) {
  path_t path{};
  const seen leaf = lock_covering(find(m_root, k, 0, &path), k);
  const insert_result r = leaf_insert(*leaf.n, k, v);
  if (r == insert_result::inserted) {
    lock_of(leaf.n).unlock(leaf.version);
    return true;
  }
  if (r == insert_result::exists) {
    lock_of(leaf.n).unlock_unchanged(leaf.version);
    return false;
  }
  split_and_insert(m_root, leaf, k, v, path);
  return true;
}

std::optional<value_t> olc_tree::lookup(key_type k) const {
  seen s = find(m_root, k, 0, nullptr);
  for (;;) {
    const std::optional<value_t> result = leaf_lookup(*s.n, k);
    if (lock_of(s.n).validate(s.version)) return result;
    s = covering(s.n, k);
  }
}

bool olc_tree::update(key_type k, value_t v) {
  const seen leaf = lock_covering(find(m_root, k, 0, nullptr), k);
  if (leaf_update(*leaf.n, k, v)) {
    lock_of(leaf.n).unlock(leaf.version);
    return true;
  }
  lock_of(leaf.n).unlock_unchanged(leaf.version);
  return false;
}

void olc_tree::upsert(key_type k, value_t v) {
  path_t path{};
  const seen leaf = lock_covering(find(m_root, k, 0, &path), k);
  if (leaf_upsert(*leaf.n, k, v) != upsert_result::full) {
    lock_of(leaf.n).unlock(leaf.version);
    return;
  }
  split_and_insert(m_root, leaf, k, v, path);
}

bool olc_tree::remove(key_type k) {
  const seen leaf = lock_covering(find(m_root, k, 0, nullptr), k);
  if (leaf_remove(*leaf.n, k)) {
    lock_of(leaf.n).unlock(leaf.version);
    return true;
  }
  lock_of(leaf.n).unlock_unchanged(leaf.version);
  return false;
}

std::size_t olc_tree::scan(key_type from, std::size_t max_count, entry* out) const {
  if (max_count == 0) return 0;
  seen s = find(m_root, from, 0, nullptr);
  std::size_t produced = 0;
  key_type k = from;  // every key below k has been produced or does not exist
  for (;;) {
    const std::size_t got = leaf_scan(*s.n, k, out + produced, max_count - produced);
    const key_type high = s.n->high_key();
    node* next = s.n->right();
    if (!lock_of(s.n).validate(s.version)) {
      s = covering(s.n, k);  // overwrite what this attempt wrote
      continue;
    }
    produced += got;
    if (produced == max_count || high == key_infinity) return produced;
    k = high;  // next's low fence; it may have split since, covering() moves right
    s = covering(next, k);
  }
}

std::size_t olc_tree::size() const {
  seen s = find(m_root, 0, 0, nullptr);  // the leftmost leaf
  std::size_t total = 0;
  for (;;) {
    const std::size_t count = s.n->count();
    node* next = s.n->right();
    if (!lock_of(s.n).validate(s.version)) {
      s.version = lock_of(s.n).read_begin();
      continue;
    }
    total += count;
    if (next == nullptr) return total;
    s = {next, lock_of(next).read_begin()};
  }
}

std::size_t olc_tree::height() const {
  // acquire: as in find(); the level of a new root is visible.
  return std::size_t{m_root.load(std::memory_order_acquire)->level()} + 1;
}

const node* olc_tree::root() const noexcept {
  // acquire: as in find().
  return m_root.load(std::memory_order_acquire);
}

}  // namespace kv
