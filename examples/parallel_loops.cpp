// Loops without task types of your own: parallel_for fills an array, parallel_reduce sums it.
// Both split the range into pieces of tasks (about 16 per worker) and wait from here; from
// inside a task use their context forms, which return at once (include/tessera/parallel_for.h).
// Prints the sum of the squares of 0 .. 999,999.
#include <cstddef>
#include <cstdio>
#include <functional>
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
  std::printf("%lld\n", total);  // 333332833333500000
}
