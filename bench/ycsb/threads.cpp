// The thread baseline: kv::olc_tree on kv::thread_driver (plain std::threads pulling chunks of
// the batch size from one atomic cursor).
#include "kv/thread_driver.h"
#include "ycsb/baseline.h"

namespace tessera::bench::ycsb_bench {

std::unique_ptr<store> make_threads_store(unsigned workers, std::size_t batch, bool pin) {
  return std::make_unique<olc_store<kv::thread_driver>>(workers, batch, pin);
}

}  // namespace tessera::bench::ycsb_bench
