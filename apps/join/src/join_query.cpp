// Names of the joins and the reference answer (join/join_query.h).
#include "join/join_query.h"

#include <cstdio>
#include <stdexcept>
#include <unordered_map>

namespace join {

std::string_view to_string(join_kind kind) noexcept {
  switch (kind) {
    case join_kind::customer_orders: return "customer-orders";
    case join_kind::orders_lineitem: return "orders-lineitem";
  }
  return "?";
}

join_kind parse_join_kind(std::string_view name) {
  for (const join_kind k : {join_kind::customer_orders, join_kind::orders_lineitem})
    if (name == to_string(k)) return k;
  throw std::invalid_argument("unknown join '" + std::string(name) +
                              "' (known: customer-orders, orders-lineitem)");
}

std::string to_string(const join_result& r) {
  const std::int64_t whole = r.sum / 100;
  const std::int64_t cents = r.sum % 100;
  char text[96];
  std::snprintf(text, sizeof text, "count %llu, sum %s%lld.%02lld",
                static_cast<unsigned long long>(r.count),
                r.sum < 0 && whole == 0 ? "-" : "", static_cast<long long>(whole),
                static_cast<long long>(cents < 0 ? -cents : cents));
  return text;
}

join_result reference_join(const join_input& input) {
  if (input.probe_keys.size() != input.probe_values.size())
    throw std::invalid_argument("join input: " + std::to_string(input.probe_keys.size()) +
                                " probe keys but " + std::to_string(input.probe_values.size()) +
                                " probe values");
  std::unordered_map<std::int64_t, std::uint64_t> multiplicity;
  for (const std::int64_t k : input.build_keys) ++multiplicity[k];
  join_result r;
  for (std::size_t i = 0; i < input.probe_keys.size(); ++i) {
    const auto it = multiplicity.find(input.probe_keys[i]);
    if (it == multiplicity.end()) continue;
    r.count += it->second;
    r.sum += static_cast<std::int64_t>(it->second) * input.probe_values[i];
  }
  return r;
}

}  // namespace join
