// Library queues: moodycamel::ConcurrentQueue (lock-free, a sub-queue per producer; Debian's
// libconcurrentqueue-dev) and oneTBB's concurrent_queue.
#include <concurrentqueue/concurrentqueue.h>
#include <tbb/concurrent_queue.h>

#include "queue/pattern.h"

namespace tessera::bench::queue_bench {
namespace {

struct moodycamel_queue {
  moodycamel::ConcurrentQueue<task*> q;
  void push(task* t) { q.enqueue(t); }
  bool try_pop(task*& t) { return q.try_dequeue(t); }
};

struct onetbb_queue {
  tbb::concurrent_queue<task*> q;
  void push(task* t) { q.push(t); }
  bool try_pop(task*& t) { return q.try_pop(t); }
};

}  // namespace

measurement run_moodycamel(const config& cfg) { return run_pattern<moodycamel_queue>(cfg); }
measurement run_onetbb(const config& cfg) { return run_pattern<onetbb_queue>(cfg); }

}  // namespace tessera::bench::queue_bench
