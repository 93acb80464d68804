// server::string_tree — see string_tree.h; the tree's tasks live here.
#include "string_tree.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <new>
#include <type_traits>
#include <utility>

#include <tessera/coupled_read.h>
#include <tessera/coupled_write.h>

#include "byte_word.h"

namespace server {

/// A task that may park on a leaf (the holds, below): its link in leaf::waiters.
class parked_task : public tessera::task {
 public:
  parked_task* next_parked = nullptr;

 protected:
  parked_task() = default;
  ~parked_task() = default;
};

namespace {

using tessera::access;

constexpr tessera::resource_hints leaf_hints{.primitive = tessera::primitive::rwlatch};
/// Inner nodes: read by every operation, written once per split of a child; optimistic readers
/// (the node's storage is its own, inner_node.h). As kv::task_tree's inner nodes, by the hints:
/// optimistic_latch.
constexpr tessera::resource_hints inner_hints{.read_ratio = 0.99,
                                              .frequency = tessera::frequency::high};
constexpr tessera::resource_hints plain_hints{.primitive = tessera::primitive::none};

bool beyond(const leaf& l, std::string_view key) noexcept {
  return !l.high_infinite && key >= std::string_view(l.high);
}

/// Requests at once the lines that a task's first look at leaf `l` reads one after the other:
/// the high fence (beyond), the low fence (lower_bound's range test; both on the heap for keys
/// of 16 bytes and more) and the lines of the index search's first three probes. Their misses
/// then overlap, where each waited for the one before (perf, MSET at 1 M keys: beyond's and the
/// range test's loads and the probes were most of the leaf search's time). Reads only what the
/// leaf's latch, held by the caller, guards.
void prefetch_search(const leaf& l) noexcept {
  __builtin_prefetch(l.high.data());
  __builtin_prefetch(l.low.data());
  const std::size_t n = l.slots.size();
  const std::uint64_t* const index = l.slots.index();
  for (std::size_t k = 1; k < 8; ++k) __builtin_prefetch(index + n * k / 8);
}

// ---- holds of multi-key requests (string_tree.h, "Multi-key requests") -----------------------
// leaf::hold: bit 31 an exclusive hold, bit 30 a writer waits (shared holds stay out), bit 29 a
// reader waits (exclusive holds stay out), the low bits count shared holds. The leaf's slots are
// guarded by the runtime's latch, never by the hold: the hold only says who may go on. Taken and
// checked under the leaf's latch; released without it (an atomic RMW). Memory ordering: release
// when a hold is dropped, acquire where one is read, so a task that sees a hold gone also sees
// what its holder did before dropping it (the holder's writes to the leaf are published by the
// latch anyway).
//
// Waiting: a task that finds the hold blocking it parks on the leaf: a fresh copy of it, not
// spawned, goes onto leaf::waiters (a lock-free stack) and the task itself is done. Whoever
// changes the hold so that a parked task might go on (drops a hold, clears a mark) then takes the
// whole stack and spawns it (wake); the tasks look at the hold again under the latch and park
// again if still blocked. No lost wake-up: the parker pushes, then loads the hold; the waker
// changes the hold, then exchanges the stack; all four seq_cst, so either the parker sees the
// change (and wakes the stack itself, itself included) or the waker sees the push. Setting a mark
// only blocks more, so it wakes no one (a relaxed RMW under the latch). No task polls, so a held
// leaf costs its waiters nothing until the release; one worker suffices, since every hold is
// released by a request that waits only for leaves right of it (string_tree.h).
//
// Marks, and who they keep out (blocked()):
//   a writer (no hold: SET, a write walk, a multi-key write's last leaf): any hold;
//   an exclusive hold: any hold, and the readers' mark;
//   a reader (no hold: GET, a read walk, a multi-key read's last leaf): an exclusive hold;
//   a shared hold: an exclusive hold, and a writer's mark unless the readers' mark is set too.
// A blocked writer or exclusive taker sets the writer's mark; a reader or shared taker blocked by
// an exclusive hold sets the readers' mark (one blocked by a writer's mark alone sets none). The
// task keeps the mark it set (leaf_task::m_mark) and clears it when it moves on from the leaf
// (it split meanwhile). A writer that gets in clears the writer's mark (it served); a reader or
// shared taker that set the readers' mark clears it when it gets in. The release of an exclusive
// hold clears the writer's mark (its writer looks again, and sets it again if it still waits)
// and keeps the readers': a reader parked for that hold gets in before the next exclusive hold
// (if several were, the first one in clears the bit; fairness, string_tree.h). Each clear wakes
// the stack (where tasks kept out by the mark wait).

constexpr std::uint32_t hold_exclusive = 1U << 31;
constexpr std::uint32_t hold_waiting = 1U << 30;          ///< a writer's mark
constexpr std::uint32_t hold_readers_waiting = 1U << 29;  ///< the readers' mark
constexpr std::uint32_t hold_shared_mask = hold_readers_waiting - 1;

/// Who looks at a leaf's hold.
enum class taker : std::uint8_t { reader, writer, shared_hold, exclusive_hold };

/// Which mark a task set on the leaf it waits at (leaf_task::m_mark).
enum class mark : std::uint8_t { none, writer, readers };

constexpr std::uint32_t bit_of(mark m) noexcept {
  return m == mark::writer ? hold_waiting : m == mark::readers ? hold_readers_waiting : 0;
}

/// Whether hold word `h` keeps out `t` (the table above).
constexpr bool blocked(std::uint32_t h, taker t) noexcept {
  switch (t) {
    case taker::reader:
      return (h & hold_exclusive) != 0;
    case taker::writer:
      return (h & (hold_exclusive | hold_shared_mask)) != 0;
    case taker::shared_hold:
      return (h & hold_exclusive) != 0 ||
             (h & (hold_waiting | hold_readers_waiting)) == hold_waiting;
    case taker::exclusive_hold:
      return (h & (hold_exclusive | hold_shared_mask | hold_readers_waiting)) != 0;
  }
  return true;
}

/// The mark that `t`, kept out by `h`, sets.
constexpr mark mark_for(std::uint32_t h, taker t) noexcept {
  if (t == taker::writer || t == taker::exclusive_hold) return mark::writer;
  return (h & hold_exclusive) != 0 ? mark::readers : mark::none;
}

/// Spawns every task parked on `l` (after a change of l's hold that may let them go on).
void wake(leaf& l, tessera::context& ctx) {
  // seq_cst: after the hold's change in the total order (see above).
  parked_task* w = l.waiters.exchange(nullptr, std::memory_order_seq_cst);
  while (w != nullptr) {
    parked_task* next = w->next_parked;  // before the spawn: w may run and park again at once
    ctx.spawn(w);
    w = next;
  }
}

/// Parks `w` (a copy, not spawned, of a task kept out of `l` as `t`, annotated with l as the task
/// was) on l. Then the hold again: a change since the task looked may have missed w, so if w
/// would no longer be blocked, wakes the stack itself.
void park(leaf& l, parked_task* w, taker t, tessera::context& ctx) {
  parked_task* head = l.waiters.load(std::memory_order_relaxed);
  do {
    w->next_parked = head;
  } while (!l.waiters.compare_exchange_weak(head, w, std::memory_order_seq_cst,
                                            std::memory_order_relaxed));
  if (!blocked(l.hold.load(std::memory_order_seq_cst), t)) wake(l, ctx);
}

/// Clears `bits` (marks) of l's hold and wakes the stack: tasks they kept out may go on.
void clear_marks(leaf& l, std::uint32_t bits, tessera::context& ctx) {
  // seq_cst: before wake's exchange in the total order (see above).
  l.hold.fetch_and(~bits, std::memory_order_seq_cst);
  wake(l, ctx);
}

/// A task that got in on `l` (found `h`) with mark `m` set before: clears the mark that served.
void got_in(leaf& l, std::uint32_t h, taker t, mark m, tessera::context& ctx) {
  if (t == taker::writer || t == taker::exclusive_hold) {
    if ((h & hold_waiting) != 0) clear_marks(l, hold_waiting, ctx);
  } else if (m == mark::readers && (h & hold_readers_waiting) != 0) {
    clear_marks(l, hold_readers_waiting, ctx);
  }
}

/// A task kept out of `l` by `h`: sets its mark (`m`: which one, for the parked copy).
void kept_out(leaf& l, std::uint32_t h, taker t, mark& m) noexcept {
  m = mark_for(h, t);
  if (m != mark::none) l.hold.fetch_or(bit_of(m), std::memory_order_relaxed);
}

[[gnu::noinline]] bool enter_held(leaf& l, std::uint32_t h, taker t, mark& m,
                                  tessera::context& ctx) {
  if (blocked(h, t)) {
    kept_out(l, h, t, m);
    return false;
  }
  got_in(l, h, t, m, ctx);
  return true;
}

/// Whether a task without a hold may work on `l` now (under its latch): a reader unless l is held
/// exclusively, a writer unless it is held at all; kept out, it sets its mark (`m`). One load on
/// the common path.
bool may_enter(leaf& l, taker t, mark& m, tessera::context& ctx) {
  const std::uint32_t h = l.hold.load(std::memory_order_acquire);
  if (h == 0) [[likely]] return true;
  return enter_held(l, h, t, m, ctx);
}

/// Takes a hold on `l` (under its latch, as a writer for an exclusive hold): false if it is not
/// free for it (then sets its mark, `m`).
bool try_hold(leaf& l, bool exclusive, mark& m, tessera::context& ctx) {
  const taker t = exclusive ? taker::exclusive_hold : taker::shared_hold;
  std::uint32_t h = l.hold.load(std::memory_order_acquire);
  for (;;) {
    if (blocked(h, t)) {
      kept_out(l, h, t, m);
      return false;
    }
    // (An exclusive hold replaces a writer's mark: the shared holds it kept out stay out. A
    // readers' mark keeps it out, so there is none to keep.)
    const std::uint32_t want = exclusive ? hold_exclusive : h + 1;
    if (l.hold.compare_exchange_weak(h, want, std::memory_order_acquire,
                                     std::memory_order_acquire)) {
      break;
    }
  }
  if (!exclusive) got_in(l, h, t, m, ctx);
  return true;
}

/// Drops a hold (without the latch) and wakes l's parked tasks. An exclusive one clears a
/// writer's mark as well (its writer looks again and marks it again if it still waits) and keeps
/// the readers' (fairness: a reader that waited goes before the next exclusive hold).
void release_hold(leaf& l, bool exclusive, tessera::context& ctx) {
  // seq_cst: before wake's exchange in the total order; also a release of the holder's work.
  if (exclusive) {
    l.hold.fetch_and(hold_readers_waiting, std::memory_order_seq_cst);
  } else {
    l.hold.fetch_sub(1, std::memory_order_seq_cst);
  }
  wake(l, ctx);
}

/// The outcome of the exception being handled (in a catch block).
op_outcome current_failure() noexcept {
  try {
    throw;
  } catch (const std::bad_alloc&) {
    return op_outcome::out_of_memory;
  } catch (...) {
    return op_outcome::failed;
  }
}

/// Bytes [at, at + 8) of `key`, zero-padded, as a big-endian word: for keys that share their
/// first `at` bytes, different hints order the keys as their bytes do.
std::uint64_t hint_of(std::string_view key, std::size_t at) noexcept {
  if (at >= key.size()) return 0;
  return __builtin_bswap64(load_bytes(key.data() + at, std::min<std::size_t>(8, key.size() - at)));
}

/// Requests the lines of the part of `l`'s index that a search for `key` ends in (l latched by
/// the caller, prefetch_search's probe lines arrived): the eighth between the two of those
/// probes that the key's hint lies between, 3 or 4 lines, where a binary search would miss
/// once a level after the first three. Nothing where the key is outside l's shared prefix.
void prefetch_index_part(const leaf& l, std::string_view key) noexcept {
  const std::size_t at = l.hint_offset;
  if (key.size() < at) return;
  const std::uint64_t h = slot_array::hint_part(hint_of(key, at));
  const std::uint64_t* const index = l.slots.index();
  const std::size_t n = l.slots.size();
  if (n == 0) return;
  std::size_t k = 1;
  while (k < 8 && index[n * k / 8] < h) ++k;
  const char* p = reinterpret_cast<const char*>(index + n * (k - 1) / 8);
  const char* const end = reinterpret_cast<const char*>(index + std::min(n, n * k / 8 + 1));
  for (; p < end; p += 64) __builtin_prefetch(p);
}

/// Requests the line of the slot that a search for `key` in `l` (latched by the caller, its
/// search lines requested: prefetch_search) ends at: the index search alone, as lower_bound's
/// first part, and the address of the slot it points to (not read). Nothing where the key is
/// outside l's shared prefix. Returns that position (for leaf_access::expect), or no_position
/// where nothing was searched. A key whose hint is not in the index is absent: its search ends
/// checking the slot before as well, which is requested too.
constexpr std::size_t no_position = ~std::size_t{0};
std::size_t prefetch_slot(const leaf& l, std::string_view key) noexcept {
  const std::size_t at = l.hint_offset;
  const slot_array& slots = l.slots;
  if (key.size() < at) return no_position;
  const std::uint64_t h = slot_array::hint_part(hint_of(key, at));
  const std::uint64_t* const index = slots.index();
  const std::size_t n = slots.size();
  const std::size_t i = static_cast<std::size_t>(std::lower_bound(index, index + n, h) - index);
  const bool hint_found = i < n && slot_array::hint_part(index[i]) == h;
  if (i < n) __builtin_prefetch(&slots[i]);
  if (!hint_found && i > 0) __builtin_prefetch(&slots[i - 1]);
  return i;
}

/// Sets l's shared prefix from its fences and every slot's hint.
void rehint(leaf& l) noexcept {
  std::size_t n = 0;
  if (!l.high_infinite) {
    while (n < l.low.size() && n < l.high.size() && l.low[n] == l.high[n]) ++n;
  }
  l.hint_offset = n;
  l.slots.rehint(n);
}

/// The shortest separator s with left_last < s <= right_first: a prefix of right_first.
std::string shortest_separator(std::string_view left_last, std::string_view right_first) {
  std::size_t i = 0;
  while (i < left_last.size() && left_last[i] == right_first[i]) ++i;
  return std::string(right_first.substr(0, i + 1));
}

/// Splits `l` (over capacity) in two halves; links the new right leaf as l's sibling and
/// returns it with its separator (l's new high key). Every allocation comes before l changes: a
/// split that throws (std::bad_alloc) leaves l as it was.
string_tree::pending_link split(string_tree& tree, leaf& l) {
  const std::size_t half = l.slots.size() / 2;
  std::string sep = shortest_separator(l.slots[half - 1].key, l.slots[half].key);
  std::string high = sep;  // l's new high key
  std::string low = sep;   // r's low key
  leaf* r = tree.make_leaf();
  try {
    r->slots.reserve(l.slots.size() - half);
  } catch (...) {
    tree.runtime().destroy_resource(r);  // never published
    throw;
  }
  // No allocation from here on (moves of slots and strings).
  l.slots.split_to(r->slots, half);  // (the hints: rehint, below)
  r->high = std::move(l.high);
  r->high_infinite = l.high_infinite;
  r->right = l.right;
  l.high = std::move(high);
  l.high_infinite = false;
  r->low = std::move(low);
  rehint(l);
  rehint(*r);
  l.right = r;  // published to other tasks by the leaf's latch, released after this task
  tree.mutable_counters().leaves.fetch_add(1, std::memory_order_relaxed);
  tree.mutable_counters().splits.fetch_add(1, std::memory_order_relaxed);
  return {std::move(sep), r};
}

/// Where a descending task is: the level of the node it is annotated with (0: a leaf), the
/// right links followed since its last descent from the root (or `restarted`), and the level-1
/// node it came down from to a leaf (where a split of that leaf posts its separator; nullptr:
/// unknown).
///
/// Past string_tree::max_right_moves right links a task starts again at the root, once: a task
/// that read a parent long ago may land left of a run of leaves split since, and a fresh descent
/// costs the height where the run costs a run per leaf. After that descent it follows right
/// links however many (`restarted`): a fresh descent that still lands left of its node met
/// splits whose separators are not in the parent yet (their link tasks pending, e.g. queued on
/// the worker that owns the parent's pool), and each further restart would take it back to the
/// same node, a loop of root, node and right links until those link tasks ran.
struct route {
  static constexpr std::uint8_t restarted = 255;
  std::uint8_t level = 0;
  std::uint8_t right_moves = 0;
  inner_node* parent = nullptr;
};

/// Annotates `t` for `node` on `level`: the mode if that is the target level, a read above it.
void visit(tessera::task& t, route& r, void* node, std::uint8_t level, std::uint8_t target,
           access mode) noexcept {
  r.level = level;
  if (level == 0) {
    t.annotate_resource(static_cast<leaf*>(node), mode);
  } else {
    t.annotate_resource(static_cast<inner_node*>(node), level == target ? mode : access::read);
  }
}

/// Moves `node` (an inner node on `level`, above `target`: the root, or reached through a
/// validated read) down through the inner levels above `target` in the running task's run, each
/// node read coupled (tessera/coupled_read.h: take its version, search, check the version)
/// instead of in a run of its own, so that a request's first run is at its leaf. Stops at
/// `target`, at a node whose range ends at or before `key` (the ordinary step follows its right
/// link), and at a node whose read does not validate or whose primitive keeps no version (the
/// ordinary step reads it again under its primitive). Sets r.parent when it goes down from level
/// 1. Inner nodes are never freed before the tree, so every node reached stays readable.
[[gnu::noinline]] void descend_coupled(void*& node, std::uint8_t& level, std::string_view key,
                                       std::uint8_t target, route& r) noexcept {
  void* at = node;  // in locals, stored back once
  std::uint8_t lv = level;
  while (lv > target) {
    auto* n = static_cast<inner_node*>(at);
    const auto version = tessera::coupled_begin(n);
    if (!version || n->beyond(key)) break;
    void* below = n->child_for(key);
    if (below == nullptr || !tessera::coupled_valid(n, *version)) break;
    if (lv == 1) r.parent = n;
    at = below;
    --lv;
  }
  node = at;
  level = lv;
}

/// Annotates `t` for the root, or for the node below it that the coupled reads reach, on its way
/// to `key`'s node on level `target`. From a task's run only (the coupled reads).
void start_at_root(const string_tree& tree, tessera::task& t, route& r, std::string_view key,
                   std::uint8_t target, access mode) noexcept {
  inner_node* root = tree.load_root();
  r.right_moves = 0;
  r.parent = nullptr;
  void* node = root;
  std::uint8_t level = root->level();
  if (level > target) descend_coupled(node, level, key, target, r);
  visit(t, r, node, level, target, mode);
}

enum class step : std::uint8_t {
  arrived,  ///< the node is on the target level and covers the key: work on it
  moved,    ///< the task is annotated with the next node: return `this`
  torn,     ///< the read did not validate, nothing changed: return `this` (rerun as is)
};

/// One step of `t`, annotated with inner node `n`, towards the node on level `target` whose
/// range holds `key`: right if the key is at or beyond n's high key, else down. Reads `n`,
/// validates, then changes `t` and `r` (the order `validates_first` promises, tessera/task.h).
step descend(const string_tree& tree, tessera::task& t, tessera::context& ctx, inner_node* n,
             route& r, std::string_view key, std::uint8_t target, access mode) noexcept {
  const std::uint8_t here = r.level;
  void* next = nullptr;
  std::uint8_t next_level = here;
  if (n->beyond(key)) {
    next = n->right();
  } else if (here > target) {
    next = n->child_for(key);
    next_level = static_cast<std::uint8_t>(here - 1);
  } else {
    return step::arrived;
  }
  if (!ctx.validate()) return step::torn;  // nothing changed yet
  if (next == nullptr) {
    // A validated read of a node has its links; kept as a guard: read it again.
    next = n;
    next_level = here;
  }
  if (next_level == here) {
    if (r.right_moves != route::restarted && ++r.right_moves > string_tree::max_right_moves) {
      start_at_root(tree, t, r, key, target, mode);
      r.right_moves = route::restarted;
      return step::moved;
    }
  } else {
    if (here == 1) r.parent = n;
    if (next_level > target) descend_coupled(next, next_level, key, target, r);
  }
  visit(t, r, next, next_level, target, mode);
  return step::moved;
}

/// At a leaf the key lies beyond: follow the right link, or start again at the root (see route).
void move_right(const string_tree& tree, tessera::task& t, route& r, const leaf& l,
                std::string_view key, access mode) noexcept {
  if (l.right == nullptr) {  // a validated leaf the key lies beyond has one; a guard
    start_at_root(tree, t, r, key, 0, mode);
    return;
  }
  if (r.right_moves != route::restarted && ++r.right_moves > string_tree::max_right_moves) {
    start_at_root(tree, t, r, key, 0, mode);
    r.right_moves = route::restarted;
    return;
  }
  visit(t, r, l.right, 0, 0, mode);
}

/// Posts a split (separator `sep`, new right node `right` of level `child_level`) to the node
/// on the level above that covers `sep`, splitting upward as needed; creates a new root when
/// the split node was the root. Started at the parent the splitting operation came down from
/// (a node on the parent level whose low fence is below `sep`: right links lead from it to the
/// covering node; nodes are never freed), or without data: from the root.
class link_task final : public tessera::task {
 public:
  static constexpr bool validates_first = true;

  link_task(string_tree* tree, void* left, string_tree::pending_link link,
            std::uint8_t child_level, inner_node* parent)
      : m_tree(tree), m_left(left), m_link(std::move(link)), m_level(child_level) {
    // High: until the parent holds the separator, operations routed to `left` for keys now in
    // `right` take a detour through the right link.
    annotate(tessera::priority::high);
    if (parent != nullptr) {
      visit(*this, m_route, parent, parent->level(), parent->level(), access::write);
    }
  }

  tessera::task* execute(tessera::context& ctx) override {
    if (data() == nullptr) return start();
    auto* n = static_cast<inner_node*>(const_cast<void*>(data()));
    const auto target = static_cast<std::uint8_t>(m_level + 1);
    if (descend(*m_tree, *this, ctx, n, m_route, m_link.sep, target, access::write) !=
        step::arrived)
      return this;  // moved on, or torn
    std::optional<string_tree::pending_link> up =
        m_tree->insert_separator(*n, std::move(m_link.sep), m_link.right);
    if (!up) return nullptr;
    // n split too: post that one level up, from the root.
    m_left = n;
    m_link = std::move(*up);
    m_level = target;
    return start();
  }

 private:
  tessera::task* start() {
    inner_node* root = m_tree->load_root();
    if (root->level() > m_level) {
      annotate(tessera::priority::high);  // (again, after waiting for a new root at low)
      start_at_root(*m_tree, *this, m_route, m_link.sep, static_cast<std::uint8_t>(m_level + 1),
                    access::write);
      return this;
    }
    clear_annotations();  // (after a split one level below: still annotated with that node)
    if (root != m_left) {
      // A right sibling of the root split, and the root's own split has not grown the tree
      // yet (its link task will): try again later.
      annotate(tessera::priority::low);
      return this;
    }
    inner_node* fresh = m_tree->make_root(m_left, m_link.sep, m_link.right,
                                          static_cast<std::uint8_t>(m_level + 1));
    if (m_tree->replace_root(root, fresh)) return nullptr;
    m_tree->runtime().destroy_resource(fresh);  // never published
    m_tree->mutable_counters().inner_nodes.fetch_sub(1, std::memory_order_relaxed);
    m_tree->mutable_counters().bytes.fetch_sub(string_tree::inner_bytes,
                                               std::memory_order_relaxed);
    return this;
  }

  string_tree* m_tree;
  void* m_left;
  string_tree::pending_link m_link;
  std::uint8_t m_level;  ///< the level of m_left and m_link.right
  route m_route;
};

/// A task that works on leaves and may park at one (op_task, walk_task, multi_task): the tree,
/// its route, and the mark it set on the leaf it waits at (the holds, above). The parking, and
/// leaving a leaf that split meanwhile, are here.
class leaf_task : public parked_task {
 protected:
  explicit leaf_task(string_tree* tree) noexcept : m_tree(tree) {}
  /// The part of `from`'s copy that parks at `l`: its route and mark, annotated with l (`mode`)
  /// as `from` was.
  leaf_task(const leaf_task& from, leaf* l, access mode) noexcept
      : m_tree(from.m_tree), m_route(from.m_route), m_mark(from.m_mark) {
    annotate_resource(l, mode);
  }
  ~leaf_task() = default;

  /// At leaf `l`, whose range `key` lies beyond: clears the mark the task set on l (l split
  /// while it waited), then on through the right link (or from the root).
  void leave_right(leaf& l, std::string_view key, access mode, tessera::context& ctx) {
    if (m_mark != mark::none) [[unlikely]] {
      clear_marks(l, bit_of(m_mark), ctx);
      m_mark = mark::none;
    }
    move_right(*m_tree, *this, m_route, l, key, mode);
  }

  /// Kept out of `l` as `t`: parks a copy of the task there (`copy()` makes it with
  /// ctx.make_task). False if there was no memory for the copy: the task then runs again as it
  /// is (it polls while memory is short, holding what it holds; its mark stays set).
  template <class Copy>
  bool park_copy(leaf& l, taker t, tessera::context& ctx, Copy&& copy) {
    parked_task* w = nullptr;
    try {
      w = copy();
    } catch (const std::bad_alloc&) {
      return false;
    }
    park(l, w, t, ctx);
    return true;
  }

  /// Splits `l` (over capacity, latched by this run) and spawns the task that posts the split.
  /// Without memory for it, l stays as it was and over capacity (split() allocates before it
  /// changes l; the next writer splits it), or the new leaf stays linked by l's right link alone
  /// (the separator not posted: searches follow the link).
  void split_and_post(leaf& l, tessera::context& ctx) noexcept {
    try {
      ctx.spawn(ctx.make_task<link_task>(m_tree, &l, split(*m_tree, l), 0, m_route.parent));
    } catch (const std::bad_alloc&) {
    }
  }

  string_tree* m_tree;
  route m_route;
  mark m_mark = mark::none;  ///< set on the leaf the task is at (kept out there), or none
  /// The work is done: the next run calls on_done (latch released), nothing else.
  bool m_done = false;
};

/// One key_op: descend (one inner node per run, read optimistically), apply under the leaf's
/// latch, then on_done without it.
class op_task final : public leaf_task {
 public:
  /// Every change on an inner node follows a successful validate() (descend): an optimistic
  /// read takes no copy of the task. At a leaf the task holds the latch.
  static constexpr bool validates_first = true;

  op_task(string_tree* tree, key_op* op) : leaf_task(tree), m_op(op) {
    start_at_root(*tree, *this, m_route, op->key, 0, op->writes ? access::write : access::read);
  }
  /// At `node` on `level` (reached through a validated read; `parent`: the level-1 node above
  /// a leaf, or nullptr), where string_tree::submit_group left the request.
  op_task(string_tree* tree, key_op* op, void* node, std::uint8_t level, inner_node* parent)
      : leaf_task(tree), m_op(op) {
    m_route.parent = parent;
    visit(*this, m_route, node, level, 0, op->writes ? access::write : access::read);
  }
  /// The copy of `from`, blocked at leaf `l`, that parks there.
  op_task(const op_task& from, leaf* l)
      : leaf_task(from, l, from.m_op->writes ? access::write : access::read), m_op(from.m_op) {}

  tessera::task* execute(tessera::context& ctx) override {
    if (m_done) {
      m_op->on_done(*m_op, ctx);
      return nullptr;
    }
    const access mode = m_op->writes ? access::write : access::read;
    if (m_route.level > 0) {
      auto* n = static_cast<inner_node*>(const_cast<void*>(data()));
      descend(*m_tree, *this, ctx, n, m_route, m_op->key, 0, mode);
      return this;  // moved on, or torn (never arrives: the target is a leaf)
    }
    auto* l = static_cast<leaf*>(const_cast<void*>(data()));
    prefetch_search(*l);
    if (beyond(*l, m_op->key)) {
      leave_right(*l, m_op->key, mode, ctx);
      return this;
    }
    const taker t = m_op->writes ? taker::writer : taker::reader;
    if (!may_enter(*l, t, m_mark, ctx)) {  // held by a multi-key request: parks
      return park_copy(*l, t, ctx, [&] { return ctx.make_task<op_task>(*this, l); }) ? nullptr
                                                                                     : this;
    }
    m_mark = mark::none;
    leaf_access a(*m_tree, *l, m_op->writes);
    try {
      m_op->apply(*m_op, a);
    } catch (...) {
      // The request ends with the failure as its outcome (string_tree.h); the leaf is as the
      // writes that completed left it.
      m_op->outcome = current_failure();
    }
    if (l->slots.size() > string_tree::leaf_capacity) split_and_post(*l, ctx);
    if (m_op->on_done == nullptr) return nullptr;
    if (m_op->settle != nullptr && !m_op->settle(*m_op)) return nullptr;  // m_op not touched
    m_done = true;
    clear_annotations();  // runs next on this worker, the latch released
    return this;
  }

 private:
  key_op* m_op;
};

/// A leaf_walk: descend to the leaf covering `from`, then one leaf per run, left to right.
class walk_task final : public leaf_task {
 public:
  static constexpr bool validates_first = true;

  walk_task(string_tree* tree, leaf_walk* w) : leaf_task(tree), m_walk(w) {
    start_at_root(*tree, *this, m_route, w->from, 0, mode());
  }
  /// The copy of `from`, blocked at leaf `l`, that parks there.
  walk_task(const walk_task& from, leaf* l)
      : leaf_task(from, l, from.mode()), m_walk(from.m_walk) {}

  tessera::task* execute(tessera::context& ctx) override {
    if (m_done) {
      if (m_walk->on_done != nullptr) m_walk->on_done(*m_walk, ctx);
      return nullptr;
    }
    if (m_route.level > 0) {
      auto* n = static_cast<inner_node*>(const_cast<void*>(data()));
      descend(*m_tree, *this, ctx, n, m_route, m_walk->from, 0, mode());
      return this;  // moved on, or torn
    }
    auto* l = static_cast<leaf*>(const_cast<void*>(data()));
    if (beyond(*l, m_walk->from)) {
      leave_right(*l, m_walk->from, mode(), ctx);
      return this;
    }
    const taker t = m_walk->writes ? taker::writer : taker::reader;
    if (!may_enter(*l, t, m_mark, ctx)) {  // held by a multi-key request: parks
      return park_copy(*l, t, ctx, [&] { return ctx.make_task<walk_task>(*this, l); }) ? nullptr
                                                                                       : this;
    }
    m_mark = mark::none;
    leaf_access a(*m_tree, *l, m_walk->writes);
    walk_step s = walk_step::stop;
    try {
      s = m_walk->visit(*m_walk, a, *l);
      if (s == walk_step::next_leaf && l->right != nullptr) m_walk->from = l->high;
    } catch (...) {
      m_walk->outcome = current_failure();  // the walk stops here (string_tree.h)
      s = walk_step::stop;
    }
    if (s == walk_step::next_leaf && l->right != nullptr) {
      m_route.right_moves = 0;  // a walk moves right by design
      visit(*this, m_route, l->right, 0, 0, mode());
      return this;
    }
    m_done = true;
    clear_annotations();
    return this;
  }

 private:
  [[nodiscard]] access mode() const noexcept {
    return m_walk->writes ? access::write : access::read;
  }

  leaf_walk* m_walk;
};

/// A multi_request: one leaf after the other in key order, a descent each; a hold on every leaf
/// but the last (string_tree.h, "Multi-key requests").
class multi_task final : public leaf_task {
 public:
  static constexpr bool validates_first = true;

  multi_task(string_tree* tree, const multi_request& r, std::span<key_op* const> ops)
      : leaf_task(tree), m_req(r), m_ops(ops.begin(), ops.end()), m_now(steady_ms()) {
    sort_by_key(m_ops);
    // Room for a hold on each key's leaf at once (more only where held leaves split): the
    // per-leaf reserve below then allocates nothing.
    m_held.reserve(m_ops.size());
    start_at_root(*tree, *this, m_route, m_ops.front()->key, 0, mode());
    find_leaves();
  }
  /// The copy of `from` (its state moved out), blocked at leaf `l`, that parks there.
  multi_task(multi_task& from, leaf* l)
      : leaf_task(from, l, from.mode()), m_req(from.m_req), m_ops(std::move(from.m_ops)),
        m_held(std::move(from.m_held)), m_found(std::move(from.m_found)),
        m_held_from(std::move(from.m_held_from)), m_next(from.m_next), m_now(from.m_now),
        m_prefetched(from.m_prefetched) {}

  tessera::task* execute(tessera::context& ctx) override {
    if (m_done) {
      m_req.on_done(m_req.user, ctx);
      return nullptr;
    }
    if (m_second_pass) {  // a two-phase request's held leaf, latched for this run
      return second_pass(static_cast<leaf*>(const_cast<void*>(data())), ctx);
    }
    const std::string_view key = m_ops[m_next]->key;
    if (m_route.level > 0) {
      auto* n = static_cast<inner_node*>(const_cast<void*>(data()));
      descend(*m_tree, *this, ctx, n, m_route, key, 0, mode());
      return this;  // moved on, or torn
    }
    // At the leaf the task is annotated with (its latch held by the runtime), then on to the
    // next key's leaves in this same run while each one's writers' side can be taken at once
    // (tessera/coupled_write.h), instead of a trip through the queues per leaf; where it cannot
    // (a holder inside, a primitive serialized by its pool, a descent that stopped above the
    // leaves), the task returns itself annotated with that node, the ordinary way. Latches are
    // only tried, never waited for, and at most one is taken besides the runtime's: no wait can
    // close a cycle through them. Holds are taken and kept exactly as in runs of their own.
    auto* l = static_cast<leaf*>(const_cast<void*>(data()));
    if (!m_prefetched) prefetch_found();
    for (bool coupled = false;;) {
      tessera::task* const next = at_leaf(l, ctx);
      if (coupled) tessera::coupled_write_end(l);
      if (next != this || !m_moved_on || m_route.level > 0) return next;
      l = static_cast<leaf*>(const_cast<void*>(data()));
      if (!tessera::coupled_write_begin(l)) return this;
      coupled = true;
    }
  }

 private:
  /// The work of a run at leaf `l` (latched: by the runtime, or coupled by execute): its ops
  /// applied and a hold taken, then annotated with the next key's node (m_moved_on), or parked,
  /// or the request finished. Returns what execute returns.
  tessera::task* at_leaf(leaf* l, tessera::context& ctx) {
    m_moved_on = false;
    const std::string_view key = m_ops[m_next]->key;
    prefetch_search(*l);
    // The right links first: a leaf passed on the way is never waited for (no deadlock).
    if (beyond(*l, key)) {
      leave_right(*l, key, mode(), ctx);
      return this;
    }
    const bool last =
        l->high_infinite || compare_bytes(m_ops.back()->key, std::string_view(l->high)) < 0;
    if (!last) {
      // Room for the hold before it is taken: a hold not in m_held would never be released.
      try {
        reserve_one(m_held);
      } catch (...) {
        return fail(ctx, true);  // (the ops of the leaves before applied)
      }
    }
    const taker t = last ? (m_req.writes ? taker::writer : taker::reader)
                         : (m_req.writes ? taker::exclusive_hold : taker::shared_hold);
    if (last ? !may_enter(*l, t, m_mark, ctx) : !try_hold(*l, m_req.writes, m_mark, ctx)) {
      // Held by another request: parks (with the holds it has) until that one lets go.
      return park_copy(*l, t, ctx, [&] { return ctx.make_task<multi_task>(*this, l); }) ? nullptr
                                                                                        : this;
    }
    m_mark = mark::none;
    if (!last) m_held.push_back(l);  // (reserved)
    if (m_req.decide != nullptr) return first_pass_at(*l, last, ctx);
    leaf* end = l;
    try {
      end = apply_in(*l, !last, ctx);
    } catch (...) {
      return fail(ctx, true);
    }
    if (last && m_req.commit != nullptr) {
      try {
        m_req.commit(m_ops);
      } catch (...) {
        return fail(ctx, false);
      }
    }
    if (!last) {
      spawn_links(ctx);  // (the new leaves are held)
      to_next_leaf(*end);
      m_moved_on = true;
      return this;
    }
    return finish(ctx);
  }

  [[nodiscard]] access mode() const noexcept {
    return m_req.writes ? access::write : access::read;
  }

  /// A two-phase request's first pass at leaf `l` (latched; held unless `last`): its ops'
  /// checks; at the last leaf the decision, then that leaf's ops applied and the second pass.
  tessera::task* first_pass_at(leaf& l, bool last, tessera::context& ctx) {
    const std::size_t from = m_next;
    bool applying = false;
    try {
      if (!last) m_held_from.reserve(m_held.capacity());
      while (m_next < m_ops.size() &&
             (l.high_infinite || compare_bytes(m_ops[m_next]->key, std::string_view(l.high)) < 0)) {
        key_op& op = *m_ops[m_next];
        if (op.check != nullptr) {
          leaf_access a(*m_tree, l, false, m_now);
          op.check(op, a);
        }
        ++m_next;
      }
      if (!last) {
        m_held_from.push_back(from);  // (reserved: aligned with m_held)
        to_next_leaf(l);
        m_moved_on = true;
        return this;
      }
      if (!m_req.decide(m_ops)) return finish(ctx);
      m_next = from;
      applying = true;
      apply_in(l, false, ctx);  // the last leaf's ops, in this run
    } catch (...) {
      return fail(ctx, applying);
    }
    spawn_links(ctx);
    m_second_pass = true;
    m_pass_at = 0;
    return second_pass(nullptr, ctx);
  }

  /// The second pass over the held leaves, in key order, from m_pass_at: `latched` is that
  /// leaf, latched by this run (nullptr: none yet). Each next one is taken at once where its
  /// latch is free (tessera/coupled_write.h), else the task returns annotated with it.
  tessera::task* second_pass(leaf* latched, tessera::context& ctx) {
    const std::size_t pass_leaves = m_held_from.size();
    while (m_pass_at < pass_leaves) {
      leaf* const h = m_held[m_pass_at];
      const bool coupled = h != latched;
      if (coupled && !tessera::coupled_write_begin(h)) {
        visit(*this, m_route, h, 0, 0, access::write);
        return this;
      }
      m_next = m_held_from[m_pass_at];
      // A split's link task finds the parent from the root: the route's parent is the last
      // leaf's (the first pass ended there), right of h's.
      m_route.parent = nullptr;
      try {
        apply_in(*h, true, ctx);
      } catch (...) {
        if (coupled) tessera::coupled_write_end(h);
        return fail(ctx, true);
      }
      if (coupled) tessera::coupled_write_end(h);
      spawn_links(ctx);
      ++m_pass_at;
      latched = nullptr;
    }
    if (m_req.commit != nullptr) {
      try {
        m_req.commit(m_ops);
      } catch (...) {
      }
    }
    return finish(ctx);
  }

  /// Orders the ops by key, equal keys in the order given (stable): an insertion sort for a
  /// few (an MSET's ten: std::stable_sort allocated a buffer and merged, ~1,400 instructions),
  /// keys compared by words (compare_bytes).
  static void sort_by_key(std::vector<key_op*>& ops) {
    const auto less = [](const key_op* a, const key_op* b) noexcept {
      return compare_bytes(a->key, b->key) < 0;
    };
    if (ops.size() > 16) {
      std::stable_sort(ops.begin(), ops.end(), less);
      return;
    }
    for (std::size_t i = 1; i < ops.size(); ++i) {
      key_op* const op = ops[i];
      std::size_t j = i;
      for (; j > 0 && less(op, ops[j - 1]); --j) ops[j] = ops[j - 1];
      ops[j] = op;
    }
  }

  /// Room for one more element, growing geometrically (reserve(size() + 1) reallocated at every
  /// leaf of a request).
  template <class T>
  static void reserve_one(std::vector<T>& v) {
    if (v.size() == v.capacity()) v.reserve(std::max<std::size_t>(8, 2 * v.size()));
  }

  /// The request is complete (or failed): drops every hold, then on_done in a run of its own.
  tessera::task* finish(tessera::context& ctx) {
    release_all(ctx);
    spawn_links(ctx);
    if (m_req.on_done == nullptr) return nullptr;
    m_done = true;
    clear_annotations();  // runs next on this worker, the latch released
    return this;
  }

  /// In a catch block, under the latch of the leaf the request is at: the request ends with the
  /// failure as every op's outcome. `log_applied`: an apply threw, so commit (if any) is given
  /// the ops applied before it, holds still held (string_tree.h); a commit that throws then is
  /// not called again (that record is missing from the log).
  tessera::task* fail(tessera::context& ctx, bool log_applied) {
    const op_outcome o = current_failure();
    for (key_op* op : m_ops) op->outcome = o;
    if (m_req.decide != nullptr) {  // two passes: the applies were not in key order
      if (log_applied && m_req.commit != nullptr) {
        try {
          m_req.commit(m_ops);
        } catch (...) {
        }
      }
      return finish(ctx);
    }
    if (log_applied && m_req.commit != nullptr && m_next > 0) {
      try {
        m_req.commit(std::span<key_op* const>(m_ops).first(m_next));
      } catch (...) {
      }
    }
    return finish(ctx);
  }

  /// Group prefetching: the leaf of every key but the first, found at once by coupled descents
  /// (kept in m_found with its parent), each leaf's first lines (the runtime's header, the
  /// fences and the index's address) requested as it is found. The keys' leaves then arrive
  /// together, where each waited for its own descent after the leaf before (perf, MSET at 1 M
  /// keys: the first touch of each next leaf was the largest stall of the request's run). A
  /// descent that stops above the leaves leaves its key to to_next_leaf's ways. The descents
  /// replace those of to_next_leaf, so the instructions stay about the same. Inner nodes are
  /// read coupled (validated, as in start_at_root); no leaf is read here, only its address
  /// prefetched, so nothing races with a leaf's latch holder.
  void find_leaves() {
    if (m_ops.size() < 2) return;
    m_found.assign(m_ops.size(), found_leaf{});
    inner_node* const root = m_tree->load_root();
    for (std::size_t i = 1; i < m_ops.size(); ++i) {
      void* node = root;
      std::uint8_t level = root->level();
      route r;
      descend_coupled(node, level, m_ops[i]->key, 0, r);
      if (level != 0) continue;
      const char* const p = static_cast<const char*>(node);
      __builtin_prefetch(tessera::header_of(node));  // what coupled_write_begin reads first
      __builtin_prefetch(p);
      __builtin_prefetch(p + 64);
      m_found[i] = found_leaf{static_cast<leaf*>(node), r.parent, no_position};
    }
  }

  /// Batch slot prefetching, at the request's first run at a leaf: the search lines of every
  /// leaf find_leaves found (fences, the index's first probes), then the slot each key's search
  /// will end at, so that the keys' slots arrive together where each leaf's search waited for
  /// its own (perf, MSET at 1 M keys: lower_bound's time was on the slot's load and the
  /// probes). Each leaf is read under its latch taken at once and let go at once
  /// (tessera/coupled_write.h, never waiting); a leaf whose latch is held (the one this run is
  /// at among them) is skipped. Only prefetches: nothing read here is kept.
  void prefetch_found() noexcept {
    m_prefetched = true;
    for (const found_leaf& f : m_found) {
      if (f.at == nullptr || !tessera::coupled_write_begin(f.at)) continue;
      prefetch_search(*f.at);
      tessera::coupled_write_end(f.at);
    }
    for (std::size_t i = 0; i < m_found.size(); ++i) {
      leaf* const l = m_found[i].at;
      if (l == nullptr || !tessera::coupled_write_begin(l)) continue;
      m_found[i].position = prefetch_slot(*l, m_ops[i]->key);
      tessera::coupled_write_end(l);
    }
  }

  /// On from leaf `done` (its keys applied) to the leaf of the next key: the leaf find_leaves
  /// found for it (leaves are never freed before the tree, and a leaf's low fence never changes,
  /// so the key lies in it or beyond it; beyond it, the task descends from the root); else
  /// through done's right link when the key looks near (it shares with done's high key at least
  /// the prefix that done's own range shares: about as far on as done is wide), one try, then
  /// from the root; else from the root (keys far apart: a wasted leaf visit costs more than it
  /// saves).
  void to_next_leaf(const leaf& done) noexcept {
    const std::string_view key = m_ops[m_next]->key;
    if (m_next < m_found.size() && m_found[m_next].at != nullptr && m_found[m_next].at != &done) {
      m_route.right_moves = string_tree::max_right_moves;  // a miss descends from the root
      m_route.parent = m_found[m_next].parent;
      visit(*this, m_route, m_found[m_next].at, 0, 0, mode());
      return;
    }
    if (done.right != nullptr && !done.high_infinite) {
      const std::string_view high(done.high);
      if (shared_prefix(high, key) >= done.hint_offset) {
        m_route.right_moves = string_tree::max_right_moves;  // a miss descends from the root
        visit(*this, m_route, done.right, 0, 0, mode());
        return;
      }
    }
    start_at_root(*m_tree, *this, m_route, key, 0, mode());
  }

  /// Applies the ops from m_next on whose keys lie in l's range (l latched by this run), through
  /// the leaves that l's splits in this run make; `hold`: those are held as l is. Their link
  /// tasks are spawned once every op is applied (spawn_links): until then no other task can
  /// reach a new leaf but through l's right link, under l's latch, and this run writes it
  /// without a latch of its own. Returns the last of these leaves (l's range ends with its).
  /// An apply that throws leaves m_next at its op (the ops before it applied); a split without
  /// memory leaves its leaf over capacity (split_and_post).
  leaf* apply_in(leaf& l, bool hold, tessera::context& ctx) {
    std::size_t end = m_next;
    while (end < m_ops.size() &&
           (l.high_infinite || compare_bytes(m_ops[end]->key, std::string_view(l.high)) < 0)) {
      ++end;
    }
    leaf* cur = &l;
    leaf* last = &l;  // the rightmost of l and the leaves split off it
    for (; m_next < end; ++m_next) {
      key_op& op = *m_ops[m_next];
      while (beyond(*cur, op.key)) cur = cur->right;  // a leaf split off in this run
      leaf_access a(*m_tree, *cur, m_req.writes, m_now);
      if (m_next < m_found.size() && m_found[m_next].at == cur &&
          m_found[m_next].position != no_position) {
        a.expect(op.key, m_found[m_next].position);
      }
      op.apply(op, a);
      if (cur->slots.size() > string_tree::leaf_capacity) {
        try {
          // Room first: a held leaf missing from m_held would never be released.
          reserve_one(m_held);
          reserve_one(m_links);
          tessera::task* link = nullptr;
          string_tree::pending_link sep = split(*m_tree, *cur);  // allocates before it changes
          auto* right = static_cast<leaf*>(sep.right);
          if (cur == last) last = right;
          if (hold) {
            right->hold.store(hold_exclusive, std::memory_order_relaxed);  // published by l's latch
            m_held.push_back(right);
          }
          link = ctx.make_task<link_task>(m_tree, cur, std::move(sep), 0, m_route.parent);
          m_links.push_back(link);
        } catch (const std::bad_alloc&) {
          // (split_and_post: over capacity, or linked by the right link alone.)
        }
      }
    }
    return last;
  }

  void release_all(tessera::context& ctx) {
    for (leaf* h : m_held) release_hold(*h, m_req.writes, ctx);
    m_held.clear();
  }

  void spawn_links(tessera::context& ctx) {
    for (tessera::task* t : m_links) ctx.spawn(t);
    m_links.clear();
  }

  multi_request m_req;
  std::vector<key_op*> m_ops;  ///< in key order
  std::vector<leaf*> m_held;
  /// A key's leaf and its parent as find_leaves found them (by op index); `at` nullptr: none.
  struct found_leaf {
    leaf* at = nullptr;
    inner_node* parent = nullptr;
    /// Where prefetch_found's search of `at` ended (leaf_access::expect), or no_position.
    std::size_t position = no_position;
  };
  std::vector<found_leaf> m_found;
  /// A two-phase request: the first op of each leaf held in the first pass (m_held's first
  /// entries; the second pass adds the leaves its splits make after them).
  std::vector<std::size_t> m_held_from;
  std::size_t m_pass_at = 0;   ///< the second pass: the next held leaf (index into m_held)
  bool m_second_pass = false;
  std::vector<tessera::task*> m_links;  ///< made in this run, spawned at its end
  std::size_t m_next = 0;               ///< the first op not applied yet
  std::int64_t m_now;
  /// Set by at_leaf when it applied a leaf's ops and moved on to the next key's node.
  bool m_moved_on = false;
  /// prefetch_found ran (once a request).
  bool m_prefetched = false;
};

/// Where string_tree::submit_group's descent left a request: a node, its level, and the
/// level-1 node above it when it is a leaf (nullptr: none found).
struct group_place {
  void* node = nullptr;
  inner_node* parent = nullptr;
  std::uint8_t level = 0;
};

/// Requests the first lines a visit of `node` (on `level`) reads: a leaf's runtime header (what
/// coupled_write_begin reads) and its first two lines (the slot array, the fences' strings, the
/// hold), an inner node's header and first heads.
void prefetch_node(void* node, std::uint8_t level) noexcept {
  const char* const p = static_cast<const char*>(node);
  if (level == 0) __builtin_prefetch(tessera::header_of(node));
  __builtin_prefetch(p);
  __builtin_prefetch(p + 64);
}

/// submit_group's request `op` at leaf `l` (reached through a validated read in this run): done
/// here if l's writers' side can be taken at once (tessera/coupled_write.h, which never waits)
/// and no multi-key request holds l or waits for it, and the key lies in l's range; apply and
/// settle under that latch, then on_done. False, with nothing changed, otherwise: the request's
/// task then does what op_task does at l (right links, parking).
bool complete_at_leaf(string_tree& tree, key_op& op, leaf& l, inner_node* parent,
                      std::size_t position, tessera::context& ctx) {
  if (!tessera::coupled_write_begin(&l)) return false;
  // acquire: as may_enter (a hold's release is seen with what its holder did before).
  if (l.hold.load(std::memory_order_acquire) != 0 || beyond(l, op.key)) {
    tessera::coupled_write_end(&l);
    return false;
  }
  leaf_access a(tree, l, op.writes);
  if (position != no_position) a.expect(op.key, position);
  try {
    op.apply(op, a);
  } catch (...) {
    op.outcome = current_failure();  // as op_task: the request ends with the failure
  }
  if (l.slots.size() > string_tree::leaf_capacity) {
    // As leaf_task::split_and_post: without memory l stays over capacity, or the new leaf
    // stays linked by l's right link alone.
    try {
      ctx.spawn(ctx.make_task<link_task>(&tree, &l, split(tree, l), 0, parent));
    } catch (const std::bad_alloc&) {
    }
  }
  // op is not touched once settle said false (string_tree.h).
  const bool done_after = op.on_done != nullptr && (op.settle == nullptr || op.settle(op));
  tessera::coupled_write_end(&l);
  if (done_after) op.on_done(op, ctx);
  return true;
}

}  // namespace

slot_key::slot_key(std::string_view k) : m_size(static_cast<std::uint32_t>(k.size())) {
  if (k.size() <= inline_max) {
    if (!k.empty()) std::memcpy(m_in, k.data(), k.size());
  } else {
    m_heap = new char[k.size()];
    std::memcpy(m_heap, k.data(), k.size());
  }
}

std::int64_t steady_ms() noexcept {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::int64_t unix_offset_ms() noexcept {
  const auto steady = std::chrono::steady_clock::now().time_since_epoch();
  const auto unix = std::chrono::system_clock::now().time_since_epoch();
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(unix).count() -
                  std::chrono::duration_cast<std::chrono::nanoseconds>(steady).count();
  // Rounded to the nearest ms (the two reads are a few hundred ns apart).
  return (ns >= 0 ? ns + 500'000 : ns - 500'000) / 1'000'000;
}

// put()'s insert and split()'s moves into reserved room rely on slots moving without throwing
// (the strong guarantee: a put or split that throws changed nothing).
static_assert(std::is_nothrow_move_constructible_v<slot> &&
              std::is_nothrow_move_assignable_v<slot>);

// ---- slot_array -----------------------------------------------------------------------------

slot& slot_array::insert(std::size_t i, slot&& s, std::uint64_t hint) {
  const std::size_t n = m_store.size();
  if (n >= max_slots) throw std::bad_alloc();  // (only where a split found no memory)
  // The room first (capped at max_slots): once the slot is in, the entry's insert cannot throw
  // (the two stay in step).
  const std::size_t room = std::min(max_slots, std::max<std::size_t>(16, 2 * n));
  if (m_index.size() == m_index.capacity()) m_index.reserve(room);
  if (m_store.size() == m_store.capacity()) m_store.reserve(room);
  m_store.push_back(std::move(s));  // reserved: moves, no throw
  m_index.insert(m_index.begin() + static_cast<std::ptrdiff_t>(i), hint_part(hint) | n);
  return m_store.back();
}

void slot_array::erase(std::size_t i, std::size_t hint_at) noexcept {
  const std::size_t gone = number(i);
  m_index.erase(m_index.begin() + static_cast<std::ptrdiff_t>(i));
  const std::size_t last = m_store.size() - 1;
  if (gone != last) {
    // The last slot takes the removed one's place: its entry (among those of its hint, found by
    // a search) gets the new number.
    const std::uint64_t h = hint_part(hint_of(m_store[last].key, hint_at));
    const std::size_t n = m_index.size();
    auto k = static_cast<std::size_t>(
        std::lower_bound(m_index.begin(), m_index.end(), h) - m_index.begin());
    while (k < n && (m_index[k] & number_mask) != last) ++k;
    if (k < n) m_index[k] = hint_part(m_index[k]) | gone;
    m_store[gone] = std::move(m_store[last]);  // (the removed key's block, if any, freed)
  }
  m_store.pop_back();
}

void slot_array::rehint(std::size_t at) noexcept {
  for (std::uint64_t& e : m_index) {
    const std::size_t k = static_cast<std::size_t>(e & number_mask);
    e = hint_part(hint_of(m_store[k].key, at)) | k;
  }
}

void slot_array::reserve(std::size_t n) {
  m_store.reserve(n);
  m_index.reserve(n);
}

void slot_array::split_to(slot_array& right, std::size_t from) noexcept {
  const std::size_t n = size();
  // The right part, in key order (its store sorted, numbered 0, 1, ...).
  for (std::size_t i = from; i < n; ++i) {
    right.m_index.push_back(hint_part(m_index[i]) | (i - from));  // reserved
    right.m_store.push_back(std::move(m_store[number(i)]));
  }
  // The left part keeps its keys' slots; those numbered `from` or above move down into the
  // places the right part left (there are as many of those places as such slots).
  std::array<bool, max_slots> kept{};
  for (std::size_t i = 0; i < from; ++i) kept[number(i)] = true;
  std::array<std::uint8_t, max_slots> moved_to{};
  std::size_t hole = 0;
  for (std::size_t k = from; k < n; ++k) {
    if (!kept[k]) continue;
    while (kept[hole]) ++hole;
    m_store[hole] = std::move(m_store[k]);
    moved_to[k] = static_cast<std::uint8_t>(hole);
    ++hole;
  }
  m_index.resize(from);
  for (std::uint64_t& e : m_index) {
    const std::size_t k = static_cast<std::size_t>(e & number_mask);
    if (k >= from) e = hint_part(e) | moved_to[k];
  }
  m_store.erase(m_store.begin() + static_cast<std::ptrdiff_t>(from), m_store.end());
}

// ---- leaf_access ----------------------------------------------------------------------------

std::size_t leaf_access::lower_bound(std::string_view key, bool& found) const noexcept {
  const slot_array& slots = m_leaf->slots;
  const std::size_t n = slots.size();
  found = false;
  // One three-way compare a probe; the keys are unique, so an equal one ends the search (and
  // the caller compares no more).
  const auto by_bytes = [&](std::size_t lo, std::size_t hi) noexcept {
    while (lo < hi) {
      const std::size_t mid = lo + (hi - lo) / 2;
      const int c = compare_bytes(slots[mid].key.view(), key);
      if (c == 0) {
        found = true;
        return mid;
      }
      if (c < 0) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    return lo;
  };
  const std::size_t at = m_leaf->hint_offset;
  // (at <= low.size(): at is the length of the prefix low shares with high.)
  if (key.size() < at || !same_bytes(key.data(), m_leaf->low.data(), at)) {
    // Not in the leaf's range (never, as the tree routes): order by the bytes alone.
    return by_bytes(0, n);
  }
  // The hints first (the index), then the keys of the slots whose hint equals the key's (mostly
  // one). A branching search, not a branch-free one: the indexes of ~5,000 leaves are not in the
  // near caches, and a branch-free search waits for each probe's load before the next, where
  // the predicted branch lets the next probe's load start at once.
  const std::uint64_t h = slot_array::hint_part(hint_of(key, at));
  const std::uint64_t* const index = slots.index();
  // The lines of the search's first three probes (all seven candidates), requested at once: the
  // misses overlap instead of following one another (a prefetch of an empty array's null is
  // harmless).
  for (std::size_t k = 1; k < 8; ++k) __builtin_prefetch(index + n * k / 8);
  // (An entry is its hint above a slot number: the first entry >= h is the first of h's.)
  const std::size_t lo = static_cast<std::size_t>(std::lower_bound(index, index + n, h) - index);
  std::size_t hi = lo;
  while (hi < n && slot_array::hint_part(index[hi]) == h) ++hi;
  return by_bytes(lo, hi);
}

void leaf_access::remove_at(std::size_t i) {
  // The slot goes first (no allocation), then the value is retired: a retire that throws
  // (std::bad_alloc) leaves the key removed and its value unreclaimed, never a slot without it.
  const slot_value v = m_leaf->slots[i].value;
  const std::int64_t bytes =
      static_cast<std::int64_t>(m_leaf->slots[i].key.size() + v.size()) +
      string_tree::slot_overhead;
  const bool volatile_key = m_leaf->slots[i].expire_ms != 0;
  m_found_key = nullptr;
  m_leaf->slots.erase(i, m_leaf->hint_offset);
  tree_counters& c = m_tree->mutable_counters();
  c.keys.fetch_sub(1, std::memory_order_relaxed);
  c.bytes.fetch_sub(bytes, std::memory_order_relaxed);
  if (volatile_key) c.volatile_keys.fetch_sub(1, std::memory_order_relaxed);
  if (!v.is_inline()) {
    try {
      m_tree->retire_value(v.blob());
    } catch (const std::bad_alloc&) {
    }
  }
}

void leaf_access::read_clock() const noexcept {
  m_now = steady_ms();
  m_now_known = true;
}

std::size_t leaf_access::position(std::string_view key, bool& found) const noexcept {
  if (key.data() != m_found_key || key.size() != m_found_size) return lower_bound(key, found);
  const slot_array& slots = m_leaf->slots;
  const std::size_t i = m_found_at;
  found = false;
  if (i > slots.size()) return lower_bound(key, found);  // (expect()'s, keys erased since)
  if (i < slots.size()) {
    const int c = compare_bytes(slots[i].key.view(), key);
    if (c == 0) {
      found = true;  // the key's own slot (keys are unique)
      return i;
    }
    if (c < 0) return lower_bound(key, found);
  }
  // Between its neighbours:
  if (i == 0 || compare_bytes(slots[i - 1].key.view(), key) < 0) return i;
  return lower_bound(key, found);
}

slot* leaf_access::find(std::string_view key) {
  bool found = false;
  const std::size_t i = position(key, found);
  if (!found) {
    m_found_key = key.data();
    m_found_size = key.size();
    m_found_at = i;
    return nullptr;
  }
  slot& s = m_leaf->slots[i];
  if (s.expire_ms != 0 && s.expire_ms <= now_ms()) {
    if (m_writes) {
      remove_at(i);
      m_tree->mutable_counters().expired.fetch_add(1, std::memory_order_relaxed);
      // key's position is still i (the slots after it moved down by one).
      m_found_key = key.data();
      m_found_size = key.size();
      m_found_at = i;
    }
    return nullptr;
  }
  m_found_key = key.data();
  m_found_size = key.size();
  m_found_at = i;
  return &s;
}

template <class Bytes>
void leaf_access::assign(slot& s, Bytes&& bytes) {
  slot_value& v = s.value;
  const std::string_view b(bytes);
  if (b.size() <= slot_value::inline_max) {
    if (v.is_inline()) {
      v.set_inline(b);
      return;
    }
    value_blob* old = v.blob();
    v.set_inline(b);
    try {
      m_tree->retire_value(old);
    } catch (const std::bad_alloc&) {
      // (Unreclaimed, as remove_at's: never a slot without its value.)
    }
    return;
  }
  if (!v.is_inline()) {
    // In place: the writer holds the leaf's latch exclusively, and every reader of a value
    // copies what it needs under the latch (string_tree.h), so no task can hold the old bytes.
    // (Assigning from a view throws with the bytes unchanged; a move does not throw.)
    if constexpr (std::is_same_v<std::remove_cvref_t<Bytes>, std::string> &&
                  !std::is_lvalue_reference_v<Bytes>) {
      v.blob()->bytes = std::forward<Bytes>(bytes);
    } else {
      v.blob()->bytes.assign(b);
    }
    return;
  }
  v.set_blob(m_tree->make_value(std::forward<Bytes>(bytes)));  // allocates before s changes
}

template <class Bytes>
slot& leaf_access::put_bytes(std::string_view key, Bytes&& bytes, std::int64_t expire_ms,
                             bool keep_ttl) {
  tree_counters& c = m_tree->mutable_counters();
  bool found = false;
  const std::size_t i = position(key, found);
  const auto added = static_cast<std::int64_t>(std::string_view(bytes).size());
  if (found) {
    slot& s = m_leaf->slots[i];
    const bool expired = s.expire_ms != 0 && s.expire_ms <= now_ms();
    const auto before = static_cast<std::int64_t>(s.value.size());
    assign(s, std::forward<Bytes>(bytes));
    c.bytes.fetch_add(added - before, std::memory_order_relaxed);
    if (!keep_ttl || expired) set_expire(s, expire_ms);
    return s;
  }
  // A put that throws (std::bad_alloc) leaves the leaf and the counters as they were: the
  // value's blob (if it needs one) is made first, and if the slot's insert throws (the key's
  // copy, the vector's growth), the blob is freed and the counters are set back.
  slot fresh{slot_key(key), slot_value(), keep_ttl ? 0 : expire_ms};
  assign(fresh, std::forward<Bytes>(bytes));
  const std::int64_t counted =
      added + static_cast<std::int64_t>(key.size()) + string_tree::slot_overhead;
  c.keys.fetch_add(1, std::memory_order_relaxed);
  c.bytes.fetch_add(counted, std::memory_order_relaxed);
  const std::int64_t deadline = fresh.expire_ms;
  if (deadline != 0) c.volatile_keys.fetch_add(1, std::memory_order_relaxed);
  try {
    m_found_key = nullptr;
    return m_leaf->slots.insert(i, std::move(fresh), hint_of(key, m_leaf->hint_offset));
  } catch (...) {
    c.keys.fetch_sub(1, std::memory_order_relaxed);
    c.bytes.fetch_sub(counted, std::memory_order_relaxed);
    if (deadline != 0) c.volatile_keys.fetch_sub(1, std::memory_order_relaxed);
    if (!fresh.value.is_inline()) {
      m_tree->runtime().destroy_resource(fresh.value.blob());  // never published
    }
    throw;
  }
}

slot& leaf_access::put(std::string_view key, std::string_view bytes, std::int64_t expire_ms,
                       bool keep_ttl) {
  return put_bytes(key, bytes, expire_ms, keep_ttl);
}

slot& leaf_access::put_owned(std::string_view key, std::string&& bytes, std::int64_t expire_ms,
                             bool keep_ttl) {
  return put_bytes(key, std::move(bytes), expire_ms, keep_ttl);
}

bool leaf_access::erase(std::string_view key) {
  bool found = false;
  const std::size_t i = lower_bound(key, found);
  if (!found) return false;
  const slot& s = m_leaf->slots[i];
  const bool live = s.expire_ms == 0 || s.expire_ms > now_ms();
  remove_at(i);
  return live;
}

void leaf_access::set_expire(slot& s, std::int64_t expire_ms) noexcept {
  tree_counters& c = m_tree->mutable_counters();
  if (s.expire_ms == 0 && expire_ms != 0) c.volatile_keys.fetch_add(1, std::memory_order_relaxed);
  if (s.expire_ms != 0 && expire_ms == 0) c.volatile_keys.fetch_sub(1, std::memory_order_relaxed);
  s.expire_ms = expire_ms;
}

// ---- string_tree ----------------------------------------------------------------------------

string_tree::string_tree(tessera::runtime& rt) : m_rt(rt), m_root(nullptr) {
  leaf* first = make_leaf();
  inner_node* root = m_rt.make_resource<inner_node>(inner_hints, std::uint8_t{1});
  inner_image img;
  img.level = 1;
  img.children.push_back(first);
  encode(*root, img, m_long);
  m_counters.bytes.fetch_add(inner_bytes, std::memory_order_relaxed);
  m_root.store(root, std::memory_order_release);
}

string_tree::~string_tree() {
  // Every node is reachable from the leftmost node of its level through right links (the
  // runtime is idle, so no split is half linked), and the leftmost nodes from the root through
  // child 0.
  inner_node* head = m_root.load(std::memory_order_acquire);
  while (head != nullptr) {
    const std::uint8_t level = head->level();
    void* first_child = head->child(0);
    for (inner_node* n = head; n != nullptr;) {
      inner_node* next = n->right();
      m_rt.destroy_resource(n);
      n = next;
    }
    if (level > 1) {
      head = static_cast<inner_node*>(first_child);
      continue;
    }
    for (auto* l = static_cast<leaf*>(first_child); l != nullptr;) {
      leaf* next = l->right;
      for (const slot& s : l->slots) {
        if (!s.value.is_inline()) m_rt.destroy_resource(s.value.blob());
      }
      m_rt.destroy_resource(l);
      l = next;
    }
    head = nullptr;
  }
}

std::size_t string_tree::height() const noexcept {
  return static_cast<std::size_t>(load_root()->level()) + 1;
}

leaf* string_tree::leaf_for(std::string_view key) const noexcept {
  inner_node* n = load_root();
  for (;;) {
    if (n->beyond(key)) {
      n = n->right();
      continue;
    }
    void* c = n->child_for(key);
    if (n->level() > 1) {
      n = static_cast<inner_node*>(c);
      continue;
    }
    auto* l = static_cast<leaf*>(c);
    while (beyond(*l, key)) l = l->right;
    return l;
  }
}

bool string_tree::replace_root(inner_node* old, inner_node* fresh) noexcept {
  // release: the new root's contents before a reader's acquire in load_root().
  return m_root.compare_exchange_strong(old, fresh, std::memory_order_acq_rel,
                                        std::memory_order_acquire);
}

leaf* string_tree::make_leaf() { return m_rt.make_resource<leaf>(leaf_hints); }

inner_node* string_tree::make_inner(std::uint8_t level) {
  m_counters.inner_nodes.fetch_add(1, std::memory_order_relaxed);
  m_counters.bytes.fetch_add(inner_bytes, std::memory_order_relaxed);
  return m_rt.make_resource<inner_node>(inner_hints, level);
}

inner_node* string_tree::make_root(void* left, const std::string& sep, void* right,
                                   std::uint8_t level) {
  inner_node* n = make_inner(level);
  inner_image img;
  img.level = level;
  img.seps.push_back(image_separator{sep, nullptr});
  img.children = {left, right};
  encode(*n, img, m_long);
  return n;
}

// (Both out of line: inlined into assign(), where the size is known to be over slot_value's
// inline bytes, GCC 12 warns of a std::string overflowing its short buffer, wrongly.)
[[gnu::noinline]] value_blob* string_tree::make_value(std::string_view bytes) {
  return m_rt.make_resource<value_blob>(plain_hints, value_blob{std::string(bytes)});
}

[[gnu::noinline]] value_blob* string_tree::make_value(std::string&& bytes) {
  return m_rt.make_resource<value_blob>(plain_hints, value_blob{std::move(bytes)});
}

void string_tree::retire_value(value_blob* v) { m_rt.retire_resource(v); }

std::optional<string_tree::pending_link> string_tree::insert_separator(inner_node& n,
                                                                       std::string sep,
                                                                       void* right) {
  inner_image img = decode(n);
  img.insert(std::move(sep), right);
  if (fits(img)) {
    encode(n, img, m_long);
    return std::nullopt;
  }
  inner_image right_half;
  image_separator up = img.split(right_half);
  inner_node* sibling = make_inner(img.level);
  img.right = sibling;
  encode(*sibling, right_half, m_long);  // complete before n links it
  encode(n, img, m_long);
  m_counters.inner_splits.fetch_add(1, std::memory_order_relaxed);
  return pending_link{std::move(up.bytes), sibling};
}

void string_tree::link_exclusive(pending_link link, std::uint8_t child_level) {
  for (;;) {
    inner_node* root = load_root();
    if (root->level() == child_level) {
      // The node that split is the root (alone on its level, no task running).
      m_root.store(make_root(root, link.sep, link.right,
                             static_cast<std::uint8_t>(child_level + 1)),
                   std::memory_order_release);
      return;
    }
    inner_node* n = root;
    for (;;) {
      if (n->beyond(link.sep)) {
        n = n->right();
      } else if (n->level() > child_level + 1) {
        n = static_cast<inner_node*>(n->child_for(link.sep));
      } else {
        break;
      }
    }
    std::optional<pending_link> up = insert_separator(*n, std::move(link.sep), link.right);
    if (!up) return;
    link = std::move(*up);
    child_level = static_cast<std::uint8_t>(child_level + 1);
  }
}

void string_tree::submit(key_op& op, tessera::context& ctx) {
  ctx.spawn(ctx.make_task<op_task>(this, &op));
}

void string_tree::submit_group(std::span<key_op* const> ops, tessera::context& ctx) {
  // Sixteen at a time: a pipelined batch's requests, their nodes' lines in flight together.
  constexpr std::size_t group = 16;
  std::array<group_place, group> at{};
  std::array<std::size_t, group> position{};
  for (std::size_t from = 0; from < ops.size(); from += group) {
    const std::span<key_op* const> g = ops.subspan(from, std::min(group, ops.size() - from));
    inner_node* const root = load_root();
    const std::uint8_t top = root->level();
    for (std::size_t j = 0; j < g.size(); ++j) at[j] = group_place{root, nullptr, top};
    // Level by level over the group: each request one node down, read coupled (as
    // descend_coupled: version, search, version again), the node it reaches prefetched, so the
    // group's misses on a level overlap. A request whose read fails (a writer inside, a key
    // beyond the node) stays where it is, for its task.
    for (std::uint8_t lv = top; lv > 0; --lv) {
      for (std::size_t j = 0; j < g.size(); ++j) {
        if (at[j].level != lv) continue;
        auto* n = static_cast<inner_node*>(at[j].node);
        const auto version = tessera::coupled_begin(n);
        if (!version || n->beyond(g[j]->key)) continue;
        void* below = n->child_for(g[j]->key);
        if (below == nullptr || !tessera::coupled_valid(n, *version)) continue;
        const auto next = static_cast<std::uint8_t>(lv - 1);
        at[j] = group_place{below, lv == 1 ? n : nullptr, next};
        prefetch_node(below, next);
      }
    }
    // The leaves' search lines (fences, the index's probes), each read under its leaf's latch
    // taken at once; a leaf whose latch is held is left to the request's task.
    for (std::size_t j = 0; j < g.size(); ++j) {
      if (at[j].level != 0) continue;
      auto* l = static_cast<leaf*>(at[j].node);
      if (!tessera::coupled_write_begin(l)) continue;
      prefetch_search(*l);
      tessera::coupled_write_end(l);
    }
    // The part of each leaf's index that its search ends in, the probes' lines now on their way.
    for (std::size_t j = 0; j < g.size(); ++j) {
      if (at[j].level != 0) continue;
      auto* l = static_cast<leaf*>(at[j].node);
      if (!tessera::coupled_write_begin(l)) continue;
      prefetch_index_part(*l, g[j]->key);
      tessera::coupled_write_end(l);
    }
    // The slot each search will end at, its index's lines now on their way (batch slot
    // prefetching: the slots' misses overlap, where each search waited for its own).
    // (Its position is where the request's search starts, checked, leaf_access::expect.)
    for (std::size_t j = 0; j < g.size(); ++j) {
      position[j] = no_position;
      if (at[j].level != 0) continue;
      auto* l = static_cast<leaf*>(at[j].node);
      if (!tessera::coupled_write_begin(l)) continue;
      position[j] = prefetch_slot(*l, g[j]->key);
      tessera::coupled_write_end(l);
    }
    for (std::size_t j = 0; j < g.size(); ++j) {
      if (at[j].level == 0 &&
          complete_at_leaf(*this, *g[j], *static_cast<leaf*>(at[j].node), at[j].parent,
                           position[j], ctx)) {
        continue;
      }
      ctx.spawn(ctx.make_task<op_task>(this, g[j], at[j].node, at[j].level, at[j].parent));
    }
  }
}

void string_tree::submit_multi(const multi_request& r, std::span<key_op* const> ops,
                               tessera::context& ctx) {
  ctx.spawn(ctx.make_task<multi_task>(this, r, ops));
}

void string_tree::apply_exclusive(key_op& op) { apply_exclusive(op, steady_ms()); }

void string_tree::apply_exclusive(key_op& op, std::int64_t now_ms) {
  leaf* l = leaf_for(op.key);
  leaf_access a(*this, *l, op.writes, now_ms);
  op.apply(op, a);
  if (l->slots.size() > leaf_capacity) link_exclusive(split(*this, *l), 0);
}

void string_tree::walk(leaf_walk& w, tessera::context& ctx) {
  ctx.spawn(ctx.make_task<walk_task>(this, &w));
}

}  // namespace server
