// The README's first program (built and run by the test suite).
#include <tessera/tessera.h>
#include <cstdio>

struct account {
  long long balance = 0;
};

int main() {
  tessera::runtime rt;                                          // one pinned worker per CPU
  auto* acct = rt.make_resource<account>({.read_ratio = 0.9});  // the runtime picks the latch
  tessera::group g = rt.make_group();
  for (int i = 0; i < 1000; ++i) {
    auto* t = rt.make_task_from([acct](tessera::context&) {
      tessera::racy_store(acct->balance, tessera::racy_load(acct->balance) + 1);
    });
    t->annotate_resource(acct, tessera::access::write);  // "this task writes acct"
    rt.spawn(t, g);
  }
  rt.wait(g);                            // all done; rethrows a task's exception
  std::printf("%lld\n", acct->balance);  // 1000
  rt.retire_resource(acct);              // freed when no task can see it any more
}
