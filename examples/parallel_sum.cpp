// Fork-join without blocking: a task that is too big splits its range between two child tasks
// in a group of their own, and hands the step that combines their results to when_done. No
// worker ever waits; the combining task runs once both halves are done, on whichever worker
// finished the last of them. Prints the sum of 0 .. 9,999,999.
#include <cstddef>
#include <cstdio>
#include <numeric>
#include <vector>

#include <tessera/tessera.h>

// Runs after both halves: their results are visible here (the group's completion orders them).
struct add_halves final : tessera::task {
  explicit add_halves(long long* result) noexcept : out(result) {}
  tessera::task* execute(tessera::context&) override {
    *out = left + right;
    return nullptr;
  }
  long long left = 0;
  long long right = 0;
  long long* out;
};

struct sum_range final : tessera::task {
  sum_range(const long long* from, std::size_t count, long long* result) noexcept
      : first(from), n(count), out(result) {}

  tessera::task* execute(tessera::context& ctx) override {
    if (n <= 16384) {  // small enough: just do it
      *out = std::accumulate(first, first + n, 0LL);
      return nullptr;
    }
    auto* join = ctx.make_task<add_halves>(out);  // holds the halves' results until it runs
    const tessera::group halves = ctx.runtime().make_group();
    const std::size_t half = n / 2;
    auto* left = ctx.make_task<sum_range>(first, half, &join->left);
    auto* right = ctx.make_task<sum_range>(first + half, n - half, &join->right);
    left->annotate(halves);
    right->annotate(halves);
    ctx.spawn(left);
    ctx.spawn(right);
    ctx.when_done(halves, join);  // instead of waiting: join runs when both are done
    return nullptr;
  }

  const long long* first;
  std::size_t n;
  long long* out;
};

int main() {
  std::vector<long long> values(10'000'000);
  std::iota(values.begin(), values.end(), 0LL);

  tessera::runtime rt;  // one pinned worker per CPU
  long long total = 0;
  const tessera::group all = rt.make_group();
  rt.spawn(rt.make_task<sum_range>(values.data(), values.size(), &total), all);
  rt.wait(all);  // covers the joins too: a continuation joins the group of the task that made it
  std::printf("%lld\n", total);  // 49999995000000
}
