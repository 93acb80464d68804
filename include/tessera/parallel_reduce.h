// tessera/parallel_reduce.h — a reduction over an index range, run as tasks (parallel_for.h).
//
//   const long long sum = tessera::parallel_reduce(rt, 0, v.size(), 0LL,
//       [&](std::size_t first, std::size_t last) {         // one piece: [first, last)
//         return std::accumulate(v.begin() + first, v.begin() + last, 0LL);
//       },
//       std::plus<>{});                                    // combines two partial results
//
// The range is split into pieces as parallel_for splits it; `map(first, last)` computes a
// piece's value, and each thread that takes part (detail/claimed_loop.h; in the blocking form the
// caller is one of them) combines the values of the pieces it ran into a slot of its own (no
// sharing, no atomics); the slots are combined at the end. The order in which values are
// combined depends on which thread ran which piece: `combine` must be associative and
// commutative, and `identity` neutral (combine(identity, x) == x). Floating-point sums may differ
// in their last bits from run to run, as with any parallel sum.
//
// From a thread that is not one of the runtime's workers, parallel_reduce(runtime&, ...) runs
// pieces itself beside helper tasks, as parallel_for(runtime&, ...) does, and returns the
// result. From a task, parallel_reduce(context&, ...) returns at once and hands the result to
// `done(ctx, result)`, which runs as a task once every piece finished (it joins the running
// task's group). If `map` or `combine` throws, the blocking form rethrows the first
// exception; in the task form, `done` does not run and the exception goes to the running task's
// group (or to runtime::take_unhandled_exceptions() without one).
#pragma once

#include <algorithm>
#include <atomic>
#include <concepts>
#include <cstddef>
#include <exception>
#include <memory>
#include <stdexcept>
#include <type_traits>
#include <utility>
#include <vector>

#include "tessera/context.h"
#include "tessera/parallel_for.h"
#include "tessera/runtime.h"

namespace tessera {

namespace detail {

/// The partial results of one reduction, one per participant (detail/claimed_loop.h), each on a
/// cache line of its own.
template <class T, class Map, class Combine>
struct reduce_state {
  struct alignas(64) slot {
    T value;
  };
  reduce_state(unsigned participants, const T& identity, Map m, Combine c)
      : slots(participants, slot{identity}), identity_value(identity), map(std::move(m)),
        combine(std::move(c)) {}

  /// A piece run by participant `w`: its value joins w's slot (only w touches it).
  void add(unsigned w, std::size_t first, std::size_t last) const {
    T& s = slots[w].value;
    s = combine(std::move(s), map(first, last));
  }
  /// After every piece: the slots combined, in worker order.
  T result() const {
    T r = identity_value;
    for (auto& s : slots) r = combine(std::move(r), std::move(s.value));
    return r;
  }

  mutable std::vector<slot> slots;
  T identity_value;
  Map map;
  Combine combine;
};

/// What the pieces and the continuation of a reduction started from a task share.
template <class T, class Map, class Combine>
struct reduce_shared {
  template <class M, class C>
  reduce_shared(unsigned participants, const T& id, M&& m, C&& c)
      : state(participants, id, std::forward<M>(m), std::forward<C>(c)) {}
  reduce_state<T, Map, Combine> state;
  std::atomic<bool> failed{false};  // a piece threw: `done` must not see a partial result
};

template <class T, class Map, class Combine>
concept reduction = std::copy_constructible<T> &&
    std::convertible_to<std::invoke_result_t<const Map&, std::size_t, std::size_t>, T> &&
    std::convertible_to<std::invoke_result_t<const Combine&, T, T>, T>;

}  // namespace detail

/// Reduces [first, last) and returns the result. From a thread that is not a worker of `rt` (the
/// form for tasks is below), which runs pieces too, as parallel_for(runtime&, ...) does;
/// rethrows the first exception of `map` or `combine`.
template <class T, class Map, class Combine>
  requires detail::reduction<T, std::decay_t<Map>, std::decay_t<Combine>>
T parallel_reduce(runtime& rt, std::size_t first, std::size_t last, T identity, Map&& map,
                  Combine&& combine, loop_options options = {}) {
  if (rt.current_worker()) {
    throw std::logic_error(
        "tessera::parallel_reduce(runtime&, ...) called from a task of the same runtime: it "
        "would block its worker; use parallel_reduce(context&, ...), which calls `done`");
  }
  if (!detail::loop_range_ok(first, last)) return identity;
  const unsigned participants = rt.active_workers();
  // One slot per participant: the caller's is 0, helper i's is i.
  const detail::reduce_state<T, std::decay_t<Map>, std::decay_t<Combine>> state(
      participants, identity, std::forward<Map>(map), std::forward<Combine>(combine));
  detail::run_claimed_loop(rt, first, last, options, participants,
                           [&state](std::size_t f, std::size_t l, unsigned who) {
                             state.add(who, f, l);
                           });
  return state.result();  // run_claimed_loop's wait orders every slot's writes before this
}

/// From inside a task: reduces [first, last) in helper tasks (as parallel_for(context&, ...)) and
/// calls `done(ctx, result)` in a task of its own when every piece finished. Returns at once.
template <class T, class Map, class Combine, class Done>
  requires detail::reduction<T, std::decay_t<Map>, std::decay_t<Combine>> &&
           std::invocable<std::decay_t<Done>&, context&, T>
void parallel_reduce(context& ctx, std::size_t first, std::size_t last, T identity, Map&& map,
                     Combine&& combine, Done&& done, loop_options options = {}) {
  using shared = detail::reduce_shared<T, std::decay_t<Map>, std::decay_t<Combine>>;
  runtime& rt = ctx.runtime();
  const bool any = detail::loop_range_ok(first, last);  // empty: `done` gets the identity
  // One slot per participant (claimed_loop.h): helper i's is i.
  const unsigned participants = std::max(1u, rt.active_workers());
  auto s = std::make_shared<shared>(participants, identity, std::forward<Map>(map),
                                    std::forward<Combine>(combine));
  const group g = rt.make_group();
  if (any) {
    try {
      detail::run_claimed_loop_in_tasks(ctx, g, first, last, options, participants,
                                        [s](std::size_t f, std::size_t l, unsigned who) {
                                          try {
                                            s->state.add(who, f, l);
                                          } catch (...) {
                                            // read after the group completed
                                            s->failed.store(true, std::memory_order_relaxed);
                                            throw;
                                          }
                                        });
    } catch (...) {  // nothing was spawned (no memory)
      rt.detach(g);
      throw;
    }
  }
  // The group's completion orders every piece (its slot writes, the flag) before this task.
  ctx.when_done(g, [s, d = std::forward<Done>(done)](context& c) mutable {
    if (!s->failed.load(std::memory_order_relaxed)) d(c, s->state.result());
  });
}

}  // namespace tessera
