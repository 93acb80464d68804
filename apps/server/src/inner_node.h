#pragma once
// server::inner_node — an inner node of server::string_tree: byte-string separators and child
// pointers in the node's own fixed storage, so that a task may read it optimistically.
//
// Layout (one block, no memory outside it but long separators, below): a header (level, count,
// the high key, the right link, the length of the prefix all separators share),
// `max_separators` separator references, as many heads (each separator's 8 bytes after the
// shared prefix as a big-endian word), `max_separators + 1` child pointers, and a key heap of
// `heap_words` 8-byte words holding the separators' bytes. A reference packs the separator's
// length and its word offset in the heap into one word. A search compares the key with the
// shared prefix once, then binary-searches the heads, reading a separator's bytes only where
// its head equals the key's.
//
// Ranges (B-link, as kv::node): the node covers [low, high); low is implicit (the separator its
// parent routes by, or none for the leftmost node of a level) and never changes; a key at or
// beyond high lies to the right (follow right()). Child i covers [sep(i-1), sep(i)): a search
// takes child upper_bound(key), the number of separators <= key. Children of a level-1 node are
// leaves (server::leaf), of higher levels inner nodes.
//
// Optimistic readers: every field, heap words included, is read and written through relaxed
// atomic accesses (tessera::racy_load/racy_store), the count is clamped to the capacity and a
// reference that points outside the heap compares as torn, so a reader that overlaps a writer
// never leaves the node; the runtime's version check then discards what it computed. A
// separator longer than `inline_max` bytes lives out of line in a long_separator: immutable,
// published with a release store and read with an acquire load, owned by the tree and freed
// only with it, so a reader that picks up any one of them (even the wrong one) reads valid
// memory.
//
// Writers (exclusive under the node's primitive) change a node by decoding it into an
// inner_image, changing that, and encoding it back: a change is O(node), and there is one per
// split of a child, so the inserts that cause it pay 1/128th of it each.
//
//   server::inner_image img = server::decode(node);
//   img.insert(sep, right_child);                    // keeps the separators sorted
//   if (server::fits(img)) server::encode(node, img, store);
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include <tessera/optimistic.h>

namespace server {

/// A separator stored out of line: immutable once published, freed with the tree.
struct long_separator {
  std::size_t size = 0;
  std::vector<std::uint64_t> words;  ///< the bytes, zero-padded to whole words
};

/// The tree's long separators (a registry, so the tree frees them; they are never freed
/// before). Thread-safe.
class long_separator_store {
 public:
  const long_separator* make(std::string_view bytes);

 private:
  std::mutex m_mutex;
  std::vector<std::unique_ptr<long_separator>> m_all;
};

struct inner_image;

class inner_node {
 public:
  static constexpr std::size_t max_separators = 127;
  static constexpr std::size_t heap_words = 1024;  ///< 8 KiB of separator bytes
  /// Longer separators go out of line (long_separator).
  static constexpr std::size_t inline_max = 1024;

  explicit inner_node(std::uint8_t level) noexcept : m_level(level) {}
  inner_node(const inner_node&) = delete;
  inner_node& operator=(const inner_node&) = delete;
  ~inner_node() = default;

  // ---- readers (optimistic: any value may be torn; clamped so that none leaves the node) ----
  [[nodiscard]] std::uint8_t level() const noexcept { return tessera::racy_load(m_level); }
  [[nodiscard]] std::size_t count() const noexcept;
  [[nodiscard]] inner_node* right() const noexcept { return tessera::racy_load(m_right); }
  [[nodiscard]] void* child(std::size_t i) const noexcept;
  /// True if `key` is at or beyond the high key: it lies to the right.
  [[nodiscard]] bool beyond(std::string_view key) const noexcept;
  /// The child whose range holds `key` (key below the high key).
  [[nodiscard]] void* child_for(std::string_view key) const noexcept;
  /// -1, 0, 1: `key` against separator i (a torn reference compares as 0).
  [[nodiscard]] int compare(std::string_view key, std::size_t i) const noexcept;
  /// Separator i as a string (writers, and readers that validate before using it).
  [[nodiscard]] std::string separator(std::size_t i) const;

 private:
  friend void encode(inner_node& n, const inner_image& img, long_separator_store& store);
  friend inner_image decode(const inner_node& n);

  static constexpr std::size_t prefix_inline = 16;
  static constexpr std::uint64_t long_bit = 1ULL << 63;
  static constexpr std::uint64_t infinite_bit = 1ULL << 62;
  int compare_ref(std::string_view key, std::uint64_t ref, const long_separator* const* lng)
      const noexcept;
  /// -1, 0, 1: `key`'s first `size` bytes (at most) against separator 0's first `size` bytes
  /// (0: `key` starts with them; a torn reference compares as 0).
  int compare_prefix(std::string_view key, std::size_t size) const noexcept;
  [[nodiscard]] std::string bytes_of(std::uint64_t ref, const long_separator* const* lng) const;

  std::uint8_t m_level;
  std::uint16_t m_count = 0;
  std::uint64_t m_high = infinite_bit;  ///< reference of the high key, or infinite_bit
  const long_separator* m_high_long = nullptr;
  inner_node* m_right = nullptr;
  /// The length of the prefix every separator shares (0 without separators).
  std::uint32_t m_prefix = 0;
  /// The shared prefix's first `prefix_inline` bytes, zero-padded, as little-endian words: a
  /// search compares a key with a prefix of up to that many bytes here, in the header's line,
  /// without reading separator 0's words in the heap.
  std::uint64_t m_prefix_words[2] = {};
  std::uint64_t m_refs[max_separators] = {};  ///< len (bits 0-31), word offset (32-47), long_bit
  /// Each separator's 8 bytes after the shared prefix, big-endian, zero-padded: a search orders
  /// the separators by one integer compare each, in one array, and reads a separator's bytes
  /// only where the words are equal.
  std::uint64_t m_heads[max_separators] = {};
  std::uint64_t m_children[max_separators + 1] = {};
  const long_separator* m_long[max_separators] = {};
  std::uint64_t m_heap[heap_words] = {};
};

/// A separator in an inner_image: its bytes, and its long_separator if it has one already.
struct image_separator {
  std::string bytes;
  const long_separator* lng = nullptr;
};

/// A writer's decoded copy of an inner node.
struct inner_image {
  std::uint8_t level = 1;
  std::vector<image_separator> seps;
  std::vector<void*> children;  ///< seps.size() + 1
  bool high_infinite = true;
  image_separator high;
  inner_node* right = nullptr;

  /// Inserts `sep` with `right_child` to its right (the node on `sep`'s side of a split child).
  void insert(std::string sep, void* right_child);
  /// Moves the separators after the one at the best split point into `right_half` (which gets
  /// this image's high key and right link) and returns the middle separator, now this image's
  /// high key. Both halves fit (fits()) if this image has at most one separator too many.
  image_separator split(inner_image& right_half);
};

/// Whether `img` fits in one node.
[[nodiscard]] bool fits(const inner_image& img) noexcept;
/// Reads `n` (the caller excludes writers).
[[nodiscard]] inner_image decode(const inner_node& n);
/// Writes `img` (fits) into `n` with racy stores; long separators are made in `store`.
void encode(inner_node& n, const inner_image& img, long_separator_store& store);

}  // namespace server
