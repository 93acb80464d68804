// tessera/group.h — a handle to a set of tasks that can be waited for as one.
//
// Groups follow the GeckoDB thread pool ([GeckoDB-pool], docs/references.md): a slot map of group
// states indexed by a handle that carries a generation counter, so a stale handle is detected
// instead of aliasing a reused slot. A group is open from make_group() until exactly one wait:
// runtime::wait(g) from a thread that is not a worker (blocks without spinning),
// context::when_done(g, continuation) from inside a task (never blocks a worker; the continuation
// is spawned when the group completes), or runtime::detach(g) (nobody waits; the slot is freed when
// the tasks are done). A group that gets none of the three keeps its slot and the exceptions of its
// tasks until the runtime is destroyed (which says so on stderr). A group serves one round: make
// one per round (they are cheap: a slot taken from a free list). Tasks spawned by a task of the
// group join the group. runtime::cancel(g) drops the tasks of g not started yet (running ones
// finish and may ask context::cancelled()); g still completes and takes its one wait as above.
//   tessera::group g = rt.make_group();
//   for (int i = 0; i < 100; ++i) rt.spawn([i](tessera::context&) { work(i); }, g);
//   rt.wait(g);   // every task of g (and their children) finished; rethrows the first exception
//
// Memory ordering: everything written by the tasks of a group happens-before wait() returns and
// before the continuation given to when_done() starts.
#pragma once

#include <bit>
#include <cstdint>

namespace tessera {

struct group {
  std::uint32_t index = 0;       ///< slot + 1; 0 means "no group"
  std::uint32_t generation = 0;  ///< must match the slot's generation
  constexpr bool valid() const noexcept { return index != 0; }
  friend constexpr bool operator==(group a, group b) noexcept {
    return std::bit_cast<std::uint64_t>(a) == std::bit_cast<std::uint64_t>(b);  // one compare
  }
};

}  // namespace tessera
