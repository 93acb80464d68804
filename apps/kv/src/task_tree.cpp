// kv::task_tree — see kv/task_tree.h for the design; the tasks live here.
#include "kv/task_tree.h"

#include <algorithm>
#include <array>
#include <iterator>
#include <vector>

#include <tessera/coupled_write.h>

#include "kv/node_ops.h"
#include "test_hooks.h"

namespace kv {
namespace {

using tessera::access;

tessera::resource_hints hints_for(tree_sync sync, std::uint8_t level) {
  tessera::resource_hints h;
  switch (sync) {
    case tree_sync::automatic:
      // Inner nodes: almost only read, touched by every operation. Leaves: read and written.
      if (level > 0) {
        h.read_ratio = 0.99;
        h.frequency = tessera::frequency::high;
      } else {
        h.read_ratio = 0.7;
        h.frequency = tessera::frequency::normal;
      }
      break;
    case tree_sync::spinlock: h.primitive = tessera::primitive::spinlock; break;
    case tree_sync::rwlatch: h.primitive = tessera::primitive::rwlatch; break;
    case tree_sync::optimistic: h.primitive = tessera::primitive::optimistic_latch; break;
    case tree_sync::scheduling: h.primitive = tessera::primitive::scheduling; break;
  }
  return h;
}

node* node_of(const tessera::task& t) noexcept {
  return static_cast<node*>(const_cast<void*>(t.data()));
}

void visit(const task_tree& tree, tessera::task& t, node* n, access mode) noexcept {
  t.annotate_resource(n, mode, tree.visit_bytes());
}

/// One level of a coupled descent: if `at` is above `stop` and the read of `n` validates with `k`
/// in its range, moves `n` to its child covering `k` (setting `above` to `n` when it goes down
/// from level 1) and returns true; otherwise changes nothing and returns false.
[[gnu::always_inline]] inline bool descend_coupled_once(node*& n, std::uint8_t& at, key_type k,
                                                        std::uint8_t stop, node*& above) noexcept {
  if (at <= stop) return false;
  const auto version = tessera::coupled_begin(n);
  if (!version || must_move_right(*n, k)) return false;
  node* below = child_for(*n, k);
  if (!tessera::coupled_valid(n, *version) || below == nullptr) return false;
  if (at == 1) above = n;
  n = below;
  --at;
  return true;
}

/// The lowest level a coupled descent towards `level` reads: not `level`, nor below `coupled`.
[[nodiscard]] inline std::uint8_t coupled_stop(std::uint8_t coupled, std::uint8_t level) noexcept {
  return coupled > level ? static_cast<std::uint8_t>(coupled - 1) : level;
}

/// Moves `next` (on `next_level`, above `level`, reached through a validated read) down through
/// the levels the tree reads coupled (task_tree::coupled_level), reading each node in this run
/// instead of a run of its own; stops at `level`, at the first level not read coupled, at a node
/// whose range ends before `k` (the ordinary step follows its right link), and at a node whose
/// read does not validate (the ordinary step reads it again under its primitive). Sets `parent`
/// when it goes down from level 1. Only inner nodes are read here, and they are never freed.
[[gnu::noinline]] void descend_coupled_from(std::uint8_t coupled, node*& next,
                                            std::uint8_t& next_level, key_type k,
                                            std::uint8_t level, node** parent) noexcept {
  // In locals, stored back once: through the references the loop kept them in memory (a load
  // and a store of each per level, callgrind).
  node* n = next;
  std::uint8_t at = next_level;
  node* above = nullptr;  // the node read on level 1, if the loop went down from it
  const std::uint8_t stop = coupled_stop(coupled, level);
  while (descend_coupled_once(n, at, k, stop, above)) {
  }
  next = n;
  next_level = at;
  if (parent != nullptr && above != nullptr) *parent = above;
}
/// The test inline, the loop out of line: a step below the coupled levels (every step with
/// coupled_bytes 0) pays a load and a compare, and the step's own search stays inlined.
[[gnu::always_inline]] inline void descend_coupled(const task_tree& tree, node*& next,
                                                   std::uint8_t& next_level, key_type k,
                                                   std::uint8_t level, node** parent) noexcept {
  const std::uint8_t coupled = tree.coupled_level();
  if (next_level > level && next_level >= coupled)
    descend_coupled_from(coupled, next, next_level, k, level, parent);
}

/// Issues prefetches for `leaf`'s header and the lines a search reads (metadata and keys), so
/// that the misses of one leaf overlap: a search's probes depend on each other. A constant
/// count: the loop unrolls (a bound read from the options cost four instructions a line). A
/// writer's header line (latch and version) is fetched for writing.
void prefetch_leaf(const node* leaf, bool write = false) noexcept {
  constexpr std::size_t bytes = header_bytes + node_search_bytes;
  const std::byte* const block = header_of(leaf);
  if (write)
    __builtin_prefetch(block, 1);
  else
    __builtin_prefetch(block);
  for (std::size_t offset = 64; offset < bytes; offset += 64) __builtin_prefetch(block + offset);
}

/// A lookup of `leaf` (reached through a validated read in this run; see coupled_read.h) read
/// coupled: true with `r` answered if the read validated. False where the ordinary task must read
/// it, having changed nothing: a primitive without a version, a writer inside, a dead leaf, a key
/// at or beyond its high key (the task's step restarts, or follows the right link).
[[gnu::always_inline]] inline bool lookup_coupled(const node& leaf, request& r) noexcept {
  const auto version = tessera::coupled_begin(&leaf);
  if (!version || leaf.dead() || must_move_right(leaf, r.key)) return false;
  const auto v = leaf_lookup(leaf, r.key);
  if (!tessera::coupled_valid(&leaf, *version)) return false;
  r.status = v ? request_status::ok : request_status::not_found;
  if (v) r.value = *v;
  return true;
}

/// What the leaf of a request reached coupled in submit() allows while the tree fits
/// coupled_leaf_bytes: read (lookups) or written (every other request but a scan, which may
/// span leaves) in submit itself.
bool completes_coupled(request_type type) noexcept { return type != request_type::scan; }

/// Annotates `t` for the root on its way to `level`.
void start_at_root(const task_tree& tree, tessera::task& t, std::uint8_t level,
                   access mode) noexcept {
  node* root = tree.load_root();
  visit(tree, t, root, root->level() == level ? mode : access::read);
}

/// Where one step of a descent (step_towards) left the task. A torn run returns `this` like a
/// moved one: the runtime drops what a torn run returns and reruns the task as it was.
enum class step : std::uint8_t {
  arrived,  ///< `n` is the node on the target level that covers the key: work on it
  moved,    ///< the task is annotated with the next node (or the root): return `this`
  torn,     ///< the read of `n` did not validate, nothing changed: return `this`
};

/// Right links an operation follows before it starts again at the root (see step_towards).
constexpr std::uint8_t max_right_moves = 2;
/// step_towards's right-move count once the operation started again at the root for right
/// moves: it follows right links from then on, however many.
constexpr std::uint8_t right_moves_restarted = 255;

/// One step towards the node at `level` whose range holds `k`. Returns true when `n` is that
/// node (alive, k in range); otherwise re-annotates `t` for the next node and returns false.
/// The next node is annotated with `mode` if it is on the target level, as a reader otherwise
/// (writers are annotated one level early, [MxTasks] Fig. 6). `parent`, if given, is set to `n`
/// when the step goes down from level 1 to a leaf, and cleared when it meets a dead leaf (the
/// task then starts again at the root).
///
/// `right_moves`, if given, counts the right links followed; past `max_right_moves` the task
/// starts again at the root instead, once per operation (a dead leaf's restart allows another).
/// A task that read a parent long ago (it waited in a queue behind thousands of others) may
/// land left of a run of leaves split since; walking that run costs one execution, and one trip
/// through the queue, per leaf, while a fresh descent costs the height. After that descent the
/// task follows right links however many: a fresh descent that still lands left of its leaf
/// met splits whose separators are not in the parent yet (their link tasks pending, e.g. queued
/// on the worker that owns the parent's pool), and each further restart would take it back to
/// the same leaf, a loop of root, leaf and right links run until those link tasks ran. Only for
/// targets on level 0, which the root always reaches.
///
/// Reads `n`, then validates, then changes `t` (and `parent`, `right_moves`): the order that
/// lets a task declare `validates_first` (tessera/task.h), so that an optimistic read of `n`
/// takes no copy of the task. After a failed validation it returns step::torn with nothing
/// changed: the caller returns (torn_run(), what it returns is dropped), and the runtime reruns
/// the task as it is.
step step_towards(const task_tree& tree, tessera::task& t, tessera::context& ctx, node* n,
                  key_type k, std::uint8_t level, access mode, node** parent = nullptr,
                  std::uint8_t* right_moves = nullptr) noexcept {
  const std::uint8_t here = n->level();
  if (n->dead()) {
    // Start again at the root, not at the left neighbour the leaf had when it died: that neighbour
    // may have been merged and retired since, in an epoch before this task's operation began (the
    // dead leaf stays reachable through the right link of the node it merged into), so following it
    // would be a use-after-free (task_tree_race in task_tree_test.cpp forces that interleaving with
    // test hooks). The root is always live; a descent reaches the leaf's range through its left
    // neighbour, which covers it once the merge is done.
    if (!ctx.validate()) return step::torn;  // nothing changed yet
    if (parent != nullptr) *parent = nullptr;
    if (right_moves != nullptr) *right_moves = 0;
    start_at_root(tree, t, level, mode);
    return step::moved;
  }
  enum class move : std::uint8_t { right, down };
  move how;
  node* next;
  if (must_move_right(*n, k)) {
    how = move::right;
    next = n->right();
  } else if (here > level) {
    how = move::down;
    next = child_for(*n, k);
  } else {
    return step::arrived;
  }
  if (!ctx.validate()) return step::torn;  // nothing changed yet
  std::uint8_t next_level = here;
  switch (how) {
    case move::right:
      if (right_moves != nullptr && *right_moves != right_moves_restarted &&
          ++*right_moves > max_right_moves) {
        *right_moves = right_moves_restarted;
        if (parent != nullptr) *parent = nullptr;
        start_at_root(tree, t, level, mode);
        return step::moved;
      }
      break;
    case move::down:
      next_level = static_cast<std::uint8_t>(here - 1);
      if (parent != nullptr && here == 1) *parent = n;
      break;
  }
  if (next == nullptr) {
    // A validated read of a live node has its links; kept as a guard: stay on this node.
    next = n;
    next_level = here;
  } else {
    descend_coupled(tree, next, next_level, k, level, parent);
  }
  visit(tree, t, next, next_level == level ? mode : access::read);
  return step::moved;
}

/// Inserts separator `sep` with right child `right` into the node at `child_level + 1`
/// covering `sep`, splitting upward as needed; creates a new root when the split node was it.
/// Spawned without a data annotation it starts from the root. The splitting task may instead
/// annotate it (start_at) with the parent it came down from, which saves the descent: that node
/// is on the parent level and its low fence is <= `sep`, so right links lead from it to the node
/// covering `sep` (inner nodes are never freed).
class link_task final : public tessera::task {
 public:
  link_task(task_tree* tree, node* left, key_type sep, node* right, std::uint8_t child_level)
      : m_tree(tree), m_left(left), m_right(right), m_sep(sep), m_level(child_level) {
    // High: until the parent holds the separator, operations routed to `left` for keys now in
    // `right` take a detour; behind the queued operations the link would wait for all of them.
    annotate(tessera::priority::high);
  }

  /// Starts at `parent` (level child_level + 1, low fence <= sep) instead of the root.
  void start_at(node* parent) noexcept { visit(*m_tree, *this, parent, access::write); }

  tessera::task* execute(tessera::context& ctx) override {
    if (data() == nullptr) return start();
    node* n = node_of(*this);
    const auto parent_level = static_cast<std::uint8_t>(m_level + 1);
    if (step_towards(*m_tree, *this, ctx, n, m_sep, parent_level, access::write) != step::arrived)
      return this;  // moved on, or torn
    if (!is_full(*n)) {
      inner_insert(*n, m_sep, m_right);
      return nullptr;
    }
    node* sibling = m_tree->make_node(n->kind(), n->level());
    const key_type up = split(*n, *sibling);
    inner_insert(m_sep < up ? *n : *sibling, m_sep, m_right);
    // Continue one level up with the new split, from the root.
    m_left = n;
    m_right = sibling;
    m_sep = up;
    m_level = parent_level;
    return start();
  }

 private:
  tessera::task* start() {
    node* root = m_tree->load_root();
    if (root->level() > m_level) {
      annotate(tessera::priority::high);  // (again, after waiting for a new root at low)
      start_at_root(*m_tree, *this, static_cast<std::uint8_t>(m_level + 1), access::write);
      return this;
    }
    clear_annotations();  // (after a split one level below: still annotated with that node)
    if (root != m_left) {
      // The root was split too and its own new root is not installed yet: try again later.
      annotate(tessera::priority::low);
      return this;
    }
    node* fresh = m_tree->make_node(kind_for_level(static_cast<std::uint8_t>(m_level + 1)),
                                    static_cast<std::uint8_t>(m_level + 1));
    make_root(*fresh, m_left, m_sep, m_right);
    if (m_tree->replace_root(m_left, fresh)) return nullptr;
    m_tree->runtime().destroy_resource(fresh);  // never published
    return this;
  }

  task_tree* m_tree;
  node* m_left;
  node* m_right;
  key_type m_sep;
  std::uint8_t m_level;
};

/// Removes an empty leaf (see kv/task_tree.h): unhook from the parent, kill, merge, retire.
class unlink_task final : public tessera::task {
 public:
  unlink_task(task_tree* tree, node* leaf, key_type key) : m_tree(tree), m_leaf(leaf), m_key(key) {}

  tessera::task* execute(tessera::context& ctx) override {
    switch (m_phase) {
      case phase::unhook: return unhook(ctx);
      case phase::kill: return kill();
      case phase::merge: return merge(ctx);
    }
    return nullptr;
  }

 private:
  enum class phase : std::uint8_t { unhook, kill, merge };

  tessera::task* unhook(tessera::context& ctx) {
    if (data() == nullptr) {
      node* root = m_tree->load_root();
      if (root->level() < 1) return nullptr;  // the leaf is the root: keep it
      start_at_root(*m_tree, *this, 1, access::write);
      return this;
    }
    node* p = node_of(*this);
    if (step_towards(*m_tree, *this, ctx, p, m_key, 1, access::write) != step::arrived)
      return this;  // moved on, or torn
    const std::size_t i = child_index(*p, m_key);
    if (i == 0 || p->child(i) != m_leaf) return nullptr;  // leftmost child, or moved: keep it
    m_left = p->child(i - 1);
    m_sep = p->key(i - 1);
    // Drop separator i-1 and child i: child i-1 now covers the leaf's range in p's view, and
    // searches reach the leaf through the left neighbour's right link until it is merged.
    const std::size_t count = p->count();
    for (std::size_t j = i; j < count; ++j) {
      p->set_key(j - 1, p->key(j));
      p->set_child(j, p->child(j + 1));
    }
    p->set_count(count - 1);
    m_phase = phase::kill;
    visit(*m_tree, *this, m_leaf, access::write);
    return this;
  }

  tessera::task* kill() {
    node* leaf = node_of(*this);
    if (leaf->count() != 0) {
      // Filled again meanwhile: hang it back under its parent.
      return m_tree->runtime().make_task<link_task>(m_tree, m_left, m_sep, leaf, 0);
    }
    leaf->set_dead();
    m_phase = phase::merge;
    clear_annotations();
    start_at_root(*m_tree, *this, 0, access::write);
    return this;
  }

  tessera::task* merge(tessera::context& ctx) {
#if defined(TESSERA_DEBUG_CHECKS)
    if (auto* hook = test_hooks::unlink_merging.load(std::memory_order_acquire)) hook(m_leaf);
#endif
    node* n = node_of(*this);
    if (step_towards(*m_tree, *this, ctx, n, m_sep - 1, 0, access::write) != step::arrived)
      return this;  // moved on, or torn
    if (n->right() != m_leaf || n->high_key() != m_sep) return nullptr;  // cannot happen
    n->set_high_key(m_leaf->high_key());
    n->set_right(m_leaf->right());
    m_tree->retire_node(m_leaf);
    return nullptr;
  }

  task_tree* m_tree;
  node* m_leaf;
  node* m_left = nullptr;
  key_type m_key;
  key_type m_sep = 0;
  phase m_phase = phase::unhook;
};

/// insert_at_leaf where `leaf` is full: splits it, inserts `r` into the half covering its key,
/// and returns the link task (see insert_at_leaf). Out of line: one insert in a few dozen splits,
/// and kept apart its register saves stay off the inserts that do not.
[[gnu::noinline]] tessera::task* split_and_insert(task_tree& tree, node& leaf, request& r,
                                                  node* parent, tessera::context& ctx) {
  node* right = tree.make_node(node_kind::leaf, 0);
  const key_type sep = split(leaf, *right);
  const insert_result i = leaf_insert(r.key < sep ? leaf : *right, r.key, r.value);
  (void)i;  // absent before the split, so inserted now
  r.status = request_status::ok;
  auto* link = ctx.make_task<link_task>(&tree, &leaf, sep, right, 0);
  if (parent != nullptr) link->start_at(parent);
  return link;
}

/// Inserts (or upserts) `r` into `leaf`, which covers its key and whose writers' side the caller
/// holds (a task annotated as its writer, or a coupled write). A full leaf is split: its new
/// right node is linked as its sibling at once, and the task that links the separator into the
/// parent is returned for the caller to spawn (starting at `parent`, the branch node the caller
/// came down from, if known; else at the root); nullptr when no split was needed.
[[gnu::always_inline]] inline tessera::task* insert_at_leaf(task_tree& tree, node& leaf,
                                                            request& r, node* parent,
                                                            tessera::context& ctx) {
  if (r.type == request_type::upsert) {
    if (leaf_upsert(leaf, r.key, r.value) != upsert_result::full) {
      r.status = request_status::ok;
      return nullptr;
    }
  } else {
    const insert_result i = leaf_insert(leaf, r.key, r.value);
    if (i != insert_result::full) {
      r.status = i == insert_result::inserted ? request_status::ok : request_status::exists;
      return nullptr;
    }
  }
  return split_and_insert(tree, leaf, r, parent, ctx);
}

/// Removes `r`'s key from `leaf` (covering it, its writers' side held as for insert_at_leaf).
/// Returns the task that unlinks the leaf if it became empty, for the caller to spawn.
tessera::task* remove_at_leaf(task_tree& tree, node& leaf, request& r, tessera::context& ctx) {
  if (!leaf_remove(leaf, r.key)) {
    r.status = request_status::not_found;
    return nullptr;
  }
  r.status = request_status::ok;
  return leaf.count() == 0 ? ctx.make_task<unlink_task>(&tree, &leaf, r.key) : nullptr;
}

/// One request: descends one node per execution and performs the operation at the leaf.
class op_task final : public tessera::task {
 public:
  /// Starts at the root (annotated by the caller, start_at_root).
  op_task(task_tree* tree, request* r) : m_tree(tree), m_req(r) {}
  /// Starts at `n` (on the way from the root to the leaf covering the request's key), with
  /// `parent` the branch node above it if `n` is a leaf: every field written once.
  op_task(task_tree* tree, request* r, node* n, access mode, node* parent)
      : m_tree(tree), m_req(r), m_parent(parent) {
    visit(*tree, *this, n, mode);
  }

  /// Every change below (re-annotation, m_parent, m_right_moves, the request) follows a
  /// successful ctx.validate() (step_towards reads, validates, then moves): an optimistic read
  /// of a node takes no copy of the task (tessera/task.h).
  static constexpr bool validates_first = true;

  tessera::task* execute(tessera::context& ctx) override {
    request& r = *m_req;
    node* n = node_of(*this);
#if defined(TESSERA_DEBUG_CHECKS)
    if (auto* hook = test_hooks::op_visiting.load(std::memory_order_acquire)) hook(n);
#endif
    const bool writes = r.type != request_type::lookup && r.type != request_type::scan;
    const key_type k = r.type == request_type::scan ? r.scan_from : r.key;
    if (step_towards(*m_tree, *this, ctx, n, k, 0, writes ? access::write : access::read,
                     &m_parent, &m_right_moves) != step::arrived)
      return this;  // moved on, or torn
    if (writes && mode() != access::write) {
      if (!ctx.validate()) return this;         // torn (validates first: nothing changed yet)
      visit(*m_tree, *this, n, access::write);  // reached a leaf as a reader (the root was a leaf)
      return this;
    }
    switch (r.type) {
      case request_type::lookup: {
        const auto v = leaf_lookup(*n, k);
        if (!ctx.validate()) return this;  // torn: the runtime runs us again as we are
        r.status = v ? request_status::ok : request_status::not_found;
        if (v) r.value = *v;
        break;
      }
      case request_type::scan: {
        // Copies into the caller's buffer are repeated identically if the read is retried.
        const std::size_t want = r.scan_count - r.scanned;
        const std::size_t got = leaf_scan(*n, k, r.scan_out + r.scanned, want);
        node* next = n->right();
        const key_type high = n->high_key();
        if (!ctx.validate()) return this;  // torn
        r.scanned += static_cast<std::uint32_t>(got);
        if (r.scanned < r.scan_count && next != nullptr && high != key_infinity) {
          r.scan_from = high;
          visit(*m_tree, *this, next, access::read);
          return this;
        }
        r.status = request_status::ok;
        break;
      }
      case request_type::insert:
      case request_type::upsert: insert(r, *n, ctx); break;
      case request_type::update:
        r.status = leaf_update(*n, k, r.value) ? request_status::ok : request_status::not_found;
        break;
      case request_type::remove:
        if (tessera::task* unlink = remove_at_leaf(*m_tree, *n, r, ctx)) ctx.spawn(unlink);
        break;
    }
    if (r.on_done != nullptr) r.on_done(r);
    return nullptr;
  }

 private:
  void insert(request& r, node& leaf, tessera::context& ctx) {
    if (tessera::task* link = insert_at_leaf(*m_tree, leaf, r, m_parent, ctx)) ctx.spawn(link);
  }

  task_tree* m_tree;
  request* m_req;
  /// The branch node this task came down from to the leaf level, where a split of the leaf
  /// links its new right node; nullptr if unknown (the root was a leaf, or the task met a dead
  /// leaf and started again at the root).
  node* m_parent = nullptr;
  /// Right links followed since the operation's start, or right_moves_restarted once it started
  /// again at the root for them (see step_towards).
  std::uint8_t m_right_moves = 0;
};

/// A write of `leaf` (an update, insert, upsert or remove; the leaf reached through a validated
/// read in this run) done coupled: true with `r` answered if the leaf's writers' side could be
/// taken at once (tessera/coupled_write.h: spinlock, rwlatch, optimistic_latch, none). False
/// where the ordinary task must write it, having changed nothing: a primitive serialized by its
/// pool (scheduling, optimistic_scheduled), a holder inside, a dead leaf, a key at or beyond its
/// high key. A split or an unlink the write needs is a task, spawned from `ctx` after the
/// writers' side is released (the split itself, like the leaf task's, happens under it).
[[gnu::always_inline]] inline bool write_coupled(task_tree& tree, node& leaf, request& r,
                                                node* parent, tessera::context& ctx) {
  if (!tessera::coupled_write_begin(&leaf)) return false;
  if (leaf.dead() || must_move_right(leaf, r.key)) {
    tessera::coupled_write_end(&leaf);
    return false;
  }
  tessera::task* follow = nullptr;
  switch (r.type) {
    case request_type::update:
      r.status = leaf_update(leaf, r.key, r.value) ? request_status::ok : request_status::not_found;
      break;
    case request_type::insert:
    case request_type::upsert: follow = insert_at_leaf(tree, leaf, r, parent, ctx); break;
    case request_type::remove: follow = remove_at_leaf(tree, leaf, r, ctx); break;
    case request_type::lookup:
    case request_type::scan: break;  // not writes (see completes_coupled)
  }
  tessera::coupled_write_end(&leaf);
  if (follow != nullptr) ctx.spawn(follow);
  return true;
}

/// A request whose leaf was reached coupled (completes_coupled), done in submit(): true if it
/// completed. `parent`: the branch node above the leaf, if the descent came down through one.
[[gnu::always_inline]] inline bool complete_coupled(task_tree& tree, node& leaf, request& r,
                                                   node* parent, tessera::context& ctx) {
  return r.type == request_type::lookup ? lookup_coupled(leaf, r)
                                        : write_coupled(tree, leaf, r, parent, ctx);
}

/// Where complete_coupled refused `leaf` because `k` lies at or beyond its high key (a split
/// whose separator is not in the parent yet: its link task queued, on this worker behind the
/// running task or on the worker that owns the parent's pool): its right sibling, read through a
/// validated read in this run, for submit() to try next, as the leaf task's steps would one run
/// and one trip through the queue each. nullptr where the ordinary task must take it from
/// `leaf`: `k` within it (a holder inside), a dead leaf, a writer inside, a primitive without a
/// version (spinlock, rwlatch, scheduling). Out of line: the common case never comes here.
[[gnu::noinline]] node* right_beyond(const node& leaf, key_type k) noexcept {
  const auto version = tessera::coupled_begin(&leaf);
  if (!version || leaf.dead() || !must_move_right(leaf, k)) return nullptr;
  node* const right = leaf.right();
  return tessera::coupled_valid(&leaf, *version) ? right : nullptr;
}

/// A request whose leaf `leaf` was reached coupled in submit() (completes_coupled, the tree
/// within coupled_leaf_bytes; `parent` the branch node above it, if the descent came down through
/// one): done there if it can be, following right links while its key lies beyond the leaf
/// (right_beyond), and its on_done run: returns nullptr. Where the last leaf reached refuses (a
/// holder inside, a primitive that keeps writers in its pool or no version), returns the
/// request's task, made at that leaf, for the caller to spawn. After the on_done the request may
/// belong to the caller again: it is not touched.
/// With inline_completion::counted the on_done does not run (submit(span)'s caller counts the
/// request instead).
[[gnu::always_inline]] inline tessera::task* complete_or_task(
    task_tree& tree, node* leaf, request& r, node* parent, tessera::context& ctx,
    inline_completion done = inline_completion::on_done) {
  for (;;) {
    if (complete_coupled(tree, *leaf, r, parent, ctx)) {
      if (done == inline_completion::on_done && r.on_done != nullptr) r.on_done(r);
      return nullptr;
    }
    node* const right = right_beyond(*leaf, r.key);
    if (right == nullptr) break;
    leaf = right;
  }
  const access mode = r.type == request_type::lookup ? access::read : access::write;
  return ctx.make_task<op_task>(&tree, &r, leaf, mode, parent);
}

/// Where each of a group of requests' descents stopped (descend_group).
struct group_descent {
  static constexpr std::size_t size = 32;
  std::array<node*, size> at;
  std::array<std::uint8_t, size> level;
  std::array<node*, size> parents;  ///< the branch node above each of `at`, if it is a leaf
};

/// Descends the first g.size (at most) of `requests` from the root through every level above
/// `stop`, level by level for the whole group: each request reads its node of the level and
/// prefetches the child it goes to (header and keys), which it reads a round later, after the
/// other requests' reads of the level. Read one request after another, every level would wait
/// for its misses: those levels stay in the caches but not in L1, behind the leaves' traffic.
/// A request whose read did not validate (or whose key is at or beyond a node's high key) stays
/// on that node, above `stop`: its task reads it under the node's primitive. Returns how many.
std::size_t descend_group(const task_tree& tree, std::span<request> requests, std::uint8_t stop,
                          group_descent& g) noexcept {
  const std::size_t m = std::min(group_descent::size, requests.size());
  node* const root = tree.load_root();
  const std::uint8_t top = root->level();
  for (std::size_t j = 0; j < m; ++j) {
    g.at[j] = root;
    g.level[j] = top;
    g.parents[j] = nullptr;
  }
  for (std::uint8_t level = top; level > stop; --level) {
    for (std::size_t j = 0; j < m; ++j) {
      if (g.level[j] != level) continue;
      node* above = nullptr;
      if (!descend_coupled_once(g.at[j], g.level[j], requests[j].key, stop, above)) continue;
      if (above != nullptr) g.parents[j] = above;
      if (g.level[j] > stop) prefetch_leaf(g.at[j]);  // header and keys, read next round
    }
  }
  return m;
}

/// submit(requests, ctx) for a tree larger than coupled_leaf_bytes: starts the first (up to 32) of
/// `requests`, one task each, their coupled levels read level by level for the whole group;
/// returns how many it started.
std::size_t descend_together(task_tree& tree, std::span<request> requests,
                             tessera::context& ctx) {
  // Every inner level, whatever tree_options::coupled_bytes says (0: none, as for single
  // requests): the group's prefetches overlap a level's misses, as the prefetch window does for
  // tasks, without a queued run a node, even where a level is larger than the last-level cache
  // (docs/performance-notes.md, "A batch descends every inner level").
  const std::uint8_t coupled = tree.couples_batches() ? 1 : tree.coupled_level();
  group_descent g;
  const std::size_t m = descend_group(tree, requests, coupled_stop(coupled, 0), g);
  std::array<tessera::task*, group_descent::size> made;
  for (std::size_t j = 0; j < m; ++j) {
    request& r = requests[j];
    r.scanned = 0;
    r.scan_from = r.key;
    const bool writes = r.type != request_type::lookup && r.type != request_type::scan;
    const access mode = writes && g.level[j] == 0 ? access::write : access::read;
    made[j] = ctx.make_task<op_task>(&tree, &r, g.at[j], mode, g.parents[j]);
  }
  ctx.spawn(std::span<tessera::task* const>(made.data(), m));
  return m;
}

/// Up to submit_coupled's chunk of requests between its two passes.
struct coupled_chunk {
  static constexpr std::size_t size = group_descent::size;
  std::array<tessera::task*, size> made;  ///< tasks to spawn (made[0, tasks))
  std::array<request*, size> at_leaf;     ///< requests done coupled at their leaf (second pass)
  std::array<node*, size> leaves;
  std::array<node*, size> parents;  ///< the branch node above each of `leaves`, if any
  std::size_t tasks = 0;
  std::size_t coupled = 0;  ///< at_leaf[0, coupled)
};

/// submit_coupled's first pass over `requests` (at most coupled_chunk::size): descends every
/// level above the leaves for the chunk as one group (descend_group), prefetches the leaf of each
/// request that will be done coupled and records it in `c`, makes the task of every other one.
[[gnu::noinline]] void descend_chunk(task_tree& tree, std::span<request> requests,
                                     tessera::context& ctx, coupled_chunk& c) {
  std::size_t tasks = 0;
  std::size_t coupled = 0;
  group_descent g;
  const std::size_t m = descend_group(tree, requests, 0, g);
  for (std::size_t j = 0; j < m; ++j) {
    request& r = requests[j];
    node* const n = g.at[j];
    node* const parent = g.parents[j];
    const std::uint8_t level = g.level[j];
    if (level == 0 && completes_coupled(r.type)) {
      prefetch_leaf(n, r.type != request_type::lookup);
      c.at_leaf[coupled] = &r;
      c.parents[coupled] = parent;
      c.leaves[coupled++] = n;
      continue;
    }
    // Scan progress: only a scan's task reads it (the requests done coupled are never scans).
    r.scanned = 0;
    r.scan_from = r.key;
    const bool writes = r.type != request_type::lookup && r.type != request_type::scan;
    const access mode = writes ? access::write : access::read;
    c.made[tasks++] =
        ctx.make_task<op_task>(&tree, &r, n, level == 0 ? mode : access::read, parent);
  }
  c.tasks = tasks;
  c.coupled = coupled;
}

/// submit(requests, ctx, done) for a tree within coupled_leaf_bytes: returns how many requests
/// completed inside the call. submit checks the tree's size once: a span started while the tree
/// fitted descends every request to its leaf coupled.
std::size_t submit_coupled(task_tree& tree, std::span<request> requests, tessera::context& ctx,
                           inline_completion done) {
  const std::size_t total = requests.size();  // after the batch's last on_done, `requests` is
                                              // touched no more (the caller may reuse it)
  // Tasks made and spawned in chunks: a few cache lines of pointers on the stack. A chunk goes
  // in two passes: the first (descend_chunk) descends the coupled levels of each request, makes
  // the task of every request that needs one and prefetches the leaf of each one that will be
  // done coupled; the second reads or writes those leaves (their misses overlap those of the
  // chunk's other leaves, as the prefetch window's do for tasks) and makes a task where a read
  // did not validate or a leaf's writers' side was taken.
  coupled_chunk c;
  std::size_t completed = 0;
  std::size_t i = 0;
  while (i < total) {
    const std::size_t m = std::min(coupled_chunk::size, total - i);
    descend_chunk(tree, requests.subspan(i, m), ctx, c);
    // A completion may end the caller's batch: then every request of the span completed, so this
    // is the last chunk and no task was made in it (see `total`).
    std::size_t tasks = c.tasks;
    const std::size_t coupled = c.coupled;
    for (std::size_t j = 0; j < coupled; ++j) {
      if (tessera::task* t =
              complete_or_task(tree, c.leaves[j], *c.at_leaf[j], c.parents[j], ctx, done))
        c.made[tasks++] = t;
    }
    completed += coupled - (tasks - c.tasks);
    if (tasks != 0) ctx.spawn(std::span<tessera::task* const>(c.made.data(), tasks));
    i += m;
  }
  return completed;
}

}  // namespace

std::size_t resolve_coupled_leaf_bytes(std::optional<std::size_t> given) noexcept {
  if (given.has_value()) return *given;
  const std::size_t llc = tessera::last_level_cache_bytes();
  return llc != 0 ? llc : coupled_leaf_fallback_bytes;
}

task_tree::task_tree(tessera::runtime& rt, tree_options options)
    : m_rt(rt),
      m_options(options),
      m_coupled_leaf_bytes(resolve_coupled_leaf_bytes(options.coupled_leaf_bytes)),
      m_root(nullptr) {
  m_root.store(make_node(node_kind::leaf, 0), std::memory_order_release);
}

task_tree::~task_tree() {
  // Every node is reachable from the root through child pointers or right links (the runtime is
  // idle, so no split is half linked); dead leaves were retired and are freed by the runtime.
  std::vector<node*> all;
  std::vector<node*> level_heads{m_root.load(std::memory_order_acquire)};
  while (!level_heads.empty()) {
    node* head = level_heads.back();
    level_heads.pop_back();
    for (node* n = head; n != nullptr; n = n->right()) {
      all.push_back(n);
      if (n == head && !n->is_leaf()) level_heads.push_back(n->child(0));
    }
  }
  std::sort(all.begin(), all.end());
  all.erase(std::unique(all.begin(), all.end()), all.end());
  for (node* n : all) m_rt.destroy_resource(n);
}

node* task_tree::make_node(node_kind kind, std::uint8_t level) {
  node* n = m_rt.make_resource<node>(hints_for(m_options.sync, level), kind, level);
  KV_ASSERT(level < std::size(m_level_nodes), "tree too high");
  m_level_nodes[level].fetch_add(1, std::memory_order_relaxed);
  // Levels above the highest one made hold no node: the sums below stop there (relaxed, as the
  // counts; a concurrent new root is counted by its own make_node).
  std::uint8_t top = m_top_level.load(std::memory_order_relaxed);
  while (level > top &&
         !m_top_level.compare_exchange_weak(top, level, std::memory_order_relaxed)) {
  }
  top = std::max(top, level);
  // The lowest level >= 1 whose nodes, with those of every level above, fit coupled_bytes.
  // (Relaxed: concurrent splits may store a slightly stale level; it only moves where runs split.)
  std::uint64_t bytes = 0;
  std::uint8_t coupled = 255;
  for (std::size_t l = top; l >= 1; --l) {
    bytes += m_level_nodes[l].load(std::memory_order_relaxed) * node_bytes;
    if (bytes > m_options.coupled_bytes) break;
    coupled = static_cast<std::uint8_t>(l);
  }
  // Every level, the leaves too (lookups read their leaf coupled), when the whole tree takes at
  // most coupled_leaf_bytes: it stays in the last-level cache, where no level's misses need the
  // window (a branch level over coupled_bytes, as at 1,000,000 records, included).
  if (m_options.coupled_bytes != 0) {
    std::uint64_t all = 0;
    for (std::size_t l = 0; l <= top; ++l)
      all += m_level_nodes[l].load(std::memory_order_relaxed) * node_bytes;
    if (all <= m_coupled_leaf_bytes) coupled = 0;
  }
  m_coupled_level.store(coupled, std::memory_order_relaxed);
  return n;
}

void task_tree::retire_node(node* n) {
  m_rt.retire_resource(n);
  // Counted once handed over (release, with retired_nodes()'s acquire): whoever sees the count
  // sees the node in the runtime's retired list, stamped with the epoch of this operation.
  m_retired.fetch_add(1, std::memory_order_release);
}

void task_tree::submit(request& r, tessera::context* ctx) {
  r.scanned = 0;
  r.scan_from = r.key;
  const bool writes = r.type != request_type::lookup && r.type != request_type::scan;
  const access mode = writes ? access::write : access::read;
  if (ctx != nullptr) {
    // Inside a task the upper levels are read here (coupled), and the operation's first run is
    // on the first node below them; the task is made with that annotation.
    node* n = load_root();
    std::uint8_t level = n->level();
    node* parent = nullptr;
    descend_coupled(*this, n, level, r.key, 0, &parent);
    if (level == 0 && completes_coupled(r.type) && coupled_level() == 0) {
      prefetch_leaf(n, writes);
      if (tessera::task* t = complete_or_task(*this, n, r, parent, *ctx)) ctx->spawn(t);
      return;
    }
    ctx->spawn(ctx->make_task<op_task>(this, &r, n, level == 0 ? mode : access::read, parent));
    return;
  }
  op_task* t = m_rt.make_task<op_task>(this, &r);
  start_at_root(*this, *t, 0, mode);
  m_rt.spawn(t);
}

std::size_t task_tree::submit(std::span<request> requests, tessera::context& ctx,
                              inline_completion done) {
  if (coupled_level() != 0) {
    const std::size_t total = requests.size();  // see submit_coupled
    for (std::size_t i = 0; i < total;) i += descend_together(*this, requests.subspan(i), ctx);
    return 0;
  }
  return submit_coupled(*this, requests, ctx, done);
}

std::size_t task_tree::size() const {
  const node* n = root();
  while (!n->is_leaf()) n = n->child(0);
  std::size_t total = 0;
  for (; n != nullptr; n = n->right()) total += n->dead() ? 0 : n->count();
  return total;
}

std::size_t task_tree::height() const { return static_cast<std::size_t>(root()->level()) + 1; }

}  // namespace kv
