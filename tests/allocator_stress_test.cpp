// Task memory through the runtime: tasks made on one worker and executed (so freed) on another,
// millions of times, under both allocators. Payloads must survive reuse, results must not depend
// on the allocator, and the pool allocator must not take ever more memory from the OS when frees
// cross threads (white-box: detail::task_allocator::os_bytes()).
#include <atomic>
#include <cstring>
#include <stdexcept>
#include <thread>
#include <vector>

#include "memory/task_allocator.h"
#include "test_support.h"

namespace tessera::test {
namespace {

struct chain_result {
  std::uint64_t hops = 0;
  std::uint64_t checksum = 0;
  std::uint64_t corrupt = 0;
  bool operator==(const chain_result&) const = default;
};

struct chain_counters {
  std::atomic<std::uint64_t> hops{0};
  std::atomic<std::uint64_t> checksum{0};
  std::atomic<std::uint64_t> corrupt{0};
};

/// Payload sizes of the hop tasks: every pool size class and one block over the largest.
constexpr std::size_t hop_sizes[] = {8, 100, 200, 400, 900, 2000};
constexpr unsigned hop_size_count = std::size(hop_sizes);

task* make_hop(context& ctx, unsigned size_index, unsigned chain, std::uint32_t left,
               chain_counters& c);

/// One hop of a chain: checks its payload, then makes the next hop on this worker and sends it
/// to the next worker, which frees it after running it.
template <std::size_t Payload>
class hop_task final : public counted_task {
 public:
  hop_task(unsigned chain, std::uint32_t left, chain_counters& c) noexcept
      : m_chain(chain), m_left(left), m_c(&c) {
    std::memset(m_payload, pattern(), sizeof m_payload);
  }
  task* execute(context& ctx) override {
    for (unsigned char b : m_payload) {
      if (b != pattern()) {
        m_c->corrupt.fetch_add(1, std::memory_order_relaxed);
        break;
      }
    }
    m_c->hops.fetch_add(1, std::memory_order_relaxed);
    m_c->checksum.fetch_add(std::uint64_t{m_chain} * 1000003u + m_left * 7u + Payload,
                            std::memory_order_relaxed);
    if (m_left == 0) return nullptr;
    const unsigned next = (ctx.worker().value + 1u) % ctx.runtime().workers();
    task* t = make_hop(ctx, (m_chain + m_left) % hop_size_count, m_chain, m_left - 1, *m_c);
    t->annotate(wid(next));
    ctx.spawn(t);
    return nullptr;
  }

 private:
  unsigned char pattern() const noexcept {
    return static_cast<unsigned char>(m_chain * 31u + m_left * 7u + 1u);
  }
  unsigned m_chain;
  std::uint32_t m_left;
  chain_counters* m_c;
  unsigned char m_payload[Payload];
};

template <class Maker>
task* make_hop_with(Maker& m, unsigned size_index, unsigned chain, std::uint32_t left,
                    chain_counters& c) {
  switch (size_index) {
    case 0: return m.template make_task<hop_task<hop_sizes[0]>>(chain, left, c);
    case 1: return m.template make_task<hop_task<hop_sizes[1]>>(chain, left, c);
    case 2: return m.template make_task<hop_task<hop_sizes[2]>>(chain, left, c);
    case 3: return m.template make_task<hop_task<hop_sizes[3]>>(chain, left, c);
    case 4: return m.template make_task<hop_task<hop_sizes[4]>>(chain, left, c);
    default: return m.template make_task<hop_task<hop_sizes[5]>>(chain, left, c);
  }
}

task* make_hop(context& ctx, unsigned size_index, unsigned chain, std::uint32_t left,
               chain_counters& c) {
  return make_hop_with(ctx, size_index, chain, left, c);
}

chain_result run_chains(unsigned workers, task_allocator alloc, unsigned chains,
                        std::uint32_t hops_per_chain) {
  runtime r({.workers = workers, .allocator = alloc});
  chain_counters c;
  const group g = r.make_group();
  for (unsigned i = 0; i < chains; ++i) {
    task* t = make_hop_with(r, i % hop_size_count, i, hops_per_chain - 1, c);
    t->annotate(wid(i % workers));
    r.spawn(t, g);
  }
  r.wait(g);
  r.stop();
  return {c.hops.load(), c.checksum.load(), c.corrupt.load()};
}

class allocator_stress : public runtime_fixture {};

TEST_P(allocator_stress, cross_worker_frees_give_identical_results_under_both_allocators) {
  const unsigned chains = 8 * worker_count();
  const auto hops = static_cast<std::uint32_t>(scaled(400000, 30000) / chains);
  const chain_result pool = run_chains(worker_count(), task_allocator::pool, chains, hops);
  EXPECT_EQ(live_objects.load(), 0);
  const chain_result system = run_chains(worker_count(), task_allocator::system, chains, hops);
  EXPECT_EQ(live_objects.load(), 0);
  EXPECT_EQ(pool.hops, std::uint64_t{chains} * hops);
  EXPECT_EQ(pool.corrupt, 0u) << "a task's bytes changed between make_task and execute";
  EXPECT_EQ(system.corrupt, 0u);
  EXPECT_TRUE(pool == system) << "pool: " << pool.hops << " hops, checksum " << pool.checksum
                              << "; system: " << system.hops << " hops, checksum "
                              << system.checksum;
}

/// Low-priority producer on worker 0 that keeps at most `window` consumers in flight, all sent
/// to the last worker: every block is allocated on one thread and freed on another.
class producer final : public counted_task {
 public:
  struct state {
    std::atomic<std::uint64_t> consumed{0};
    std::uint64_t produced = 0;  // only the producer touches it
    std::uint64_t total = 0;
    std::uint64_t window = 0;
    std::size_t os_bytes_after_warmup = 0;
    bool warm = false;
  };
  explicit producer(state& s) noexcept : m_s(&s) {}
  task* execute(context& ctx) override;

 private:
  state* m_s;
};

class consumer final : public counted_task {
 public:
  explicit consumer(producer::state& s) noexcept : m_s(&s) {
    std::memset(m_pad, 0x5a, sizeof m_pad);
  }
  task* execute(context&) override {
    if (m_pad[0] != 0x5a || m_pad[sizeof m_pad - 1] != 0x5a) std::abort();
    m_s->consumed.fetch_add(1, std::memory_order_release);
    return nullptr;
  }

 private:
  producer::state* m_s;
  unsigned char m_pad[48];
};

task* producer::execute(context& ctx) {
  const unsigned last = ctx.runtime().workers() - 1;
  auto& s = *m_s;
  while (s.produced < s.total &&
         s.produced - s.consumed.load(std::memory_order_acquire) < s.window) {
    // Checked per block, not per run: when the consumers keep up, one run of the producer may
    // produce every block without the window ever filling.
    if (!s.warm && s.produced >= s.total / 10) {
      s.warm = true;
      s.os_bytes_after_warmup = detail::task_allocator::os_bytes();
    }
    auto* t = ctx.make_task<consumer>(s);
    t->annotate(wid(last));
    ctx.spawn(t);
    ++s.produced;
  }
  return s.produced < s.total ? this : nullptr;  // low priority: consumers on worker 0 go first
}

TEST_P(allocator_stress, one_way_cross_thread_frees_keep_os_memory_bounded) {
  auto& r = start({.workers = worker_count(), .allocator = task_allocator::pool});
  producer::state s;
  s.total = scaled(1000000, 100000);
  s.window = 1024;
  auto* p = r.make_task<producer>(s);
  p->annotate(wid(0)).annotate(priority::low);
  const group g = r.make_group();
  r.spawn(p, g);
  r.wait(g);
  r.wait_idle();
  EXPECT_EQ(s.consumed.load(), s.total);
  ASSERT_TRUE(s.warm);
  const std::size_t growth = detail::task_allocator::os_bytes() - s.os_bytes_after_warmup;
  // In flight: at most `window` blocks plus two batches cached per thread and class. Growth past
  // a couple of chunks means freed blocks pile up on the consumer thread instead of coming back.
  EXPECT_LE(growth, 2 * detail::task_allocator::chunk_bytes)
      << "the pool allocator kept asking the OS for memory: " << growth << " bytes after warm-up";
}

TEST_P(allocator_stress, system_allocator_runs_the_same_workload) {
  auto& r = start({.workers = worker_count(), .allocator = task_allocator::system});
  producer::state s;
  s.total = scaled(200000, 20000);
  s.window = 1024;
  auto* p = r.make_task<producer>(s);
  p->annotate(wid(0)).annotate(priority::low);
  r.spawn(p);
  r.wait_idle();
  EXPECT_EQ(s.consumed.load(), s.total);
}

TEST_P(allocator_stress, constructor_that_throws_frees_its_memory) {
  struct throws_in_ctor final : counted_task {
    explicit throws_in_ctor(int) { throw std::runtime_error("no"); }
    task* execute(context&) override { return nullptr; }
  };
  for (auto alloc : {task_allocator::pool, task_allocator::system}) {
    runtime r({.workers = worker_count(), .allocator = alloc});
    for (int i = 0; i < 1000; ++i) {
      EXPECT_THROW(r.make_task<throws_in_ctor>(i), std::runtime_error);
    }
    // A task made after the failures still works (the failed blocks were given back cleanly).
    std::atomic<int> ran{0};
    r.spawn([&ran, tok = live_token{}](context&) { ran.fetch_add(1); });
    r.stop();
    EXPECT_EQ(ran.load(), 1);
  }
  // ASan's leak check at exit catches system-allocator memory that was not given back.
}

TESSERA_INSTANTIATE_WORKER_COUNTS(allocator_stress);

}  // namespace
}  // namespace tessera::test
