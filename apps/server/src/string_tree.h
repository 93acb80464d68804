#pragma once
// server::string_tree — the server's ordered store: binary-safe byte-string keys and values,
// built out of tessera tasks beside kv::task_tree (whose 64-bit keys, node layout and YCSB
// figures stay as they are).
//
// Shape: a B-link tree of any height [B-link]. Leaves (level 0) are tessera resources under a
// reader/writer latch (a leaf owns memory its writers free: std::string keys, a std::vector of
// slots, so optimistic readers are ruled out, tessera/resource.h); each holds up to `leaf_capacity`
// slots (in key order through an index, slot_array) and covers [low, high) with a right link. Inner
// nodes (levels >= 1, server::inner_node) keep their separators in their own fixed storage (a key
// heap inside the node), so tasks read them optimistically and validate. A split links the new
// right node at once (right link, high key) and posts its separator to the parent from a follow-up
// task; a split of the root grows the tree by one level (a new root swapped in with a CAS). Until
// the separator is posted, the right links lead a search on. Nodes are never merged or freed before
// the tree is (FLUSHALL empties the leaves). Separators are the shortest prefix of the right node's
// first key above the left node's last (suffix truncation), so keys of a KiB rarely make separators
// of a KiB; longer than inner_node::inline_max they go out of line.
//
// A request (server::key_op) becomes one task annotated with the leaf that covers its key: the
// task that submits it reads the inner levels on the spot, each node coupled (its version taken,
// searched, the version checked: tessera/coupled_read.h), so a request's first run is at its
// leaf. Where a coupled read fails (a writer in the node) the task is annotated with that inner
// node instead and descends one node per execution from there (the runtime injects the
// optimistic read and the validation), the rest again coupled. At the leaf (under its latch) it
// follows right links while the key is at or beyond the high key, runs the request's
// `apply` under the latch, then, with the latch released (the task returns itself without data:
// it runs next on its worker, nothing queued), calls `on_done` (unless `settle`, under the
// latch, says there is nothing left to do).
// A group of independent requests (a pipelined batch's: submit_group) needs no task where its
// leaf is free: the submitting run descends for the whole group level by level, each next node
// prefetched, requests the leaves' search lines and then the slots the searches will end at for
// the whole group (their misses overlap), and does each request at its leaf there, under the
// leaf's latch taken at once (tessera/coupled_write.h: never waits). A request whose inner read
// did not validate, whose leaf's latch is held, which a multi-key request's hold keeps out, or
// whose key lies beyond the leaf, becomes the task above, annotated where the descent stopped.
//
// Values of up to slot_value::inline_max bytes live in their slot; longer ones out of line
// (server::value_blob, a tessera resource): a delete, or an overwrite with a value short enough
// to go inline, retires the blob (rt.retire_resource), freed once no task that could hold it is
// left; an overwrite with a long value replaces the blob's bytes in place under the write latch,
// and one of a short value the slot's bytes. So a reader must copy what it needs of a value under
// the latch (in apply or a walk's visit) and keep no pointer into it (nor into the slot) after.
// Expiry: a slot may carry a deadline (milliseconds of a steady clock); leaf_access never
// returns an expired slot (lazy check) and a writer removes it; a walk of the leaves removes
// the expired ones (background reclamation).
//
// Multi-key requests (MSET, MGET, DEL and EXISTS of several keys: submit_multi) take effect at
// one moment, also when their keys lie in different leaves: strict two-phase locking of leaves,
// in key order, with the locks kept as data in the leaf (leaf::hold) rather than in the
// runtime's latch, which is only ever held for one run of a task. One task visits the request's
// leaves in key order (a descent per leaf) and, under each leaf's latch, applies the request's
// keys in that leaf; on every leaf but the last it first takes a hold, exclusive for a writing
// request and shared for a reading one, that outlives the run. On the last leaf it needs no
// hold (it still runs under that leaf's latch): it applies, calls `commit` (the log's one
// record) and drops every hold, all in that one run. Every other task respects the holds: at a
// leaf (after following the right links, never before: see below) a reader (GET, a read walk)
// that finds an exclusive hold, and a writer (SET, a write walk, a multi-key request's last
// leaf) that finds any hold, park on the leaf until the hold changes; a writer also marks the
// leaf `waiting` so that new shared holds stay out until it got in (no writer starves behind a
// stream of MGETs). Nothing waits inside a run and nothing polls: a blocked task leaves a copy
// of itself on the leaf's waiter list (leaf::waiters), which the request that drops a hold (or
// clears a mark) spawns; so one worker suffices (string_tree.cpp, "holds", also on lost
// wake-ups).
// Fairness: a reader (GET, a read walk, a multi-key read) that finds an exclusive hold marks the
// leaf `readers waiting`, and no new exclusive hold is taken on the leaf until a reader that
// parked there got in: the release of an exclusive hold keeps that mark (and clears a writer's).
// So a stream of multi-key writes cannot keep a leaf's readers out: between two exclusive holds
// of a leaf on which readers wait, one of them gets in (with one waiting reader, it gets in
// before the leaf is held exclusively again; string_tree.cpp, "holds").
// A request whose apply (or commit) throws still ends: the task catches the exception, records
// it in the request's `outcome` (key_op::outcome; for a multi-key request every op's; for a walk
// leaf_walk::outcome), releases its holds and calls settle / on_done as for a success; the
// exception goes no further. Its effect so far stays (there is no undo): the ops of a multi-key
// request applied before the failure, which `commit` is then given (the log records what took
// effect); leaf_access's writes allocate before they change a leaf, so a write that threw left
// its leaf as it was.
// Why it is atomic: a write request changes a leaf only while it holds it, and a reader of a
// held leaf waits; so a reader that saw one of its values sees the request's last leaf
// released, hence every write of the request done, and no reader sees a value of a leaf before
// the request is complete. A reading request holds every leaf it read until its last read, so no
// write can land between its reads (two-phase locking: serializable, and linearizable since a
// request's point lies between its first and last run).
// Why there is no deadlock: a request holds only leaves left of the key it waits for (it takes
// keys in increasing order, and a leaf it holds covers a range of keys it already passed; a
// held leaf splits only by its holder, which then holds both halves), and it checks the right
// links before the holds, so it never waits on a leaf it only passes. Along a chain of waits the
// leaf waited for thus only moves right (a holder waits for a leaf right of the one it holds,
// and one blocked by a `waiting` mark waits on the same leaf as the writer that set it, which
// waits for the holders), so the chain cannot close into a cycle; single-key requests and walks
// hold nothing across runs. A stale `waiting` mark (its writer got in elsewhere) is cleared by
// the next writer that gets in and by the release of an exclusive hold. A `readers waiting` mark
// keeps out exclusive holds only, and only while a reader that set it has yet to get in on that
// leaf (or leave it), which waits for no one but the exclusive holder: no cycle through it
// either (a shared hold is not kept out by a writer's mark while readers wait, so the two marks
// never wait on each other).
// The request reads the clock once (Redis's command time snapshot): every key of it sees one
// `now` for expiry.
//
// Thread-safety: submit(), submit_group() and walk() from tasks only; counters are relaxed
// atomics (approximate while requests run).
//
//   server::key_op op{.key = "k", .writes = true, .apply = put_fn, .on_done = done_fn};
//   tree.submit(op, ctx);   // apply(op, leaf_access&) under the latch, then on_done(op)

#include <atomic>
#include <bit>
#include <compare>
#include <iterator>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <tessera/tessera.h>

#include "inner_node.h"

namespace server {

/// A value over slot_value::inline_max bytes, out of line: a resource so that it is freed
/// through the epochs.
struct value_blob {
  std::string bytes;
};

/// A slot's value: up to `inline_max` bytes inside the slot itself (redis-benchmark's 3-byte
/// values, counters, flags, most short strings), longer ones in a value_blob. A GET then copies
/// the value from the slot's own line, and a new short value allocates nothing. Owns nothing:
/// the tree makes and retires the blob (leaf_access), so a slot_value is trivially copyable.
/// Reads as a std::string_view while its leaf's latch is held (string_tree.h: readers copy).
class slot_value {
 public:
  static constexpr std::size_t inline_max = 23;

  slot_value() noexcept { m_raw[tag_at] = 0; }
  [[nodiscard]] bool is_inline() const noexcept { return tag() != out_of_line; }
  /// The blob of an out-of-line value (is_inline() false).
  [[nodiscard]] value_blob* blob() const noexcept {
    std::uintptr_t address = 0;
    std::memcpy(&address, m_raw, sizeof address);
    return std::bit_cast<value_blob*>(address);
  }
  [[nodiscard]] std::string_view view() const noexcept {
    if (is_inline()) return {reinterpret_cast<const char*>(m_raw), tag()};
    return blob()->bytes;
  }
  [[nodiscard]] std::size_t size() const noexcept {
    return is_inline() ? tag() : blob()->bytes.size();
  }
  /// Becomes `b` (size <= inline_max), inline.
  void set_inline(std::string_view b) noexcept {
    std::memmove(m_raw, b.data(), b.size());  // (b may be this value's own bytes)
    m_raw[tag_at] = static_cast<unsigned char>(b.size());
  }
  /// Becomes a reference to `b`.
  void set_blob(value_blob* b) noexcept {
    const auto address = std::bit_cast<std::uintptr_t>(b);
    std::memcpy(m_raw, &address, sizeof address);
    m_raw[tag_at] = out_of_line;
  }

 private:
  static constexpr std::size_t tag_at = inline_max;
  static constexpr unsigned char out_of_line = 0xff;
  [[nodiscard]] unsigned char tag() const noexcept { return m_raw[tag_at]; }
  /// Inline: the bytes, then their count in the last byte. Out of line: the blob's address in the
  /// first 8 bytes, `out_of_line` in the last.
  alignas(8) unsigned char m_raw[inline_max + 1];
};
static_assert(sizeof(slot_value) == 24 && std::is_trivially_copyable_v<slot_value>);

/// A slot's key: up to `inline_max` bytes inside the slot itself (redis-benchmark's 16-byte keys,
/// most keys of real workloads), longer ones in a heap block of their own. A search's final
/// compare then reads the slot's line, not a second line elsewhere, and a new short key
/// allocates nothing. Reads as a std::string_view; converts to std::string.
class slot_key {
 public:
  static constexpr std::size_t inline_max = 24;

  slot_key() noexcept { m_in[0] = 0; }
  explicit slot_key(std::string_view k);
  slot_key(const slot_key& o) : slot_key(o.view()) {}
  slot_key(slot_key&& o) noexcept : m_size(o.m_size) {
    std::memcpy(m_in, o.m_in, sizeof m_in);  // the bytes, or the heap pointer
    o.m_size = 0;
  }
  slot_key& operator=(const slot_key& o) {
    if (this != &o) *this = slot_key(o.view());
    return *this;
  }
  slot_key& operator=(slot_key&& o) noexcept {
    if (this != &o) {
      release();
      m_size = o.m_size;
      std::memcpy(m_in, o.m_in, sizeof m_in);
      o.m_size = 0;
    }
    return *this;
  }
  ~slot_key() { release(); }

  [[nodiscard]] std::size_t size() const noexcept { return m_size; }
  [[nodiscard]] const char* data() const noexcept { return m_size <= inline_max ? m_in : m_heap; }
  [[nodiscard]] std::string_view view() const noexcept { return {data(), m_size}; }
  operator std::string_view() const noexcept { return view(); }  // NOLINT: reads as one
  operator std::string() const { return std::string(view()); }  // NOLINT: as std::string did

  friend bool operator==(const slot_key& a, std::string_view b) noexcept { return a.view() == b; }
  friend auto operator<=>(const slot_key& a, std::string_view b) noexcept {
    return a.view() <=> b;
  }

 private:
  void release() noexcept {
    if (m_size > inline_max) delete[] m_heap;
  }
  std::uint32_t m_size = 0;
  union {
    char m_in[inline_max];
    char* m_heap;  ///< size > inline_max
  };
};

/// One key and its value: 64 bytes, aligned to a cache line, so that a search's final compare,
/// the value and the deadline are one line.
struct alignas(64) slot {
  slot_key key;
  slot_value value;
  std::int64_t expire_ms = 0;  ///< deadline on the steady clock in ms; 0: none
};
static_assert(sizeof(slot) == 64);

class parked_task;

/// A leaf's slots, read in key order, stored in none. `store` holds them in the order they came
/// (a new key's slot is appended; a removed slot's place is taken by the last one), and `index`
/// orders them: entry i is the i-th key's `hint` (its 7 bytes after the leaf's shared prefix,
/// big-endian and zero-padded, in the top 56 bits) above its slot's number in `store` (the low
/// 8 bits). An insert moves the index's 8-byte entries after the new key (as the hint array
/// alone did), never 64-byte slots; a search orders most keys by the hints alone, in one array
/// of 8 bytes a key (2 KiB at capacity), and reads the slot only where the hint equals the
/// key's. Every read here (size, operator[], iteration, back) is in key order.
class slot_array {
 public:
  /// Slot numbers fit the index entries' low byte.
  static constexpr std::size_t max_slots = 256;
  static constexpr std::uint64_t number_mask = 0xff;

  /// The hint part of an entry for a key whose bytes [at, at + 8) are the big-endian word `w`
  /// (the top 7 of its 8 bytes).
  static constexpr std::uint64_t hint_part(std::uint64_t w) noexcept { return w & ~number_mask; }

  class const_iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = slot;
    using difference_type = std::ptrdiff_t;
    using pointer = const slot*;
    using reference = const slot&;
    const_iterator() noexcept = default;
    const_iterator(const slot_array* a, std::size_t i) noexcept : m_a(a), m_i(i) {}
    reference operator*() const noexcept { return (*m_a)[m_i]; }
    pointer operator->() const noexcept { return &(*m_a)[m_i]; }
    const_iterator& operator++() noexcept {
      ++m_i;
      return *this;
    }
    const_iterator operator++(int) noexcept {
      const_iterator old = *this;
      ++m_i;
      return old;
    }
    friend bool operator==(const const_iterator& a, const const_iterator& b) noexcept {
      return a.m_i == b.m_i;
    }

   private:
    const slot_array* m_a = nullptr;
    std::size_t m_i = 0;
  };

  [[nodiscard]] std::size_t size() const noexcept { return m_index.size(); }
  [[nodiscard]] bool empty() const noexcept { return m_index.empty(); }
  /// The slot of the i-th key in order.
  [[nodiscard]] slot& operator[](std::size_t i) noexcept { return m_store[number(i)]; }
  [[nodiscard]] const slot& operator[](std::size_t i) const noexcept {
    return m_store[number(i)];
  }
  [[nodiscard]] const slot& back() const noexcept { return (*this)[size() - 1]; }
  [[nodiscard]] const_iterator begin() const noexcept { return {this, 0}; }
  [[nodiscard]] const_iterator end() const noexcept { return {this, size()}; }

  /// The index (entries in key order: hint_part | slot number).
  [[nodiscard]] const std::uint64_t* index() const noexcept { return m_index.data(); }
  /// The slot number of the i-th key.
  [[nodiscard]] std::size_t number(std::size_t i) const noexcept {
    return static_cast<std::size_t>(m_index[i] & number_mask);
  }

  /// Inserts `s` as the i-th key, `hint` its hint_part. Throws (std::bad_alloc; also when the
  /// leaf holds max_slots already) with the array unchanged.
  slot& insert(std::size_t i, slot&& s, std::uint64_t hint);
  /// Removes the i-th key's slot; `hint_at` is the leaf's shared prefix length (to find the
  /// entry of the slot that takes the removed one's place).
  void erase(std::size_t i, std::size_t hint_at) noexcept;
  /// Sets every entry's hint for the shared prefix length `at` (the order stays).
  void rehint(std::size_t at) noexcept;
  /// Room for `n` slots (a split's new leaf, before anything moves). Throws (std::bad_alloc).
  void reserve(std::size_t n);
  /// Moves the keys from the `from`-th on, in order, to the empty `right` (which has room for
  /// them: reserve) and keeps the first `from` in this array. Hints are rehint's to set.
  void split_to(slot_array& right, std::size_t from) noexcept;

 private:
  std::vector<std::uint64_t> m_index;
  std::vector<slot> m_store;
};

/// One leaf: slots covering [low, high) (high none: +infinity) and the right sibling.
struct leaf {
  /// In key order through their index (slot_array); the index's hints are the keys' bytes after
  /// hint_offset. Kept by leaf_access and the tree's splits.
  slot_array slots;
  std::string high;
  bool high_infinite = true;
  /// The hold of multi-key requests on the leaf across task runs ("Multi-key requests" above):
  /// 0 while none holds it or waits for it. (In the padding after high_infinite.)
  std::atomic<std::uint32_t> hold{0};
  std::string low;  ///< the low fence ("" for the leftmost leaf); never changes
  /// Every key in [low, high) starts with the same hint_offset bytes (the common prefix of low
  /// and high; 0 for the leftmost and the rightmost leaf).
  std::size_t hint_offset = 0;
  // (What a request's search reads ends here: the first 128 bytes.)
  leaf* right = nullptr;
  /// Tasks parked until the hold changes (a stack; string_tree.cpp, "holds"); nullptr: none.
  std::atomic<parked_task*> waiters{nullptr};
};

class string_tree;

/// What apply() may do with the leaf that covers its key (writes only for writers).
class leaf_access {
 public:
  /// The request's time is `now_ms` (steady_ms()).
  leaf_access(string_tree& tree, leaf& l, bool writes, std::int64_t now_ms) noexcept
      : m_tree(&tree), m_leaf(&l), m_writes(writes), m_now_known(true), m_now(now_ms) {}
  /// The request's time is read from the clock when first needed (a slot with a deadline, or
  /// now_ms()), once: a request on keys without deadlines reads no clock.
  leaf_access(string_tree& tree, leaf& l, bool writes) noexcept
      : m_tree(&tree), m_leaf(&l), m_writes(writes) {}

  /// The live slot of `key`, or nullptr (absent or expired; a writer removes an expired one).
  /// A put of the same key (the same bytes in memory) right after reuses this search.
  slot* find(std::string_view key);
  /// Stores `bytes` under `key` (new slot or new value for the old one), with deadline
  /// `expire_ms` (0: none), or keeps the old deadline when `keep_ttl`. Writers only. Throws
  /// (std::bad_alloc) with the leaf unchanged.
  slot& put(std::string_view key, std::string_view bytes, std::int64_t expire_ms, bool keep_ttl);
  /// The same, taking `bytes`' buffer where the value goes out of line (a std::string rvalue
  /// only: anything else is the view's).
  template <class S>
    requires std::is_same_v<S, std::string>
  slot& put(std::string_view key, S&& bytes, std::int64_t expire_ms, bool keep_ttl) {
    return put_owned(key, std::forward<S>(bytes), expire_ms, keep_ttl);
  }
  /// The position in the leaf's key order that a search for `key` is expected to end at (an
  /// earlier search of the leaf, which may have changed since): find() and put() of `key` (the
  /// same bytes in memory) try it first, checked against its neighbours, and search where it
  /// does not hold.
  void expect(std::string_view key, std::size_t at) noexcept {
    m_found_key = key.data();
    m_found_size = key.size();
    m_found_at = at;
  }
  /// Removes the live slot of `key`. Outcome: false if there was none. Writers only.
  bool erase(std::string_view key);
  /// Sets (0: clears) the deadline of a live slot. Writers only.
  void set_expire(slot& s, std::int64_t expire_ms) noexcept;
  [[nodiscard]] std::int64_t now_ms() const noexcept {
    if (!m_now_known) [[unlikely]] read_clock();
    return m_now;
  }
  [[nodiscard]] string_tree& tree() noexcept { return *m_tree; }

 private:
  /// The position of the first key >= `key`; `found`: that key is `key`.
  std::size_t lower_bound(std::string_view key, bool& found) const noexcept;
  /// lower_bound, or the position find() last found where it is still key's (checked against
  /// its neighbours: the caller's key may be other bytes at the same address).
  std::size_t position(std::string_view key, bool& found) const noexcept;
  slot& put_owned(std::string_view key, std::string&& bytes, std::int64_t expire_ms,
                  bool keep_ttl);
  template <class Bytes>
  slot& put_bytes(std::string_view key, Bytes&& bytes, std::int64_t expire_ms, bool keep_ttl);
  /// Gives s the value `bytes` (a new slot's value is inline and empty). Throws (std::bad_alloc)
  /// with s unchanged.
  template <class Bytes>
  void assign(slot& s, Bytes&& bytes);
  void remove_at(std::size_t i);
  void read_clock() const noexcept;
  string_tree* m_tree;
  leaf* m_leaf;
  bool m_writes;
  /// The request's time once m_now_known (set by read_clock at the first need).
  mutable bool m_now_known = false;
  mutable std::int64_t m_now = 0;
  /// find()'s last search (its key's address and size, and the position), until the leaf
  /// changes, or expect()'s: put() and find() of the same key try it first.
  const char* m_found_key = nullptr;
  std::size_t m_found_size = 0;
  std::size_t m_found_at = 0;
};

/// How a request ended: set by the tree before settle / on_done. Not `applied`: apply (or a
/// multi-key request's commit) threw, and the request ended there (string_tree.h above).
enum class op_outcome : std::uint8_t {
  applied,        ///< apply ran to its end
  out_of_memory,  ///< it threw std::bad_alloc
  failed,         ///< it threw anything else
};

/// One request on one key. Owned by the caller until on_done ran.
struct key_op {
  std::string_view key;
  bool writes = false;
  /// Set by the tree before settle / on_done (the caller resets it to reuse the op). (In the
  /// padding after `writes`.)
  op_outcome outcome = op_outcome::applied;
  void (*apply)(key_op&, leaf_access&) = nullptr;  ///< under the leaf's latch
  /// Optional, in a two-phase multi-key request (multi_request::decide): called under the leaf's
  /// latch in the first pass, before any op of the request is applied; it only reads.
  void (*check)(key_op&, leaf_access&) = nullptr;
  void (*on_done)(key_op&, tessera::context&) = nullptr;  ///< after, latch released
  /// Optional, with on_done: called under the latch right after apply; false when the request
  /// needs nothing more (on_done is skipped, and the op must not be touched once it returned:
  /// its owner may reuse it), true to run on_done after the latch is released. Saves the task a
  /// second run for the requests whose completion is a counter's decrement.
  bool (*settle)(key_op&) = nullptr;
  void* user = nullptr;
  std::size_t index = 0;   ///< for the caller (which result slot)
  std::string_view arg;    ///< for the caller (a value, a number)
  std::int64_t number = 0; ///< for the caller
};

/// A request on several keys as one step (see "Multi-key requests" above): the key_ops' apply
/// under their leaves' latches (their on_done and settle are not called), then commit, then
/// on_done. `writes` for every op alike.
struct multi_request {
  bool writes = false;
  /// Optional: under the latch of the request's last leaf, after every apply, while every other
  /// leaf is still held: the request's effect is complete and no other request can see any of
  /// it yet (the log's one record). `ops` in key order. If an apply threw, called instead under
  /// that apply's latch, holds still held, with the ops applied before it (none: not called),
  /// every op's outcome already set to the failure.
  void (*commit)(std::span<key_op* const> ops) = nullptr;
  /// Optional: the request runs in two passes. The first visits every key's leaf in key order as
  /// above, holding each leaf but the last and calling each op's `check` (if any) under its
  /// latch; nothing is applied. Then, under the last leaf's latch with every other leaf held,
  /// `decide`: false, and nothing is applied, commit is not called and the holds are dropped;
  /// true, and every op is applied: the last leaf's ops in that run, then each held leaf's,
  /// under its latch (taken while the hold keeps every other task out: a wait only for a task
  /// looking at the hold), then commit, with every op. What check and decide learn goes into
  /// the ops (their users), so that an op's apply may depend on keys after it in key order
  /// (RENAME's destination on its source, MSETNX's keys on one another). A failure (an apply
  /// that throws) gives commit every op, each with the failure as its outcome.
  bool (*decide)(std::span<key_op* const> ops) = nullptr;
  /// After, every hold released; also after a failure (the ops' outcome says which).
  void (*on_done)(void* user, tessera::context&) = nullptr;
  void* user = nullptr;
};

/// Where a walk over all leaves (keys, scan, flush, sweep) stopped.
enum class walk_step : std::uint8_t { next_leaf, stop };

/// A walk over the leaves from the one covering `from`, one task per leaf.
struct leaf_walk {
  std::string from;
  bool writes = false;
  /// Set by the tree before on_done: not `applied` if a visit threw (the walk stopped there).
  op_outcome outcome = op_outcome::applied;
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
  std::atomic<std::uint64_t> splits{0};  ///< of leaves
  std::atomic<std::uint64_t> inner_nodes{1};
  std::atomic<std::uint64_t> inner_splits{0};
};

class string_tree {
 public:
  /// A leaf splits when an insert takes it over this (so it holds at most one slot more, within
  /// slot_array::max_slots).
  static constexpr std::size_t leaf_capacity = 255;
  /// Bytes counted per slot on top of key and value (the slot, the blob, the resource header).
  static constexpr std::int64_t slot_overhead = 128;
  /// Bytes counted per inner node (its block and the resource header).
  static constexpr std::int64_t inner_bytes = sizeof(inner_node) + 64;
  /// Right links an operation follows before it starts again at the root: a task that waited
  /// long in a queue may land left of a run of nodes split since; a fresh descent costs the
  /// height, a walk along the run one execution per node. Once per operation: after that
  /// descent it follows right links however many (string_tree.cpp, `route`).
  static constexpr std::uint8_t max_right_moves = 2;

  explicit string_tree(tessera::runtime& rt);
  string_tree(const string_tree&) = delete;
  string_tree& operator=(const string_tree&) = delete;
  /// The runtime must be idle.
  ~string_tree();

  void submit(key_op& op, tessera::context& ctx);
  /// Submits `ops` (each a request as for submit) together, with group prefetching: their
  /// descents run level by level over the whole group, each next node prefetched, then each
  /// request whose leaf the descent reached is done in this run where the leaf's latch can be
  /// taken at once (tessera/coupled_write.h: never waits) and no multi-key request holds it:
  /// apply and settle under the latch, on_done after it, all before this returns. The others
  /// (a read that did not validate, a latch held, a hold, a key beyond the leaf) become a task
  /// each, as submit makes. The requests must be independent of one another (no order among
  /// them is kept); their apply, settle and on_done may run in this run.
  void submit_group(std::span<key_op* const> ops, tessera::context& ctx);
  /// Submits `ops` (each owned by the caller until r.on_done ran) as one request; `r` is copied.
  void submit_multi(const multi_request& r, std::span<key_op* const> ops, tessera::context& ctx);
  void walk(leaf_walk& w, tessera::context& ctx);
  /// Runs op.apply on the spot, from any thread, while no task runs on the tree (start-up:
  /// replaying the log); a split is linked at once. op.on_done is not called. The op sees the
  /// time `now_ms` (a replay passes 0: nothing expires while a log loads, as in redis-server).
  void apply_exclusive(key_op& op);
  void apply_exclusive(key_op& op, std::int64_t now_ms);

  [[nodiscard]] const tree_counters& counters() const noexcept { return m_counters; }
  [[nodiscard]] tessera::runtime& runtime() noexcept { return m_rt; }
  /// Levels, leaves included (2 for a new tree: a root above one leaf).
  [[nodiscard]] std::size_t height() const noexcept;

  // ---- internal, used by the tree's tasks and leaf_access --------------------------------------
  tree_counters& mutable_counters() noexcept { return m_counters; }
  /// The leaf covering `key`, by a plain descent: only while no task runs on the tree.
  [[nodiscard]] leaf* leaf_for(std::string_view key) const noexcept;
  [[nodiscard]] inner_node* load_root() const noexcept {
    // acquire: the root's contents were written before replace_root's release.
    return m_root.load(std::memory_order_acquire);
  }
  /// Installs `fresh` as the root if `old` still is; false if another did first.
  bool replace_root(inner_node* old, inner_node* fresh) noexcept;
  leaf* make_leaf();
  inner_node* make_inner(std::uint8_t level);
  value_blob* make_value(std::string_view bytes);
  value_blob* make_value(std::string&& bytes);
  void retire_value(value_blob* v);
  /// A new inner node above `left` and `right` (split at `sep`), for a new root.
  inner_node* make_root(void* left, const std::string& sep, void* right, std::uint8_t level);

  /// A split to post one level up: the new right node and its separator.
  struct pending_link {
    std::string sep;
    void* right = nullptr;
  };
  /// Inserts `sep` and its right child into `n` (the caller writes it exclusively); if `n`
  /// splits, returns the split to post to n's parent.
  std::optional<pending_link> insert_separator(inner_node& n, std::string sep, void* right);

 private:
  void link_exclusive(pending_link link, std::uint8_t child_level);

  tessera::runtime& m_rt;
  std::atomic<inner_node*> m_root;
  long_separator_store m_long;
  tree_counters m_counters;
};

static_assert(string_tree::leaf_capacity + 1 <= slot_array::max_slots);

/// Milliseconds of the steady clock (expiry deadlines).
std::int64_t steady_ms() noexcept;
/// The Unix time minus the steady clock, in ms: a deadline given in Unix ms is that minus this,
/// and back. Both clocks are read in ns and the difference rounded, so that two calls agree (a
/// deadline set with EXPIREAT t reads back as t) unless the system clock was set in between.
std::int64_t unix_offset_ms() noexcept;

}  // namespace server
