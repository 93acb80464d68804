// bench/common/spawn_and_wait.h — the timed part of a tessera driver that hands its work out as
// prepared tasks: spawn them into one group, wait for the group.
//
//   std::vector<tessera::task*> lanes = ...;           // made and annotated, not timed
//   const double seconds = spawn_and_wait(rt, lanes);  // the tasks' writes are visible now
#pragma once

#include <span>

#include "common/timing.h"
#include "tessera/tessera.h"

namespace tessera::bench {

/// Spawns `tasks` into a new group and waits for it (the waiter sees everything the tasks and
/// their descendants wrote). Returns the seconds from the first spawn to the end of the wait.
inline double spawn_and_wait(runtime& rt, std::span<task* const> tasks) {
  const group g = rt.make_group();
  stopwatch clock;
  for (task* t : tasks) rt.spawn(t, g);
  rt.wait(g);
  return clock.seconds();
}

}  // namespace tessera::bench
