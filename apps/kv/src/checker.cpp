// kv::check_tree: see kv/checker.h.

#include "kv/checker.h"

#include <sstream>
#include <vector>

#include "kv/node_ops.h"

namespace kv {

namespace {

const char* kind_name(node_kind kind) {
  switch (kind) {
    case node_kind::leaf: return "leaf";
    case node_kind::branch: return "branch";
    case node_kind::inner: return "inner";
  }
  return "unknown";
}

class checker {
 public:
  check_result run(const node* root) {
    if (root == nullptr) return fail("the root is null");
    if (root->right() != nullptr) return fail("the root has a right sibling");
    if (root->high_key() != key_infinity) return fail("the root's high key is not +infinity");
    const std::size_t top = root->level();
    m_result.stats.height = top + 1;
    std::vector<const node*> expected{root};  // this level, as listed by the level above
    std::vector<const node*> below;
    for (std::size_t level = top + 1; level-- > 0;) {
      below.clear();
      if (!check_chain(expected, level) || !check_level(expected, level, below)) {
        return m_result;
      }
      expected.swap(below);
    }
    return m_result;
  }

 private:
  check_result fail(const std::string& message) {
    m_result.ok = false;
    m_result.message = message;
    return m_result;
  }

  static std::string where(std::size_t level, std::size_t index, const node* n) {
    std::ostringstream s;
    s << "level " << level << " node " << index << " (" << static_cast<const void*>(n) << ")";
    return s.str();
  }

  /// The right links from the leftmost node visit exactly `expected`, then end.
  bool check_chain(const std::vector<const node*>& expected, std::size_t level) {
    const node* n = expected.front();
    for (std::size_t i = 0; i < expected.size(); ++i) {
      if (n != expected[i]) {
        std::ostringstream s;
        s << "level " << level << ": the right link chain reaches " << static_cast<const void*>(n)
          << " at position " << i << " but the level above lists "
          << static_cast<const void*>(expected[i]);
        fail(s.str());
        return false;
      }
      n = n->right();
    }
    if (n != nullptr) {
      fail("level " + std::to_string(level) +
           ": the chain continues past the last node listed by the level above "
           "(a node unreachable from the root)");
      return false;
    }
    return true;
  }

  bool check_level(const std::vector<const node*>& nodes, std::size_t level,
                   std::vector<const node*>& children) {
    key_type low = 0;
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      const node* n = nodes[i];
      const std::string at = where(level, i, n);
      if (n->level() != level) {
        fail(at + ": stored level is " + std::to_string(n->level()));
        return false;
      }
      if (n->kind() != kind_for_level(static_cast<std::uint8_t>(level))) {
        fail(at + ": kind " + kind_name(n->kind()) + " does not match its level");
        return false;
      }
      const key_type high = n->high_key();
      const bool last = i + 1 == nodes.size();
      if (last != (high == key_infinity)) {
        fail(at + (last ? ": the rightmost node's high key is not +infinity"
                        : ": a node that is not rightmost has high key +infinity"));
        return false;
      }
      if (high <= low) {
        fail(at + ": empty range [" + std::to_string(low) + ", " + std::to_string(high) + ")");
        return false;
      }
      if (!check_keys(*n, at, low, high)) return false;
      ++m_result.stats.nodes;
      if (n->is_leaf()) {
        ++m_result.stats.leaves;
        m_result.stats.keys += n->count();
        if (n->count() == 0) ++m_result.stats.empty_leaves;
      } else if (!check_children(*n, at, high, children)) {
        return false;
      }
      low = high;
    }
    return true;
  }

  bool check_keys(const node& n, const std::string& at, key_type low, key_type high) {
    const std::size_t count = n.count();
    for (std::size_t j = 0; j < count; ++j) {
      const key_type k = n.key(j);
      const std::string key_at = at + ": key[" + std::to_string(j) + "] = " + std::to_string(k);
      if (j > 0 && k <= n.key(j - 1)) {
        fail(key_at + " is not above key[" + std::to_string(j - 1) +
             "] = " + std::to_string(n.key(j - 1)));
        return false;
      }
      // Leaf keys lie in [low, high); separators strictly inside (low, high).
      const bool below_low = n.is_leaf() ? k < low : k <= low;
      if (below_low) {
        fail(key_at + " is below the low fence " + std::to_string(low));
        return false;
      }
      if (beyond_high_key(k, high) || (!n.is_leaf() && k == high)) {
        fail(key_at + " is not below the high key " + std::to_string(high));
        return false;
      }
    }
    return true;
  }

  bool check_children(const node& n, const std::string& at, key_type high,
                      std::vector<const node*>& children) {
    const std::size_t count = n.count();
    for (std::size_t j = 0; j <= count; ++j) {
      const node* c = n.child(j);
      if (c == nullptr) {
        fail(at + ": child " + std::to_string(j) + " is null");
        return false;
      }
      const key_type bound = j < count ? n.key(j) : high;
      if (c->high_key() != bound) {
        fail(at + ": child " + std::to_string(j) + " has high key " +
             std::to_string(c->high_key()) + ", its parent bounds it by " + std::to_string(bound));
        return false;
      }
      children.push_back(c);
    }
    return true;
  }

  check_result m_result;
};

}  // namespace

check_result check_tree(const node* root) { return checker{}.run(root); }

}  // namespace kv
