// The public runtime and context entry points, forwarding to the scheduler.
#include "tessera/runtime.h"

#include "tessera/detail/claimed_loop.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <stdexcept>

#include "memory/task_allocator.h"
#include "runtime/scheduler.h"
#include "runtime/topology.h"
#include "sync/latch.h"
#include "util/compiler.h"
#include "util/mutex.h"

namespace tessera {
namespace detail {

void* allocate_task_memory(std::size_t bytes, bool system) {
#if defined(TESSERA_DEBUG_CHECKS)
  if (auto* hook = test_hooks::task_allocating.load(std::memory_order_acquire)) hook(bytes);
#endif
  return system ? ::operator new(bytes) : task_allocator::allocate(bytes);
}
void free_task_block(void* p, std::uint8_t block) noexcept { task_allocator::release(p, block); }

task_destroy_fn task_destroyers[max_task_destroyers] = {};

std::uint16_t register_task_destroyer(task_destroy_fn fn) {
  static detail::mutex mutex;
  static std::size_t used GUARDED_BY(mutex) = 1;  // index 0 means "nothing to run"
  detail::lock hold(mutex);
  if (used == max_task_destroyers) {
    std::fprintf(stderr,
                 "tessera: more than %zu task types with a non-trivial destructor; make some "
                 "trivially destructible (hold pointers instead of owning members)\n",
                 max_task_destroyers - 1);
    std::abort();
  }
  task_destroyers[used] = fn;
  return static_cast<std::uint16_t>(used++);
}

}  // namespace detail

namespace {
detail::worker* worker_of(detail::scheduler& s) noexcept {
  // A worker of another runtime is "any other thread" here.
  detail::worker* w = detail::current_worker();
  return (w != nullptr && w->owner() == &s) ? w : nullptr;
}
}  // namespace

// By value, as declared in runtime.h: the mangled name carries the build-switch check, and
// users' link errors quote it.
runtime::runtime(runtime_options options,  // NOLINT(performance-unnecessary-value-param)
                 detail::build_switches)
    : m_system_allocator(options.allocator == task_allocator::system) {
  m_scheduler = std::make_unique<detail::scheduler>(*this, options);
}

runtime::~runtime() {
  if (m_scheduler->on_own_worker()) {
    // A destructor cannot throw: stop() would wait for the very task that runs it.
    std::fputs("tessera: a runtime destroyed by one of its own tasks (it would wait for itself)\n",
               stderr);
    std::abort();
  }
  stop();
}

void runtime::stop() { m_scheduler->stop(); }
bool runtime::running() const noexcept { return m_scheduler->running(); }

void runtime::discard(task* t) noexcept {
  if (t == nullptr) return;  // as delete nullptr
#if defined(TESSERA_DEBUG_CHECKS)
  if (!detail::scheduler::unspawned(t)) {
    std::fputs(
        "tessera: discard of a task that was spawned (the runtime destroys it when it is "
        "done)\n",
        stderr);
    std::abort();
  }
#endif
  detail::destroy_task(t);
}

void runtime::spawn(task* t) {
  if (t == nullptr) throw std::invalid_argument("tessera: spawn of nullptr");
  m_scheduler->spawn(t, worker_of(*m_scheduler));
}

group runtime::make_group() { return m_scheduler->make_group(); }
void runtime::wait(group g) { m_scheduler->wait(g); }
void runtime::detach(group g) { m_scheduler->detach(g); }
bool runtime::cancel(group g) { return m_scheduler->cancel(g); }
void runtime::wait_idle() { m_scheduler->wait_idle(); }
std::vector<std::exception_ptr> runtime::take_unhandled_exceptions() {
  return m_scheduler->take_unhandled();
}

detail::resource_header* runtime::allocate_resource(std::size_t bytes,
                                                    const resource_hints& hints) {
  return m_scheduler->allocate_resource(bytes, hints);
}
void runtime::free_resource(detail::resource_header* h) noexcept {
#if defined(TESSERA_DEBUG_CHECKS)
  // noexcept (as delete), so a misuse aborts, as discard's does: freeing memory make_resource did
  // not return, a resource twice, or one retired (the epochs free it later) corrupts the heap.
  if (!detail::is_live_resource(reinterpret_cast<const char*>(h) +
                                           sizeof(detail::resource_header)) ||
      h->retired.load(std::memory_order_relaxed)) {
    std::fputs(
        "tessera: destroy_resource of memory that make_resource did not return, or of a resource "
        "destroyed or retired already\n",
        stderr);
    std::abort();
  }
#endif
  detail::free_resource(h);
}
void runtime::retire(detail::resource_header* h) { m_scheduler->retire(h); }
void runtime::move(detail::resource_header* h, worker_id w) { m_scheduler->move(h, w); }

unsigned runtime::workers() const noexcept { return m_scheduler->worker_count(); }
unsigned runtime::active_workers() const noexcept { return m_scheduler->active_workers(); }
void runtime::set_active_workers(unsigned n) { m_scheduler->set_active_workers(n); }
unsigned runtime::prefetch_distance() const noexcept { return m_scheduler->prefetch_distance(); }
void runtime::set_prefetch_distance(unsigned d) {
  if (d > max_prefetch_distance) {
    throw std::invalid_argument("tessera: prefetch distance " + std::to_string(d) +
                                " is above the maximum " + std::to_string(max_prefetch_distance));
  }
  m_scheduler->set_prefetch_distance(d);
}
std::vector<unsigned> default_worker_cpus() { return detail::topology::get().worker_order(); }
std::size_t last_level_cache_bytes() { return detail::topology::get().last_level_cache_bytes(); }

unsigned runtime::cpu_of(worker_id w) const {
  if (w.value >= workers()) throw std::out_of_range("tessera: cpu_of: no such worker");
  return m_scheduler->worker_at(w.value).cpu();
}
numa_node_id runtime::node_of(worker_id w) const {
  if (w.value >= workers()) throw std::out_of_range("tessera: node_of: no such worker");
  return numa_node_id{static_cast<std::uint16_t>(m_scheduler->worker_at(w.value).node())};
}
bool runtime::pinned() const noexcept { return m_scheduler->pinned(); }
runtime_statistics runtime::statistics() const { return m_scheduler->statistics(); }
std::optional<worker_id> runtime::current_worker() const noexcept {
  detail::worker* w = worker_of(*m_scheduler);
  if (w == nullptr) return std::nullopt;
  return worker_id{w->index()};
}

// ---- context -----------------------------------------------------------------------------------

numa_node_id context::node() const noexcept {
  return numa_node_id{static_cast<std::uint16_t>(m_worker->node())};
}
// Inlined into the task under LTO: a task spawning a task is the hot path.
TESSERA_LTO_INLINE_BEGIN
TESSERA_LTO_INLINE void context::spawn(task* t) { detail::scheduler::spawn_from(t, *m_worker); }
TESSERA_LTO_INLINE void context::spawn(std::span<task* const> tasks) {
#if defined(TESSERA_DEBUG_CHECKS)
  // Each task checked (scheduler::require_spawnable) and marked, so that one named twice in the
  // span is caught as spawned twice; the marks are undone before anything is spawned, or thrown.
  constexpr std::uint8_t checked_slot = detail::task_header::unspawned_slot - 1;
  std::size_t marked = 0;
  try {
    for (task* t : tasks) {
      detail::scheduler::require_spawnable(t, "spawn");
      detail::hdr(t).m_epoch_slot = checked_slot;
      ++marked;
    }
  } catch (...) {
    for (std::size_t i = 0; i < marked; ++i)
      detail::hdr(tasks[i]).m_epoch_slot = detail::task_header::unspawned_slot;
    throw;
  }
  for (task* t : tasks) detail::hdr(t).m_epoch_slot = detail::task_header::unspawned_slot;
#endif
  detail::scheduler::spawn_many_from(tasks.data(), tasks.size(), *m_worker);
}
TESSERA_LTO_INLINE_END
void context::when_done(group g, task* continuation) {
  m_runtime->internals().when_done(g, continuation, *m_worker);
}
// ---- loops started from a task (detail/claimed_loop.h) ----------------------------------------

group detail::loop_access::hold(context& ctx, group g) {
#if defined(TESSERA_DEBUG_CHECKS)
  detail::scheduler::require_validated(detail::context_access::worker_of(ctx), "a loop");
#endif
  const group held = g.valid() ? g : detail::context_access::current(ctx)->task_group();
  detail::context_access::runtime_of(ctx).internals().hold_group(held);
  return held;
}
const std::atomic<bool>* detail::loop_access::cancel_flag(runtime& rt, group held) noexcept {
  return rt.internals().cancel_flag(held);
}
void detail::loop_access::spawn_helper(context& ctx, task* t) {
  detail::scheduler::spawn_ungrouped(t, detail::context_access::worker_of(ctx));
}
void detail::loop_access::finish(runtime& rt, group held, std::exception_ptr error) noexcept {
  detail::scheduler& s = rt.internals();
  if (error) {
    try {
      s.record_exception(held, std::move(error));  // without a group: the unhandled list
    } catch (...) {  // no memory for the unhandled list: the exception is lost, the loop ends
    }
  }
  if (held.valid()) s.leave_group(held, worker_of(s));
}

bool context::cancelled() const noexcept {
  return m_current != nullptr && m_runtime->internals().cancelled(m_current->task_group());
}
bool context::validate() const noexcept {
  if (!m_validating) return true;
#if defined(TESSERA_DEBUG_CHECKS)
  m_worker->guard().note_validate(m_current);  // a task that validates first: changed already?
#endif
  // The header the read started on: the task may have re-annotated itself since.
  if (!detail::validate_read(*m_read_header, m_read_version)) return false;
  const_cast<context*>(this)->m_validated = true;
  return true;
}
bool context::writing() const noexcept {
  if (m_current == nullptr || !m_current->has_resource() || m_current->mode() != access::write)
    return false;
  // False on a resource without synchronization: primitive::none excludes no other writer.
  return !m_validating && detail::resource_header::of(m_current->data())->prim != primitive::none;
}

// ---- resources ---------------------------------------------------------------------------------

std::string_view to_string(primitive p) noexcept {
  switch (p) {
    case primitive::automatic: return "automatic";
    case primitive::none: return "none";
    case primitive::spinlock: return "spinlock";
    case primitive::rwlatch: return "rwlatch";
    case primitive::optimistic_latch: return "optimistic_latch";
    case primitive::optimistic_scheduled: return "optimistic_scheduled";
    case primitive::scheduling: return "scheduling";
  }
  return "unknown";
}

primitive select_primitive(const resource_hints& h) noexcept {
  if (h.primitive != primitive::automatic) return h.primitive;
  switch (h.isolation) {
    case isolation::none: return primitive::none;
    case isolation::exclusive:
      return h.frequency == frequency::high ? primitive::scheduling : primitive::spinlock;
    case isolation::exclusive_writers:
      if (h.read_ratio < 0.1) return primitive::spinlock;  // almost never read: see resource.h
      return primitive::optimistic_latch;
  }
  return primitive::optimistic_latch;
}

primitive select_primitive(const resource_hints& h, unsigned workers) noexcept {
  if (h.primitive == primitive::automatic && workers <= 1) return primitive::none;
  return select_primitive(h);
}

// ---- statistics --------------------------------------------------------------------------------

worker_statistics& worker_statistics::operator+=(const worker_statistics& o) noexcept {
  executed += o.executed;
  spawned_local += o.spawned_local;
  spawned_remote += o.spawned_remote;
  optimistic_retries += o.optimistic_retries;
  optimistic_fallbacks += o.optimistic_fallbacks;
  prefetches += o.prefetches;
  pools_stolen += o.pools_stolen;
  tasks_stolen += o.tasks_stolen;
  exceptions += o.exceptions;
  cancelled += o.cancelled;
  peers_woken += o.peers_woken;
  steal_walk_steps += o.steal_walk_steps;
  steal_requests += o.steal_requests;
  steal_answers_empty += o.steal_answers_empty;
  idle_ns += o.idle_ns;
  parked_ns += o.parked_ns;
  step_probes += o.step_probes;
  step_changes += o.step_changes;
  prefetch_distance = std::max(prefetch_distance, o.prefetch_distance);
  return *this;
}

worker_statistics runtime_statistics::total() const noexcept {
  worker_statistics t;
  for (auto& w : workers) t += w;
  return t;
}

std::string runtime_statistics::to_string() const {
  std::ostringstream out;
  char line[256];
  std::snprintf(line, sizeof line,
                "%-7s %12s %12s %12s %10s %9s %12s %8s %8s %10s %8s %8s %6s %8s %6s %10s %10s %7s %7s %5s\n",
                "worker", "executed", "spawn-local", "spawn-remote", "retries", "fallbacks",
                "prefetches", "pools-in", "tasks-out", "walked", "asked", "empty", "exc",
                "dropped", "woke", "idle-ms", "parked-ms", "probes", "changes", "dist");
  out << line;
  auto row = [&](const std::string& name, const worker_statistics& w) {
    std::snprintf(line, sizeof line,
                  "%-7s %12llu %12llu %12llu %10llu %9llu %12llu %8llu %8llu %10llu %8llu %8llu %6llu "
                  "%8llu %6llu %10.1f %10.1f %7llu %7llu %5llu\n",
                  name.c_str(), static_cast<unsigned long long>(w.executed),
                  static_cast<unsigned long long>(w.spawned_local),
                  static_cast<unsigned long long>(w.spawned_remote),
                  static_cast<unsigned long long>(w.optimistic_retries),
                  static_cast<unsigned long long>(w.optimistic_fallbacks),
                  static_cast<unsigned long long>(w.prefetches),
                  static_cast<unsigned long long>(w.pools_stolen),
                  static_cast<unsigned long long>(w.tasks_stolen),
                  static_cast<unsigned long long>(w.steal_walk_steps),
                  static_cast<unsigned long long>(w.steal_requests),
                  static_cast<unsigned long long>(w.steal_answers_empty),
                  static_cast<unsigned long long>(w.exceptions),
                  static_cast<unsigned long long>(w.cancelled),
                  static_cast<unsigned long long>(w.peers_woken),
                  static_cast<double>(w.idle_ns) / 1e6, static_cast<double>(w.parked_ns) / 1e6,
                  static_cast<unsigned long long>(w.step_probes),
                  static_cast<unsigned long long>(w.step_changes),
                  static_cast<unsigned long long>(w.prefetch_distance));
    out << line;
  };
  for (std::size_t i = 0; i < workers.size(); ++i) row(std::to_string(i), workers[i]);
  row("total", total());
  out << "spawned from outside the workers: " << spawned_external << "\n";
  return out.str();
}

}  // namespace tessera
