// Compiled at -O3 in every preset (tests/CMakeLists.txt) and disassembled by the ctest
// `prefetch.codegen` (prefetch_codegen.cmake), which fails unless this function still contains
// prefetch instructions. Nothing else notices when they go: the `prefetches` counter counts what
// issue_prefetch returns, not what it issues, and a run without prefetches is only slower. It
// has happened: GCC 12 at -O3 compiled a form of issue_prefetch with two lambdas
// into the count alone, and YCSB at 10M records lost a third of its speed.
#include "runtime/prefetch.h"

namespace tessera::detail {

unsigned prefetch_codegen_probe(const task& t) noexcept { return issue_prefetch(t); }

}  // namespace tessera::detail
