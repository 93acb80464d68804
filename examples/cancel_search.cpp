// Cancelling a group: a thousand tasks search parts of an array for one value; the task that
// finds it cancels their group, so the parts not started yet never run, and those running stop
// at their next look at ctx.cancelled(). The wait returns as for any group. Prints where the
// value is.
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdio>
#include <numeric>
#include <vector>

#include <tessera/tessera.h>

int main() {
  std::vector<int> data(10'000'000);
  std::iota(data.begin(), data.end(), 0);
  constexpr int wanted = 7'654'321;  // constants: the tasks use them without a capture
  constexpr std::size_t part = 10'000;

  tessera::runtime rt;
  const tessera::group g = rt.make_group();
  std::atomic<long> found{-1};
  for (std::size_t first = 0; first < data.size(); first += part) {
    rt.spawn(
        [&data, &found, first, g](tessera::context& ctx) {
          const std::size_t last = std::min(first + part, data.size());
          for (std::size_t i = first; i < last; ++i) {
            if (i % 1024 == 0 && ctx.cancelled()) return;  // another task found it
            if (data[i] == wanted) {
              found.store(static_cast<long>(i));
              ctx.runtime().cancel(g);  // the parts not started are dropped
              return;
            }
          }
        },
        g);
  }
  rt.wait(g);
  std::printf("%ld\n", found.load());
}
