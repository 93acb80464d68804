// server::string_tree — see string_tree.h; the tree's tasks live here.
#include "string_tree.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <utility>

#include <tessera/coupled_read.h>

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
/// optimistic_scheduled.
constexpr tessera::resource_hints inner_hints{.read_ratio = 0.99,
                                              .frequency = tessera::frequency::high};
constexpr tessera::resource_hints plain_hints{.primitive = tessera::primitive::none};

bool beyond(const leaf& l, std::string_view key) noexcept {
  return !l.high_infinite && key >= std::string_view(l.high);
}

// ---- holds of multi-key requests (string_tree.h, "Multi-key requests") -----------------------
// leaf::hold: bit 31 an exclusive hold, bit 30 a writer waits, the low bits count shared holds.
// The leaf's slots are guarded by the runtime's latch, never by the hold: the hold only says who
// may go on. Taken and checked under the leaf's latch; released without it (an atomic RMW or
// store). Memory ordering: release when a hold is dropped, acquire where one is read, so a task
// that sees a hold gone also sees what its holder did before dropping it (the holder's writes to
// the leaf are published by the latch anyway).
//
// Waiting: a task that finds the hold blocking it parks on the leaf: a fresh copy of it, not
// spawned, goes onto leaf::waiters (a lock-free stack) and the task itself is done. Whoever
// changes the hold so that a parked task might go on (drops a hold, clears a `waiting` mark) then
// takes the whole stack and spawns it (wake); the tasks look at the hold again under the latch
// and park again if still blocked. No lost wake-up: the parker pushes, then loads the hold; the
// waker changes the hold, then exchanges the stack; all four seq_cst, so either the parker sees
// the change (and wakes the stack itself, itself included) or the waker sees the push. No task
// polls, so a held leaf costs its waiters nothing until the release; one worker suffices, since
// every hold is released by a request that waits only for leaves right of it (string_tree.h).
// A `waiting` mark is cleared by the writer that set it when it gets in or moves on (its leaf
// split: `marked`), or by an exclusive release; each of these wakes the stack, where shared holds
// kept out by the mark wait.

constexpr std::uint32_t hold_exclusive = 1U << 31;
constexpr std::uint32_t hold_waiting = 1U << 30;

/// Whether hold word `h` keeps out a task: a writer (and an exclusive hold) by any hold, a
/// shared hold also by a waiting writer's mark, a reader only by an exclusive hold.
bool blocked(std::uint32_t h, bool writes, bool takes_hold) noexcept {
  if (writes) return (h & ~hold_waiting) != 0;
  return (h & (takes_hold ? (hold_exclusive | hold_waiting) : hold_exclusive)) != 0;
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

/// Parks `w` (a copy, not spawned, of a task blocked on `l` by its hold, annotated with l as the
/// task was) on l. Then the hold again: a change since the task looked may have missed w, so if
/// w would no longer be blocked, wakes the stack itself.
void park(leaf& l, parked_task* w, bool writes, bool takes_hold, tessera::context& ctx) {
  parked_task* head = l.waiters.load(std::memory_order_relaxed);
  do {
    w->next_parked = head;
  } while (!l.waiters.compare_exchange_weak(head, w, std::memory_order_seq_cst,
                                            std::memory_order_relaxed));
  if (!blocked(l.hold.load(std::memory_order_seq_cst), writes, takes_hold)) wake(l, ctx);
}

[[gnu::noinline]] bool enter_held(leaf& l, std::uint32_t h, bool writes,
                                  tessera::context& ctx) {
  if (blocked(h, writes, false)) {
    if (writes) l.hold.fetch_or(hold_waiting, std::memory_order_relaxed);  // shared holds out
    return false;
  }
  if (writes) {
    // Got in: the mark served; shared holds it kept out may go on.
    l.hold.fetch_and(~hold_waiting, std::memory_order_seq_cst);
    wake(l, ctx);
  }
  return true;
}

/// Whether a task without a hold may work on `l` now (under its latch): a reader unless l is held
/// exclusively, a writer unless it is held at all (then it marks l waiting). One load on the
/// common path.
bool may_enter(leaf& l, bool writes, tessera::context& ctx) {
  const std::uint32_t h = l.hold.load(std::memory_order_acquire);
  if (h == 0) [[likely]] return true;
  return enter_held(l, h, writes, ctx);
}

/// Takes a hold on `l` (under its latch, as a writer for an exclusive hold): false if it is not
/// free for it (an exclusive hold then marks l waiting).
bool try_hold(leaf& l, bool exclusive) noexcept {
  std::uint32_t h = l.hold.load(std::memory_order_acquire);
  for (;;) {
    if (blocked(h, exclusive, true)) {
      if (exclusive) l.hold.fetch_or(hold_waiting, std::memory_order_relaxed);
      return false;
    }
    // (An exclusive hold replaces a mark: the shared holds it kept out stay out.)
    const std::uint32_t want = exclusive ? hold_exclusive : h + 1;
    if (l.hold.compare_exchange_weak(h, want, std::memory_order_acquire,
                                     std::memory_order_acquire)) {
      return true;
    }
  }
}

/// Drops a hold (without the latch) and wakes l's parked tasks. An exclusive one clears a
/// waiting mark as well: its writer looks again and marks it again if it still waits.
void release_hold(leaf& l, bool exclusive, tessera::context& ctx) {
  // seq_cst: before wake's exchange in the total order; also a release of the holder's work.
  if (exclusive) {
    l.hold.store(0, std::memory_order_seq_cst);
  } else {
    l.hold.fetch_sub(1, std::memory_order_seq_cst);
  }
  wake(l, ctx);
}

/// A writer that marked `l` waiting and now moves on without getting in (l split meanwhile):
/// clears the mark, which no task may need any more but a parked one that sets it again.
void unmark(leaf& l, tessera::context& ctx) {
  l.hold.fetch_and(~hold_waiting, std::memory_order_seq_cst);
  wake(l, ctx);
}

/// Bytes [at, at + 8) of `key`, zero-padded, as a big-endian word: for keys that share their
/// first `at` bytes, different hints order the keys as their bytes do.
std::uint64_t hint_of(std::string_view key, std::size_t at) noexcept {
  std::uint64_t w = 0;
  if (at < key.size()) std::memcpy(&w, key.data() + at, std::min<std::size_t>(8, key.size() - at));
  return __builtin_bswap64(w);
}

/// Sets l's shared prefix from its fences and every slot's hint.
void rehint(leaf& l) noexcept {
  std::size_t n = 0;
  if (!l.high_infinite) {
    while (n < l.low.size() && n < l.high.size() && l.low[n] == l.high[n]) ++n;
  }
  l.hint_offset = n;
  for (slot& s : l.slots) s.hint = hint_of(s.key, n);
}

/// The shortest separator s with left_last < s <= right_first: a prefix of right_first.
std::string shortest_separator(std::string_view left_last, std::string_view right_first) {
  std::size_t i = 0;
  while (i < left_last.size() && left_last[i] == right_first[i]) ++i;
  return std::string(right_first.substr(0, i + 1));
}

/// Splits `l` (over capacity) in two halves; links the new right leaf as l's sibling and
/// returns it with its separator (l's new high key).
string_tree::pending_link split(string_tree& tree, leaf& l) {
  leaf* r = tree.make_leaf();
  const std::size_t half = l.slots.size() / 2;
  std::string sep = shortest_separator(l.slots[half - 1].key, l.slots[half].key);
  r->slots.assign(std::make_move_iterator(l.slots.begin() + static_cast<std::ptrdiff_t>(half)),
                  std::make_move_iterator(l.slots.end()));
  l.slots.resize(half);
  r->high = std::move(l.high);
  r->high_infinite = l.high_infinite;
  r->right = l.right;
  l.high = sep;
  l.high_infinite = false;
  r->low = sep;
  rehint(l);
  rehint(*r);
  l.right = r;  // published to other tasks by the leaf's latch, released after this task
  tree.mutable_counters().leaves.fetch_add(1, std::memory_order_relaxed);
  tree.mutable_counters().splits.fetch_add(1, std::memory_order_relaxed);
  return {std::move(sep), r};
}

/// Where a descending task is: the level of the node it is annotated with (0: a leaf), the
/// right links followed since its last descent from the root, and the level-1 node it came
/// down from to a leaf (where a split of that leaf posts its separator; nullptr: unknown).
struct route {
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
    if (++r.right_moves > string_tree::max_right_moves) {
      start_at_root(tree, t, r, key, target, mode);
      return step::moved;
    }
  } else {
    if (here == 1) r.parent = n;
    if (next_level > target) descend_coupled(next, next_level, key, target, r);
  }
  visit(t, r, next, next_level, target, mode);
  return step::moved;
}

/// At a leaf the key lies beyond: follow the right link, or start again at the root.
void move_right(const string_tree& tree, tessera::task& t, route& r, const leaf& l,
                std::string_view key, access mode) noexcept {
  if (++r.right_moves > string_tree::max_right_moves || l.right == nullptr) {
    start_at_root(tree, t, r, key, 0, mode);
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

/// One key_op: descend (one inner node per run, read optimistically), apply under the leaf's
/// latch, then on_done without it.
class op_task final : public parked_task {
 public:
  /// Every change on an inner node follows a successful validate() (descend): an optimistic
  /// read takes no copy of the task. At a leaf the task holds the latch.
  static constexpr bool validates_first = true;

  op_task(string_tree* tree, key_op* op) : m_tree(tree), m_op(op) {
    start_at_root(*tree, *this, m_route, op->key, 0, op->writes ? access::write : access::read);
  }
  /// The copy of `from`, blocked at leaf `l`, that parks there.
  op_task(const op_task& from, leaf* l)
      : m_tree(from.m_tree), m_op(from.m_op), m_route(from.m_route), m_marked(from.m_op->writes) {
    annotate_resource(l, m_op->writes ? access::write : access::read);
  }

  tessera::task* execute(tessera::context& ctx) override {
    if (m_applied) {
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
    if (beyond(*l, m_op->key)) {
      if (m_marked) unmark(*l, ctx);
      m_marked = false;
      move_right(*m_tree, *this, m_route, *l, m_op->key, mode);
      return this;
    }
    if (!may_enter(*l, m_op->writes, ctx)) {  // held by a multi-key request: parks
      park(*l, ctx.make_task<op_task>(*this, l), m_op->writes, false, ctx);
      return nullptr;
    }
    m_marked = false;
    leaf_access a(*m_tree, *l, m_op->writes, steady_ms());
    m_op->apply(*m_op, a);
    if (l->slots.size() > string_tree::leaf_capacity) {
      ctx.spawn(ctx.make_task<link_task>(m_tree, l, split(*m_tree, *l), 0, m_route.parent));
    }
    if (m_op->on_done == nullptr) return nullptr;
    if (m_op->settle != nullptr && !m_op->settle(*m_op)) return nullptr;  // m_op not touched
    m_applied = true;
    clear_annotations();  // runs next on this worker, the latch released
    return this;
  }

 private:
  string_tree* m_tree;
  key_op* m_op;
  route m_route;
  bool m_applied = false;
  bool m_marked = false;  ///< set l's waiting mark (a writer that parked): unmark if moving on
};

/// A leaf_walk: descend to the leaf covering `from`, then one leaf per run, left to right.
class walk_task final : public parked_task {
 public:
  static constexpr bool validates_first = true;

  walk_task(string_tree* tree, leaf_walk* w) : m_tree(tree), m_walk(w) {
    start_at_root(*tree, *this, m_route, w->from, 0, mode());
  }
  /// The copy of `from`, blocked at leaf `l`, that parks there.
  walk_task(const walk_task& from, leaf* l)
      : m_tree(from.m_tree), m_walk(from.m_walk), m_route(from.m_route),
        m_marked(from.m_walk->writes) {
    annotate_resource(l, mode());
  }

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
      if (m_marked) unmark(*l, ctx);
      m_marked = false;
      move_right(*m_tree, *this, m_route, *l, m_walk->from, mode());
      return this;
    }
    if (!may_enter(*l, m_walk->writes, ctx)) {  // held by a multi-key request: parks
      park(*l, ctx.make_task<walk_task>(*this, l), m_walk->writes, false, ctx);
      return nullptr;
    }
    m_marked = false;
    leaf_access a(*m_tree, *l, m_walk->writes, steady_ms());
    const walk_step s = m_walk->visit(*m_walk, a, *l);
    if (s == walk_step::next_leaf && l->right != nullptr) {
      m_walk->from = l->high;
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

  string_tree* m_tree;
  leaf_walk* m_walk;
  route m_route;
  bool m_done = false;
  bool m_marked = false;  ///< as op_task's
};

/// A multi_request: one leaf after the other in key order, a descent each; a hold on every leaf
/// but the last (string_tree.h, "Multi-key requests").
class multi_task final : public parked_task {
 public:
  static constexpr bool validates_first = true;

  multi_task(string_tree* tree, const multi_request& r, std::span<key_op* const> ops)
      : m_tree(tree), m_req(r), m_ops(ops.begin(), ops.end()), m_now(steady_ms()) {
    std::stable_sort(m_ops.begin(), m_ops.end(),
                     [](const key_op* a, const key_op* b) { return a->key < b->key; });
    start_at_root(*tree, *this, m_route, m_ops.front()->key, 0, mode());
  }
  /// The copy of `from` (its state moved out), blocked at leaf `l`, that parks there.
  multi_task(multi_task& from, leaf* l)
      : m_tree(from.m_tree), m_req(from.m_req), m_ops(std::move(from.m_ops)),
        m_held(std::move(from.m_held)), m_next(from.m_next), m_now(from.m_now),
        m_route(from.m_route), m_marked(from.m_req.writes) {
    annotate_resource(l, mode());
  }

  tessera::task* execute(tessera::context& ctx) override {
    if (m_done) {
      m_req.on_done(m_req.user, ctx);
      return nullptr;
    }
    const std::string_view key = m_ops[m_next]->key;
    if (m_route.level > 0) {
      auto* n = static_cast<inner_node*>(const_cast<void*>(data()));
      descend(*m_tree, *this, ctx, n, m_route, key, 0, mode());
      return this;  // moved on, or torn
    }
    auto* l = static_cast<leaf*>(const_cast<void*>(data()));
    // The right links first: a leaf passed on the way is never waited for (no deadlock).
    if (beyond(*l, key)) {
      if (m_marked) unmark(*l, ctx);
      m_marked = false;
      move_right(*m_tree, *this, m_route, *l, key, mode());
      return this;
    }
    const bool last = l->high_infinite || m_ops.back()->key < std::string_view(l->high);
    if (last ? !may_enter(*l, m_req.writes, ctx) : !try_hold(*l, m_req.writes)) {
      // Held by another request: parks (with the holds it has) until that one lets go.
      park(*l, ctx.make_task<multi_task>(*this, l), m_req.writes, !last, ctx);
      return nullptr;
    }
    m_marked = false;
    if (!last) m_held.push_back(l);
    leaf* end = l;
    try {
      end = apply_in(*l, !last, ctx);
      if (last && m_req.commit != nullptr) m_req.commit(m_ops);
    } catch (...) {
      // An apply or the commit threw (bad_alloc): the request ends here, with its effect so far
      // (no undo), but it must not leave its leaves held: a held leaf would keep every other
      // writer, and every reader of an exclusive hold, parked for good.
      release_all(ctx);
      spawn_links(ctx);
      throw;
    }
    if (!last) {
      spawn_links(ctx);  // (the new leaves are held)
      to_next_leaf(*end);
      return this;
    }
    release_all(ctx);
    spawn_links(ctx);
    if (m_req.on_done == nullptr) return nullptr;
    m_done = true;
    clear_annotations();  // runs next on this worker, the latch released
    return this;
  }

 private:
  [[nodiscard]] access mode() const noexcept {
    return m_req.writes ? access::write : access::read;
  }

  /// On from leaf `done` (its keys applied) to the leaf of the next key: through done's right
  /// link when the key looks near (it shares with done's high key at least the prefix that
  /// done's own range shares: about as far on as done is wide), one try, then from the root;
  /// else from the root (keys far apart: a wasted leaf visit costs more than it saves).
  void to_next_leaf(const leaf& done) noexcept {
    const std::string_view key = m_ops[m_next]->key;
    if (done.right != nullptr && !done.high_infinite) {
      const std::string_view high(done.high);
      const auto diff = std::mismatch(high.begin(), high.end(), key.begin(), key.end());
      if (static_cast<std::size_t>(diff.first - high.begin()) >= done.hint_offset) {
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
  leaf* apply_in(leaf& l, bool hold, tessera::context& ctx) {
    std::size_t end = m_next;
    while (end < m_ops.size() && (l.high_infinite || m_ops[end]->key < std::string_view(l.high))) {
      ++end;
    }
    leaf* cur = &l;
    leaf* last = &l;  // the rightmost of l and the leaves split off it
    for (; m_next < end; ++m_next) {
      key_op& op = *m_ops[m_next];
      while (beyond(*cur, op.key)) cur = cur->right;  // a leaf split off in this run
      leaf_access a(*m_tree, *cur, m_req.writes, m_now);
      op.apply(op, a);
      if (cur->slots.size() > string_tree::leaf_capacity) {
        string_tree::pending_link link = split(*m_tree, *cur);
        auto* right = static_cast<leaf*>(link.right);
        if (cur == last) last = right;
        if (hold) {
          right->hold.store(hold_exclusive, std::memory_order_relaxed);  // published by l's latch
          m_held.push_back(right);
        }
        m_links.push_back(ctx.make_task<link_task>(m_tree, cur, std::move(link), 0, m_route.parent));
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

  string_tree* m_tree;
  multi_request m_req;
  std::vector<key_op*> m_ops;  ///< in key order
  std::vector<leaf*> m_held;
  std::vector<tessera::task*> m_links;  ///< made in this run, spawned at its end
  std::size_t m_next = 0;               ///< the first op not applied yet
  std::int64_t m_now;
  route m_route;
  bool m_done = false;
  bool m_marked = false;  ///< as op_task's
};

}  // namespace

std::int64_t steady_ms() noexcept {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// ---- leaf_access ----------------------------------------------------------------------------

std::size_t leaf_access::lower_bound(std::string_view key) const noexcept {
  const std::size_t at = m_leaf->hint_offset;
  if (key.size() < at || key.compare(0, at, m_leaf->low, 0, at) != 0) {
    // Not in the leaf's range (never, as the tree routes): order by the bytes alone.
    const auto it = std::lower_bound(m_leaf->slots.begin(), m_leaf->slots.end(), key,
                                     [](const slot& s, std::string_view k) { return s.key < k; });
    return static_cast<std::size_t>(it - m_leaf->slots.begin());
  }
  const std::uint64_t h = hint_of(key, at);
  const auto it = std::lower_bound(m_leaf->slots.begin(), m_leaf->slots.end(), key,
                                   [h](const slot& s, std::string_view k) {
                                     if (s.hint != h) return s.hint < h;
                                     return s.key < k;
                                   });
  return static_cast<std::size_t>(it - m_leaf->slots.begin());
}

void leaf_access::remove_at(std::size_t i) {
  slot& s = m_leaf->slots[i];
  tree_counters& c = m_tree->mutable_counters();
  c.keys.fetch_sub(1, std::memory_order_relaxed);
  c.bytes.fetch_sub(static_cast<std::int64_t>(s.key.size() + s.value->bytes.size()) +
                        string_tree::slot_overhead,
                    std::memory_order_relaxed);
  if (s.expire_ms != 0) c.volatile_keys.fetch_sub(1, std::memory_order_relaxed);
  m_tree->retire_value(s.value);
  m_leaf->slots.erase(m_leaf->slots.begin() + static_cast<std::ptrdiff_t>(i));
}

slot* leaf_access::find(std::string_view key) {
  const std::size_t i = lower_bound(key);
  if (i == m_leaf->slots.size() || m_leaf->slots[i].key != key) return nullptr;
  slot& s = m_leaf->slots[i];
  if (s.expire_ms != 0 && s.expire_ms <= m_now) {
    if (m_writes) {
      remove_at(i);
      m_tree->mutable_counters().expired.fetch_add(1, std::memory_order_relaxed);
    }
    return nullptr;
  }
  return &s;
}

slot& leaf_access::put(std::string_view key, std::string bytes, std::int64_t expire_ms,
                       bool keep_ttl) {
  tree_counters& c = m_tree->mutable_counters();
  const std::size_t i = lower_bound(key);
  const auto added = static_cast<std::int64_t>(bytes.size());
  if (i < m_leaf->slots.size() && m_leaf->slots[i].key == key) {
    slot& s = m_leaf->slots[i];
    const bool expired = s.expire_ms != 0 && s.expire_ms <= m_now;
    c.bytes.fetch_add(added - static_cast<std::int64_t>(s.value->bytes.size()),
                      std::memory_order_relaxed);
    // In place: the writer holds the leaf's latch exclusively, and every reader of a value
    // copies what it needs under the latch (string_tree.h), so no task can hold the old bytes.
    s.value->bytes = std::move(bytes);
    if (!keep_ttl || expired) set_expire(s, expire_ms);
    return s;
  }
  value_blob* v = m_tree->make_value(std::move(bytes));
  c.keys.fetch_add(1, std::memory_order_relaxed);
  c.bytes.fetch_add(added + static_cast<std::int64_t>(key.size()) + string_tree::slot_overhead,
                    std::memory_order_relaxed);
  const std::int64_t deadline = keep_ttl ? 0 : expire_ms;
  if (deadline != 0) c.volatile_keys.fetch_add(1, std::memory_order_relaxed);
  auto it = m_leaf->slots.insert(m_leaf->slots.begin() + static_cast<std::ptrdiff_t>(i),
                                 slot{std::string(key), v, deadline,
                                      hint_of(key, m_leaf->hint_offset)});
  return *it;
}

bool leaf_access::erase(std::string_view key) {
  const std::size_t i = lower_bound(key);
  if (i == m_leaf->slots.size() || m_leaf->slots[i].key != key) return false;
  const slot& s = m_leaf->slots[i];
  const bool live = s.expire_ms == 0 || s.expire_ms > m_now;
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
      for (slot& s : l->slots) m_rt.destroy_resource(s.value);
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

value_blob* string_tree::make_value(std::string bytes) {
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
