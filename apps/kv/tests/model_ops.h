#pragma once
// The point operations of the differential tests: each is applied to the tree under test and to
// a std::map model, and the two must answer the same. A failed assertion returns from
// apply_point_op only: callers stop on ::testing::Test::HasFatalFailure().

#include <gtest/gtest.h>

#include <map>
#include <optional>

#include "kv/node.h"

namespace kv::test {

enum class point_op { insert, update, upsert, remove, lookup };

template <class Tree>
void apply_point_op(Tree& tree, std::map<key_type, value_t>& model, point_op op, key_type k,
                    value_t v) {
  switch (op) {
    case point_op::insert:
      ASSERT_EQ(tree.insert(k, v), model.emplace(k, v).second) << "insert " << k;
      return;
    case point_op::update: {
      const auto it = model.find(k);
      ASSERT_EQ(tree.update(k, v), it != model.end()) << "update " << k;
      if (it != model.end()) it->second = v;
      return;
    }
    case point_op::upsert:
      tree.upsert(k, v);
      model[k] = v;
      return;
    case point_op::remove: ASSERT_EQ(tree.remove(k), model.erase(k) == 1) << "remove " << k; return;
    case point_op::lookup: {
      const auto it = model.find(k);
      const std::optional<value_t> found = tree.lookup(k);
      ASSERT_EQ(found.has_value(), it != model.end()) << "lookup " << k;
      if (found) {
        ASSERT_EQ(*found, it->second) << "lookup " << k;
      }
      return;
    }
  }
}

}  // namespace kv::test
