// sync on plain threads: W threads (pinned like tessera's workers with --pin yes), thread w runs
// slice w of the key sequence, each operation under its object's lock — a std::shared_mutex
// (readers shared) or a test-and-test-and-set spinlock (everyone exclusive). Threads are started
// before the clock and released together; the time ends when the last one is joined.

#include <atomic>
#include <memory>
#include <shared_mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/placement.h"
#include "sync/sync.h"

namespace tessera::bench::sync_bench {

namespace {

struct alignas(64) shared_mutex_object {
  std::shared_mutex lock;
  counters data;  // on its own lines (counters is 64-byte aligned)
};

struct alignas(64) spin_object {
  std::atomic<std::uint32_t> lock{0};
  counters data;
};

inline void cpu_pause() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// The same three operations for both object kinds.
inline void lock_exclusive(shared_mutex_object& o) { o.lock.lock(); }
inline void unlock_exclusive(shared_mutex_object& o) { o.lock.unlock(); }
inline void lock_shared(shared_mutex_object& o) { o.lock.lock_shared(); }
inline void unlock_shared(shared_mutex_object& o) { o.lock.unlock_shared(); }

inline void lock_exclusive(spin_object& o) noexcept {
  for (;;) {
    // acquire: the previous holder's writes are visible once we own the lock.
    if (o.lock.exchange(1, std::memory_order_acquire) == 0) return;
    while (o.lock.load(std::memory_order_relaxed) != 0) cpu_pause();
  }
}
inline void unlock_exclusive(spin_object& o) noexcept {
  o.lock.store(0, std::memory_order_release);  // release: publish our writes
}
inline void lock_shared(spin_object& o) noexcept { lock_exclusive(o); }
inline void unlock_shared(spin_object& o) noexcept { unlock_exclusive(o); }

struct alignas(64) thread_slot {
  tally result;
};

template <class Object>
measurement run_with(const workload& wl, const config& cfg) {
  std::vector<Object> objects(wl.spec.objects);
  std::vector<counters*> data;
  for (auto& o : objects) data.push_back(&o.data);
  return measure(cfg.label, cfg.repeat, [&] {
    for (counters* c : data) reset_object(*c);
    std::vector<thread_slot> slots(cfg.workers);
    std::atomic<unsigned> ready{0};
    std::atomic<bool> go{false};
    std::vector<std::thread> threads;
    for (unsigned w = 0; w < cfg.workers; ++w) {
      threads.emplace_back([&, w] {
        if (cfg.tessera.pin) pin_worker_thread(w);  // tessera's CPU of worker w (best effort)
        ready.fetch_add(1, std::memory_order_acq_rel);
        while (!go.load(std::memory_order_acquire)) cpu_pause();
        tally t;
        const std::size_t end = wl.slice_begin(w + 1, cfg.workers);
        for (std::size_t i = wl.slice_begin(w, cfg.workers); i < end; ++i) {
          const key k = wl.keys[i];
          Object& o = objects[k & ~write_bit];
          if ((k & write_bit) != 0) {
            lock_exclusive(o);
            write_object(o.data);
            unlock_exclusive(o);
            ++t.writes;
          } else {
            lock_shared(o);
            const read_result r = read_object(o.data);
            unlock_shared(o);
            ++t.reads;
            t.checksum += r.sum;
            t.torn += r.torn ? 1 : 0;
          }
        }
        slots[w].result = t;
      });
    }
    while (ready.load(std::memory_order_acquire) < cfg.workers) std::this_thread::yield();
    stopwatch clock;
    go.store(true, std::memory_order_release);
    for (auto& t : threads) t.join();  // the threads' writes are visible after join
    const double seconds = clock.seconds();
    tally total;
    for (const thread_slot& s : slots) {
      total.reads += s.result.reads;
      total.writes += s.result.writes;
      total.torn += s.result.torn;
      total.checksum += s.result.checksum;
    }
    check(cfg.implementation.c_str(), wl, total, data);
    return sample{.ops = wl.keys.size(), .seconds = seconds};
  });
}

}  // namespace

measurement run_threads_shared_mutex(const workload& wl, const config& cfg) {
  return run_with<shared_mutex_object>(wl, cfg);
}

measurement run_threads_spinlock(const workload& wl, const config& cfg) {
  return run_with<spin_object>(wl, cfg);
}

}  // namespace tessera::bench::sync_bench
