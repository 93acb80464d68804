// bench/queue/queue.h — `tessera-bench queue`: the queue designs a task runtime can be built on,
// in the patterns that matter to one ([Xtask] §IV-B compares such designs; docs/references.md).
//
// Every design carries the same items (pointers to task objects, which tessera's own queues link
// intrusively) in these patterns:
//   owner  one thread pushes a batch of 256 and pops it, over and over (a worker's own queue)
//   1-1    one producer thread, one consumer thread
//   n-1    N producers, one consumer (spawns into a worker's inbox from other threads)
//   1-n    one producer, N consumers (one thread hands work to many)
//   n-n    N producers, N consumers (a shared queue of all workers)
// with N from --workers; a row's `workers` is its thread count. A design that does not support a
// pattern (tessera's owner-only FIFO with two threads; the multi-producer inbox with two
// consumers) is left out of it with a note. Every run checks that each item arrived exactly once
// before its time counts.
//
//   tessera-bench queue --items 200000 --workers 1,2 --pattern owner,n-1
#pragma once

#include <cstdint>
#include <string>

#include "common/timing.h"

namespace tessera::bench::queue_bench {

enum class pattern : std::uint8_t { owner, one_to_one, many_to_one, one_to_many, many_to_many };

struct config {
  pattern shape = pattern::owner;
  unsigned producers = 1;
  unsigned consumers = 1;
  std::uint64_t items = 0;  ///< per run, over all producers
  unsigned repeat = 1;
  std::string label;
};

/// What each design supports.
struct capabilities {
  bool many_producers = true;
  bool many_consumers = true;
  bool two_threads = true;  ///< false: owner-only (one thread pushes and pops)
};

measurement run_local_queue(const config& cfg);
measurement run_mpsc_queue(const config& cfg);
measurement run_mutex_deque(const config& cfg);
measurement run_ticket_queue(const config& cfg);
measurement run_moodycamel(const config& cfg);
measurement run_onetbb(const config& cfg);

}  // namespace tessera::bench::queue_bench
