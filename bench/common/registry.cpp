#include "common/registry.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>

namespace tessera::bench {

namespace {

std::vector<std::unique_ptr<benchmark_definition>>& definitions() {
  static std::vector<std::unique_ptr<benchmark_definition>> all;
  return all;
}

}  // namespace

registration::registration(benchmark_definition definition) {
  if (definition.name.empty() || definition.run == nullptr || definition.implementations.empty() ||
      find_benchmark(definition.name) != nullptr) {
    std::fprintf(stderr, "tessera-bench: bad or duplicate benchmark registration '%s'\n",
                 definition.name.c_str());
    std::abort();
  }
  definitions().push_back(std::make_unique<benchmark_definition>(std::move(definition)));
}

std::vector<const benchmark_definition*> registered_benchmarks() {
  std::vector<const benchmark_definition*> out;
  for (const auto& d : definitions()) out.push_back(d.get());
  std::sort(out.begin(), out.end(), [](auto* a, auto* b) { return a->name < b->name; });
  return out;
}

const benchmark_definition* find_benchmark(std::string_view name) {
  for (const auto& d : definitions())
    if (d->name == name) return d.get();
  return nullptr;
}

bool run_context::selected(std::string_view implementation) const {
  return std::find(implementations.begin(), implementations.end(), implementation) !=
         implementations.end();
}

std::string run_context::label(std::string_view implementation, unsigned worker_count,
                               std::string_view details) const {
  std::string out = benchmark.name + " " + std::string(implementation) +
                    " workers=" + std::to_string(worker_count);
  if (!details.empty()) {
    out += ' ';
    out += details;
  }
  return out;
}

}  // namespace tessera::bench
