// join/join_query.h — the joins the tool runs, what a join reads, and what it answers.
//
// A join here is an equi-join of a build side (its keys) with a probe side (a key and a value
// per row) answering count(*) and the sum of the probe side's value over the matching pairs:
//
//   customer-orders:  SELECT count(*), sum(o_totalprice)    FROM customer JOIN orders
//                     ON c_custkey = o_custkey              (build customer, probe orders)
//   orders-lineitem:  SELECT count(*), sum(l_extendedprice) FROM orders JOIN lineitem
//                     ON o_orderkey = l_orderkey            (build orders, probe lineitem)
//
// Prices are integer cents. A build key may repeat: each pair counts (a multiset join).
//
//   join::join_kind k = join::parse_join_kind("orders-lineitem");  // invalid_argument if unknown
//   join::join_result r = join::reference_join(input);             // the slow, obvious answer
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace join {

enum class join_kind : std::uint8_t { customer_orders, orders_lineitem };

/// "customer-orders" or "orders-lineitem".
std::string_view to_string(join_kind kind) noexcept;
/// The kind named `name`; std::invalid_argument naming it and the known joins otherwise.
join_kind parse_join_kind(std::string_view name);

/// What a join reads: the build side's keys, the probe side's keys and values (same length).
struct join_input {
  std::span<const std::int64_t> build_keys;
  std::span<const std::int64_t> probe_keys;
  std::span<const std::int64_t> probe_values;
};

/// count(*) and the sum of the probe values over the matching pairs.
struct join_result {
  std::uint64_t count = 0;
  std::int64_t sum = 0;

  join_result& operator+=(const join_result& other) noexcept {
    count += other.count;
    sum += other.sum;
    return *this;
  }
  friend bool operator==(const join_result&, const join_result&) = default;
};

/// "count 1500000, sum 226829306447.46" (the sum in cents shown as a decimal).
std::string to_string(const join_result& r);

/// The answer computed the obvious way (a std::unordered_map of build key counts): for tests
/// and for checking small inputs. Throws std::invalid_argument if the probe columns differ in
/// length.
join_result reference_join(const join_input& input);

}  // namespace join
