// Loops without task types of your own: parallel_for fills an array, parallel_reduce sums it,
// and a search ends its loop early with a std::stop_token. Called from here, each splits the
// range into pieces (about 16 per worker) that this thread runs too, beside the workers, and
// returns when all ran; from inside a task use their context forms, which return at once
// (include/tessera/parallel_for.h). Prints the sum of the squares of 0 .. 999,999 and the
// number whose square is 998,001.
#include <cstddef>
#include <cstdio>
#include <atomic>
#include <functional>
#include <stop_token>
#include <vector>

#include <tessera/tessera.h>

int main() {
  tessera::runtime rt;  // one pinned worker per CPU
  std::vector<long long> squares(1'000'000);
  tessera::parallel_for(rt, 0, squares.size(), [&](std::size_t i) {
    squares[i] = static_cast<long long>(i) * static_cast<long long>(i);
  });
  const long long total = tessera::parallel_reduce(
      rt, 0, squares.size(), 0LL,
      [&](std::size_t first, std::size_t last) {  // one piece: a plain loop
        long long sum = 0;
        for (std::size_t i = first; i < last; ++i) sum += squares[i];
        return sum;
      },
      std::plus<>{});  // combines the pieces' sums
  std::stop_source found;
  std::atomic<std::size_t> root{0};
  tessera::parallel_for(
      rt, 0, squares.size(),
      [&](std::size_t i) {
        if (squares[i] == 998'001) {
          root.store(i);
          found.request_stop();  // pieces not started yet are skipped
        }
      },
      {.stop = found.get_token()});
  std::printf("%lld %zu\n", total, root.load());  // 333332833333500000 999
}
