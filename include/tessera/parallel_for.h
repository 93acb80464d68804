// tessera/parallel_for.h — a loop over an index range, run by the runtime's workers.
//
//   std::vector<double> v(n);
//   tessera::parallel_for(rt, 0, n, [&](std::size_t i) { v[i] = std::sqrt(double(i)); });
//
// The body is called once per index (`body(i)`), or once per piece if it takes two indices
// (`body(first, last)`, the form for per-piece set-up such as a local sum), or the piece's
// context and two indices (`body(ctx, first, last)`: to spawn, or to nest another loop). A piece
// holds at most `grain` indices (loop_options; by default about 16 pieces per active worker).
//
// A body without the context runs in claimed pieces (detail/claimed_loop.h): up to
// active_workers() threads take part, each taking pieces from a share of its own and half of
// another's when its own is empty, as oneTBB's and OpenMP's threads do, with a block of the
// range that stays on its core from loop to loop. Short pieces (under ~1.5 µs a batch) are
// claimed several adjacent ones at a time, up to 64, and still called one by one with their own
// bounds, each tested for a stop or a failure before it starts: a piece of a few hundred
// nanoseconds pays a claim per batch, not one each. A batch that runs over ~6 µs (the pieces
// turned long) gives its pieces not started back for other threads to take. So a piece must not
// wait for another piece of the same loop (it may be in its own thread's batch).
// - From a thread that is not one of the runtime's workers, parallel_for(runtime&, ...) runs
//   pieces on the calling thread itself, beside helper tasks on up to active_workers() - 1
//   workers, and returns when every piece finished: no sleep and wake-up per loop. So such a
//   body may run where runtime::current_worker() is empty: a body that needs its worker (e.g.
//   to index per-worker scratch space) takes the context.
// - From a task, parallel_for(context&, g, ...) spawns one helper on the calling worker and one
//   on each of the next active_workers() - 1 workers and returns at once; the loop holds group
//   `g` (with `group{}`, the running task's group) open until its last piece finished: continue
//   with context::when_done(g, ...), as with any group. The helpers are in no group, so a
//   helper whose worker is busy with a long task delays nothing: the others take its share.
// Both forms degrade rather than fail when a helper task cannot be allocated: the participants
// made before it take every share between them (from a task with none made, the calling task
// runs every piece before the call returns).
// A body with the context runs in tasks in both forms: the range is split in halves,
// recursively, a piece splitting off its upper half as a new task in the loop's group and
// keeping the lower one, so a worker's queue holds the halves oldest and biggest first, and an
// idle worker's steal takes the biggest (worker::answer_steal_request); the blocking caller
// sleeps until they are done.
//
// The body is called on many threads at once: its call operator must be const (a `mutable`
// lambda does not compile). The blocking form without the context uses it in place; the others
// move it (copy it, if it is an lvalue) once into state their pieces share, and destroy it once
// the last piece finished, before the loop counts as done.
//
// A body that throws: pieces that have not started yet are skipped (those running finish), and
// the first exception reaches the group's waiter (parallel_for(runtime&) rethrows it). To end a
// loop early without an exception (a search that found its key), give it a std::stop_token
// (loop_options::stop) and request the stop: pieces not started are skipped.
//
// Memory ordering: everything the body did happens-before parallel_for(runtime&) returns, and
// before a continuation given to when_done for the loop's group starts (group.h).
#pragma once

#include <algorithm>
#include <atomic>
#include <concepts>
#include <cstddef>
#include <functional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include "tessera/context.h"
#include "tessera/detail/claimed_loop.h"
#include "tessera/group.h"
#include "tessera/ids.h"
#include "tessera/loop_options.h"
#include "tessera/runtime.h"
#include "tessera/task.h"

namespace tessera {

/// A body called once per piece with its [first, last).
template <class B>
concept range_body = std::invocable<const B&, std::size_t, std::size_t>;
/// A body called once per piece with the running piece's context and its [first, last): it may
/// spawn, or start a nested loop with parallel_for(ctx, group{}, ...), which joins the outer
/// loop's group (the outer loop is done once the nested ones are).
template <class B>
concept context_range_body = std::invocable<const B&, context&, std::size_t, std::size_t>;
/// A body called once per index.
template <class B>
concept index_body = std::invocable<const B&, std::size_t>;
template <class B>
concept loop_body = range_body<B> || context_range_body<B> || index_body<B>;

namespace detail {

/// What the pieces of one loop share. Freed by the last piece to be destroyed (one that ran, or
/// one that never did: refused by the runtime, or dropped with its cancelled group).
template <class Body>
struct loop_state {
  using body_type = Body;
  template <class B>
  loop_state(B&& b, std::size_t g, const loop_options& o)
      : body(std::forward<B>(b)), grain(g), prio(o.priority), stop(o.stop) {}
  Body body;
  std::size_t grain;
  tessera::priority prio;
  std::stop_token stop;
  // Pieces made and not destroyed. An increment (relaxed) is made by a piece that holds a count
  // itself, before it makes the next; the decrement (the piece's destructor) is acq_rel, so the
  // piece that takes the count to 0 sees every other piece's use of the body finished before it
  // destroys the state. The runtime destroys a task before its group's count drops, so the body
  // is gone before the loop's group completes.
  std::atomic<std::size_t> pieces{1};
  // A piece threw; relaxed: only a hint that saves running the pieces not started yet (the
  // exception itself travels through the group).
  std::atomic<bool> failed{false};

  // The piece's hooks (loop_piece): `n` indices ran, or were skipped after a stop request; what
  // they return runs in the piece's place. A plain loop completes through its group: nothing.
  // (graph_run::parallel_for's state completes its node with them.)
  task* ran(context& /*ctx*/, std::size_t /*n*/) noexcept { return nullptr; }
  task* stopped(context& /*ctx*/, std::size_t /*n*/) noexcept { return nullptr; }
};

/// One piece of a loop over [first, last): splits off its upper halves as pieces of their own
/// down to the state's grain, runs the body over what is left, then the state's ran() hook.
/// `State` is loop_state or one derived from it with its own hooks.
template <class State>
class loop_piece final : public task {
  using Body = typename State::body_type;

 public:
  loop_piece(State* state, std::size_t first, std::size_t last) noexcept
      : m_state(state), m_first(first), m_last(last) {}
  ~loop_piece() {
    if (m_state->pieces.fetch_sub(1, std::memory_order_acq_rel) == 1) delete m_state;
  }
  loop_piece(const loop_piece&) = delete;
  loop_piece& operator=(const loop_piece&) = delete;

  task* execute(context& ctx) override {
    State& s = *m_state;
    if (s.failed.load(std::memory_order_relaxed)) return nullptr;
    if (s.stop.stop_requested()) return s.stopped(ctx, m_last - m_first);
    std::size_t last = m_last;
    while (last - m_first > s.grain) {
      const std::size_t mid = m_first + (last - m_first) / 2;
      auto* upper = ctx.make_task<loop_piece>(m_state, mid, last);
      upper->annotate(s.prio);
      s.pieces.fetch_add(1, std::memory_order_relaxed);  // upper's, dropped by its destructor
      m_last = last = mid;  // this piece's own range from here on
      ctx.spawn(upper);     // joins this piece's group (refused: destroyed at once)
    }
    try {
      if constexpr (context_range_body<Body>) {
        std::invoke(s.body, ctx, m_first, last);
      } else if constexpr (range_body<Body>) {
        std::invoke(s.body, m_first, last);
      } else {
        for (std::size_t i = m_first; i < last; ++i) std::invoke(s.body, i);
      }
    } catch (...) {
      s.failed.store(true, std::memory_order_relaxed);
      throw;
    }
    return s.ran(ctx, last - m_first);
  }

 private:
  State* m_state;
  std::size_t m_first;
  std::size_t m_last;
};

/// Checks the range; returns false if it is empty.
inline bool loop_range_ok(std::size_t first, std::size_t last) {
  if (first > last) {
    throw std::invalid_argument("tessera::parallel_for: first (" + std::to_string(first) +
                                ") is after last (" + std::to_string(last) + ")");
  }
  return first != last;
}

/// The first piece of a loop (the whole range) and the state it shares with the pieces it makes.
/// Makes the first piece of a loop over [first, last) (not empty), annotated with its priority;
/// the caller spawns it. The state goes with the piece (a refused spawn frees both).
template <class Body>
task* make_loop(runtime& rt, std::size_t first, std::size_t last, Body&& body,
                const loop_options& options) {
  using B = std::decay_t<Body>;
  static_assert(std::is_nothrow_destructible_v<B>, "a loop body's destructor must not throw");
  const std::size_t grain = loop_grain(first, last, options.grain, rt.active_workers());
  auto* state = new loop_state<B>(std::forward<Body>(body), grain, options);
  try {
    task* root = rt.make_task<loop_piece<loop_state<B>>>(state, first, last);
    root->annotate(options.priority);
    return root;
  } catch (...) {
    delete state;
    throw;
  }
}

}  // namespace detail

/// Runs `body` over [first, last) and waits for it. From a thread that is not a worker of `rt`
/// (from a task: the overload below; this one throws std::logic_error there). A body without the
/// context runs on the calling thread too, beside helper tasks on up to active_workers() - 1
/// workers (detail/claimed_loop.h), so the loop runs on at most active_workers() threads, the
/// caller one of them, as with oneTBB and OpenMP; a body with the context runs in tasks only,
/// and the caller sleeps until they are done. Rethrows the first exception the body threw.
/// first > last throws std::invalid_argument; after stop() began, std::logic_error.
template <class Body>
  requires loop_body<std::decay_t<Body>>
void parallel_for(runtime& rt, std::size_t first, std::size_t last, Body&& body,
                  loop_options options = {}) {
  if (rt.current_worker()) {
    throw std::logic_error(
        "tessera::parallel_for(runtime&, ...) called from a task of the same runtime: it would "
        "block its worker; use parallel_for(context&, group, ...) and context::when_done");
  }
  if (!detail::loop_range_ok(first, last)) return;
  using B = std::decay_t<Body>;
  if constexpr (!context_range_body<B>) {
    const B& b = body;  // used in place: no copy, and no move
    detail::run_claimed_loop(rt, first, last, options, rt.active_workers(),
                             [&b](std::size_t f, std::size_t l, unsigned) {
                               if constexpr (range_body<B>) {
                                 std::invoke(b, f, l);
                               } else {
                                 for (std::size_t i = f; i < l; ++i) std::invoke(b, i);
                               }
                             });
  } else {
    const group g = rt.make_group();
    task* root;
    try {
      root = detail::make_loop(rt, first, last, std::forward<Body>(body), options);
    } catch (...) {
      rt.detach(g);  // nothing in it: its slot is freed at once
      throw;
    }
    try {
      rt.spawn(root, g);
    } catch (...) {  // the runtime is stopping: it destroyed the root, and the state with it
      rt.detach(g);
      throw;
    }
    rt.wait(g);
  }
}

/// From inside a task: starts the loop, which holds group `g` (`group{}`: the running task's
/// group) open until every piece finished, and returns at once (see the top of this file).
/// first > last throws std::invalid_argument, a stale or completed `g` std::logic_error (for a
/// body with the context: with debug checks), and nothing is spawned then.
template <class Body>
  requires loop_body<std::decay_t<Body>>
void parallel_for(context& ctx, group g, std::size_t first, std::size_t last, Body&& body,
                  loop_options options = {}) {
  if (!detail::loop_range_ok(first, last)) return;
  using B = std::decay_t<Body>;
  if constexpr (!context_range_body<B>) {
    static_assert(std::is_nothrow_destructible_v<B>, "a loop body's destructor must not throw");
    detail::run_claimed_loop_in_tasks(
        ctx, g, first, last, options, ctx.runtime().active_workers(),
        [b = std::forward<Body>(body)](std::size_t f, std::size_t l, unsigned) {
          if constexpr (range_body<B>) {
            std::invoke(b, f, l);
          } else {
            for (std::size_t i = f; i < l; ++i) std::invoke(b, i);
          }
        });
  } else {
    task* root = detail::make_loop(ctx.runtime(), first, last, std::forward<Body>(body), options);
    if (g.valid()) root->annotate(g);
    ctx.spawn(root);  // refused (a stale group, with debug checks): root and state destroyed
  }
}

}  // namespace tessera
