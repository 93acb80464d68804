// White-box tests of the task queues (src/runtime/mpsc_queue.h, local_queue.h), without a
// runtime: FIFO order, every item exactly once under many producers, chains, and the
// empty/busy answers of the consumer.
#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "runtime/local_queue.h"
#include "runtime/mpsc_queue.h"
#include "test_support.h"

namespace tessera::test {
namespace {

using detail::local_queue;
using detail::mpsc_queue;
using detail::pop_result;

/// A plain task that only carries an id (never executed; owned by the test).
class item final : public task {
 public:
  explicit item(std::size_t i = 0, std::size_t p = 0) noexcept : id(i), producer(p) {}
  task* execute(context&) override { return nullptr; }
  std::size_t id;
  std::size_t producer;
};

item* as_item(task* t) { return static_cast<item*>(t); }

/// Pops until an item comes (retrying while a producer is between its two steps).
item* pop_item(mpsc_queue& q) {
  task* t = nullptr;
  for (;;) {
    switch (q.pop(t)) {
      case pop_result::item: return as_item(t);
      case pop_result::empty: return nullptr;
      case pop_result::busy: std::this_thread::yield(); break;
    }
  }
}

TEST(mpsc_queue, empty_queue_reports_empty) {
  mpsc_queue q;
  task* t = nullptr;
  EXPECT_EQ(q.pop(t), pop_result::empty);
  EXPECT_FALSE(q.maybe_nonempty());
}

TEST(mpsc_queue, single_thread_fifo) {
  mpsc_queue q;
  std::vector<std::unique_ptr<item>> items;
  for (std::size_t i = 0; i < 100; ++i) items.push_back(std::make_unique<item>(i));
  for (int round = 0; round < 3; ++round) {  // drain to empty and refill: the stub cycles
    for (auto& it : items) q.push(it.get());
    EXPECT_TRUE(q.maybe_nonempty());
    for (std::size_t i = 0; i < items.size(); ++i) {
      item* x = pop_item(q);
      ASSERT_NE(x, nullptr) << "round " << round << " item " << i;
      EXPECT_EQ(x->id, i);
    }
    EXPECT_EQ(pop_item(q), nullptr);
    EXPECT_FALSE(q.maybe_nonempty());
  }
}

TEST(mpsc_queue, one_item_push_pop_alternating) {
  mpsc_queue q;
  item a(1), b(2);
  for (int i = 0; i < 1000; ++i) {
    item& x = i % 2 ? a : b;
    q.push(&x);
    ASSERT_EQ(pop_item(q), &x);
    ASSERT_EQ(pop_item(q), nullptr);
  }
}

TEST(mpsc_queue, push_chain_keeps_the_chains_order) {
  mpsc_queue q;
  std::vector<std::unique_ptr<item>> items;
  for (std::size_t i = 0; i < 10; ++i) items.push_back(std::make_unique<item>(i));
  // Link 0..4 as one chain through the intrusive link (local_queue links exactly that way).
  {
    local_queue linker;
    for (std::size_t i = 0; i < 5; ++i) linker.push_back(items[i].get());
  }
  q.push(items[5].get());
  q.push_chain(items[0].get(), items[4].get());
  q.push(items[6].get());
  const std::size_t expected[] = {5, 0, 1, 2, 3, 4, 6};
  for (std::size_t e : expected) {
    item* x = pop_item(q);
    ASSERT_NE(x, nullptr);
    EXPECT_EQ(x->id, e);
  }
  EXPECT_EQ(pop_item(q), nullptr);
}

TEST(mpsc_queue, many_producers_every_item_once_fifo_per_producer) {
  constexpr std::size_t producers = 6;
  const std::size_t per_producer = scaled(100000, 10000);
  std::vector<std::unique_ptr<item[]>> items;
  for (std::size_t p = 0; p < producers; ++p) {
    items.push_back(std::make_unique<item[]>(per_producer));
    for (std::size_t i = 0; i < per_producer; ++i) {
      items[p][i].id = i;
      items[p][i].producer = p;
    }
  }
  mpsc_queue q;
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (std::size_t p = 0; p < producers; ++p) {
    threads.emplace_back([&, p] {
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      for (std::size_t i = 0; i < per_producer; ++i) q.push(&items[p][i]);
    });
  }
  std::vector<std::size_t> next(producers, 0);
  std::size_t popped = 0, order_errors = 0;
  go.store(true, std::memory_order_release);
  const std::size_t total = producers * per_producer;
  while (popped < total) {
    task* t = nullptr;
    const auto res = q.pop(t);
    if (res != pop_result::item) {
      std::this_thread::yield();
      continue;
    }
    item* x = as_item(t);
    if (x->id != next[x->producer]) ++order_errors;
    next[x->producer] = x->id + 1;
    ++popped;
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(order_errors, 0u) << "items of one producer came out of order (or twice)";
  for (std::size_t p = 0; p < producers; ++p) EXPECT_EQ(next[p], per_producer);
  EXPECT_EQ(pop_item(q), nullptr);
}

TEST(local_queue, fifo_with_push_front) {
  local_queue q;
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.pop_front(), nullptr);
  item a(1), b(2), c(3);
  q.push_back(&a);
  q.push_back(&b);
  q.push_front(&c);
  EXPECT_EQ(q.size(), 3u);
  EXPECT_EQ(q.front(), &c);
  EXPECT_EQ(local_queue::next_of(&c), &a);
  EXPECT_EQ(q.pop_front(), &c);
  EXPECT_EQ(q.pop_front(), &a);
  EXPECT_EQ(q.pop_front(), &b);
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.size(), 0u);
  q.push_front(&a);  // push_front on an empty queue sets the tail too
  q.push_back(&b);
  EXPECT_EQ(q.pop_front(), &a);
  EXPECT_EQ(q.pop_front(), &b);
  EXPECT_EQ(q.pop_front(), nullptr);
}

}  // namespace
}  // namespace tessera::test
