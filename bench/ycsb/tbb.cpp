// The oneTBB baseline: kv::olc_tree on kv::tbb_driver (a task arena of `workers` threads running
// one parallel_for task per chunk of the batch size, balanced by work stealing).
#include "kv/tbb_driver.h"
#include "ycsb/baseline.h"

namespace tessera::bench::ycsb_bench {

std::unique_ptr<store> make_tbb_store(unsigned workers, std::size_t batch, bool pin) {
  return std::make_unique<olc_store<kv::tbb_driver>>(workers, batch, pin);
}

}  // namespace tessera::bench::ycsb_bench
