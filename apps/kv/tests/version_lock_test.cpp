// The optimistic version lock of the OLC baseline (src/version_lock.h): the textbook OLC lock.

#include "version_lock.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include "test_support.h"

namespace kv {
namespace {

TEST(VersionLock, ReadValidateAndUpgrade) {
  version_lock l;
  const auto v = l.read_begin();
  EXPECT_TRUE(l.validate(v));
  ASSERT_TRUE(l.try_lock(v));
  EXPECT_TRUE(l.is_locked());
  EXPECT_FALSE(l.validate(v));
  EXPECT_FALSE(l.try_lock(v));
  l.unlock(v);
  EXPECT_FALSE(l.is_locked());
  EXPECT_FALSE(l.validate(v)) << "a change must bump the version";
  const auto w = l.read_begin();
  EXPECT_NE(w, v);
  EXPECT_FALSE(l.try_lock(v)) << "an upgrade from a stale version must fail";
}

// The textbook (BTreeOLC) word: bit 0 obsolete (never set here), bit 1 locked, the version from
// bit 2 up, so one changing lock/unlock advances the word by 4.
TEST(VersionLock, LockBitAndVersionInOneWord) {
  version_lock l;
  const auto v = l.read_begin();
  EXPECT_EQ(v & (version_lock::locked_bit | version_lock::obsolete_bit), 0u);
  ASSERT_TRUE(l.try_lock(v));
  l.unlock(v);
  const auto w = l.read_begin();
  EXPECT_EQ(w, v + 4);
  EXPECT_EQ(w & version_lock::obsolete_bit, 0u);
}

// read_begin() waits while the lock is held (BTreeOLC would have the caller restart) and returns
// the version the holder's unlock produced.
TEST(VersionLock, ReadBeginWaitsForTheHolder) {
  version_lock l;
  const auto held = l.lock();
  std::atomic<bool> returned{false};
  version_lock::version_t seen = 0;
  std::thread reader([&] {
    seen = l.read_begin();
    returned.store(true);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(returned.load()) << "read_begin() returned while the lock was held";
  l.unlock(held);
  reader.join();
  EXPECT_EQ(seen, held + 4);
}

TEST(VersionLock, UnchangedUnlockKeepsReadersValid) {
  version_lock l;
  const auto v = l.read_begin();
  const auto held = l.lock();
  EXPECT_EQ(held, v);
  l.unlock_unchanged(held);
  EXPECT_TRUE(l.validate(v));
}

// Writers keep two relaxed fields equal under the lock; optimistic readers must never
// validate a snapshot where they differ (the seqlock property).
TEST(VersionLock, ValidatedSnapshotsAreConsistent) {
  version_lock l;
  std::uint64_t a = 0;
  std::uint64_t b = 0;
  const std::uint64_t rounds = 20'000 * test::scale;
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> validated{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < 2; ++w) {
    threads.emplace_back([&] {
      for (std::uint64_t i = 0; i < rounds; ++i) {
        const auto v = l.lock();
        store_relaxed(a, load_relaxed(a) + 1);
        store_relaxed(b, load_relaxed(b) + 1);
        l.unlock(v);
      }
    });
  }
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&] {
      std::uint64_t ok = 0;
      for (bool last = false; !last;) {
        last = stop.load(std::memory_order_relaxed);  // one more round once writers are done
        const auto v = l.read_begin();
        const std::uint64_t x = load_relaxed(a);
        const std::uint64_t y = load_relaxed(b);
        if (l.validate(v)) {
          ASSERT_EQ(x, y);
          ++ok;
        }
      }
      validated.fetch_add(ok);
    });
  }
  threads[0].join();
  threads[1].join();
  stop.store(true);
  threads[2].join();
  threads[3].join();
  EXPECT_EQ(a, 2 * rounds);
  EXPECT_EQ(b, 2 * rounds);
  EXPECT_GT(validated.load(), 0u);
}

}  // namespace
}  // namespace kv
