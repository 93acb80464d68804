// server::string_tree — see string_tree.h; the tree's tasks live here.
#include "string_tree.h"

#include <algorithm>
#include <chrono>
#include <utility>

namespace server {
namespace {

using tessera::access;

constexpr tessera::resource_hints leaf_hints{.primitive = tessera::primitive::rwlatch};
constexpr tessera::resource_hints plain_hints{.primitive = tessera::primitive::none};

bool beyond(const leaf& l, std::string_view key) noexcept {
  return !l.high_infinite && key >= std::string_view(l.high);
}

/// Splits `l` (over capacity) in two halves; returns the new right leaf, linked as l's sibling.
leaf* split(string_tree& tree, leaf& l) {
  leaf* r = tree.make_leaf();
  const std::size_t half = l.slots.size() / 2;
  r->slots.assign(std::make_move_iterator(l.slots.begin() + static_cast<std::ptrdiff_t>(half)),
                  std::make_move_iterator(l.slots.end()));
  l.slots.resize(half);
  r->high = std::move(l.high);
  r->high_infinite = l.high_infinite;
  r->right = l.right;
  l.high = r->slots.front().key;
  l.high_infinite = false;
  l.right = r;  // published to other tasks by the leaf's latch, released after this task
  return r;
}

/// Publishes a split in the directory. Serialized by the directory lock (a spinlock resource).
class link_task final : public tessera::task {
 public:
  link_task(string_tree* tree, std::string sep, leaf* right)
      : m_tree(tree), m_sep(std::move(sep)), m_right(right) {
    annotate(tessera::priority::high);
  }
  tessera::task* execute(tessera::context&) override {
    m_tree->link(m_sep, m_right);
    return nullptr;
  }

 private:
  string_tree* m_tree;
  std::string m_sep;
  leaf* m_right;
};

/// One key_op: find the leaf (right links), apply under its latch, then on_done without it.
class op_task final : public tessera::task {
 public:
  op_task(string_tree* tree, key_op* op) : m_tree(tree), m_op(op) {}

  tessera::task* execute(tessera::context& ctx) override {
    if (m_applied) {
      m_op->on_done(*m_op, ctx);
      return nullptr;
    }
    auto* l = static_cast<leaf*>(const_cast<void*>(data()));
    if (beyond(*l, m_op->key)) {
      annotate_resource(l->right, m_op->writes ? access::write : access::read);
      return this;
    }
    leaf_access a(*m_tree, *l, m_op->writes, steady_ms());
    m_op->apply(*m_op, a);
    if (l->slots.size() > string_tree::leaf_capacity) {
      leaf* r = split(*m_tree, *l);
      auto* link = ctx.make_task<link_task>(m_tree, r->slots.front().key, r);
      link->annotate_resource(m_tree->directory_lock(), access::write);
      ctx.spawn(link);
    }
    if (m_op->on_done == nullptr) return nullptr;
    m_applied = true;
    clear_annotations();  // runs next on this worker, the latch released
    return this;
  }

 private:
  string_tree* m_tree;
  key_op* m_op;
  bool m_applied = false;
};

/// A leaf_walk: one leaf per run, left to right.
class walk_task final : public tessera::task {
 public:
  walk_task(string_tree* tree, leaf_walk* w) : m_tree(tree), m_walk(w) {}

  tessera::task* execute(tessera::context& ctx) override {
    if (m_done) {
      if (m_walk->on_done != nullptr) m_walk->on_done(*m_walk, ctx);
      return nullptr;
    }
    auto* l = static_cast<leaf*>(const_cast<void*>(data()));
    const access mode = m_walk->writes ? access::write : access::read;
    if (beyond(*l, m_walk->from)) {
      annotate_resource(l->right, mode);
      return this;
    }
    leaf_access a(*m_tree, *l, m_walk->writes, steady_ms());
    const walk_step s = m_walk->visit(*m_walk, a, *l);
    if (s == walk_step::next_leaf && l->right != nullptr) {
      m_walk->from = l->high;
      annotate_resource(l->right, mode);
      return this;
    }
    m_done = true;
    clear_annotations();
    return this;
  }

 private:
  string_tree* m_tree;
  leaf_walk* m_walk;
  bool m_done = false;
};

}  // namespace

std::int64_t steady_ms() noexcept {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// ---- leaf_access ----------------------------------------------------------------------------

std::size_t leaf_access::lower_bound(std::string_view key) const noexcept {
  const auto it = std::lower_bound(m_leaf->slots.begin(), m_leaf->slots.end(), key,
                                   [](const slot& s, std::string_view k) { return s.key < k; });
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
  value_blob* v = m_tree->make_value(std::move(bytes));
  const auto added = static_cast<std::int64_t>(v->bytes.size());
  if (i < m_leaf->slots.size() && m_leaf->slots[i].key == key) {
    slot& s = m_leaf->slots[i];
    const bool expired = s.expire_ms != 0 && s.expire_ms <= m_now;
    c.bytes.fetch_add(added - static_cast<std::int64_t>(s.value->bytes.size()),
                      std::memory_order_relaxed);
    m_tree->retire_value(s.value);
    s.value = v;
    if (!keep_ttl || expired) set_expire(s, expire_ms);
    return s;
  }
  c.keys.fetch_add(1, std::memory_order_relaxed);
  c.bytes.fetch_add(added + static_cast<std::int64_t>(key.size()) + string_tree::slot_overhead,
                    std::memory_order_relaxed);
  const std::int64_t deadline = keep_ttl ? 0 : expire_ms;
  if (deadline != 0) c.volatile_keys.fetch_add(1, std::memory_order_relaxed);
  auto it = m_leaf->slots.insert(m_leaf->slots.begin() + static_cast<std::ptrdiff_t>(i),
                                 slot{std::string(key), v, deadline});
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

string_tree::string_tree(tessera::runtime& rt)
    : m_rt(rt),
      m_dir(nullptr),
      m_dir_lock(rt.make_resource<dir_lock>({.primitive = tessera::primitive::spinlock})) {
  auto* d = rt.make_resource<directory>(plain_hints);
  d->leaves.push_back(make_leaf());
  m_dir.store(d, std::memory_order_release);
}

string_tree::~string_tree() {
  directory* d = m_dir.load(std::memory_order_acquire);
  for (leaf* l = d->leaves.front(); l != nullptr;) {
    leaf* next = l->right;
    for (slot& s : l->slots) m_rt.destroy_resource(s.value);
    m_rt.destroy_resource(l);
    l = next;
  }
  m_rt.destroy_resource(d);
  m_rt.destroy_resource(m_dir_lock);
}

leaf* string_tree::leaf_for(std::string_view key) const noexcept {
  // acquire: the directory's contents (and the leaves it names) were written before it was
  // published with the release store in link().
  const directory* d = m_dir.load(std::memory_order_acquire);
  const auto it = std::upper_bound(d->seps.begin(), d->seps.end(), key,
                                   [](std::string_view k, const std::string& s) { return k < s; });
  return d->leaves[static_cast<std::size_t>(it - d->seps.begin())];
}

leaf* string_tree::make_leaf() { return m_rt.make_resource<leaf>(leaf_hints); }

value_blob* string_tree::make_value(std::string bytes) {
  return m_rt.make_resource<value_blob>(plain_hints, value_blob{std::move(bytes)});
}

void string_tree::retire_value(value_blob* v) { m_rt.retire_resource(v); }

void string_tree::link(const std::string& sep, leaf* right) {
  directory* old = m_dir.load(std::memory_order_relaxed);  // only link() stores, serialized
  auto* d = m_rt.make_resource<directory>(plain_hints);
  d->seps.reserve(old->seps.size() + 1);
  d->leaves.reserve(old->leaves.size() + 1);
  const auto pos = std::upper_bound(old->seps.begin(), old->seps.end(), sep);
  const auto at = static_cast<std::size_t>(pos - old->seps.begin());
  d->seps.assign(old->seps.begin(), pos);
  d->seps.push_back(sep);
  d->seps.insert(d->seps.end(), pos, old->seps.end());
  d->leaves.assign(old->leaves.begin(),
                   old->leaves.begin() + static_cast<std::ptrdiff_t>(at) + 1);
  d->leaves.push_back(right);
  d->leaves.insert(d->leaves.end(), old->leaves.begin() + static_cast<std::ptrdiff_t>(at) + 1,
                   old->leaves.end());
  // release: the copy is complete before a reader can load it (leaf_for's acquire).
  m_dir.store(d, std::memory_order_release);
  m_rt.retire_resource(old);
  m_counters.leaves.fetch_add(1, std::memory_order_relaxed);
  m_counters.splits.fetch_add(1, std::memory_order_relaxed);
}

void string_tree::submit(key_op& op, tessera::context& ctx) {
  auto* t = ctx.make_task<op_task>(this, &op);
  t->annotate_resource(leaf_for(op.key), op.writes ? access::write : access::read);
  ctx.spawn(t);
}

void string_tree::apply_exclusive(key_op& op) {
  leaf* l = leaf_for(op.key);
  while (beyond(*l, op.key)) l = l->right;
  leaf_access a(*this, *l, op.writes, steady_ms());
  op.apply(op, a);
  if (l->slots.size() > leaf_capacity) {
    leaf* r = split(*this, *l);
    link(r->slots.front().key, r);
  }
}

void string_tree::walk(leaf_walk& w, tessera::context& ctx) {
  auto* t = ctx.make_task<walk_task>(this, &w);
  t->annotate_resource(leaf_for(w.from), w.writes ? access::write : access::read);
  ctx.spawn(t);
}

}  // namespace server
