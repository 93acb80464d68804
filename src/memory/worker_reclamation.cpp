// A worker's part in epoch-based reclamation (memory/reclamation.h): its retired list, and the
// runtime's own task that frees what expired.
#include "memory/reclamation.h"
#include "runtime/scheduler.h"
#include "runtime/test_hooks.h"
#include "runtime/worker.h"

namespace tessera::detail {
namespace {

/// Frees a detached list of retired resources (reclamation runs as a task, [MxTasks] §4.4).
class reclaim_task final : public task {
 public:
  explicit reclaim_task(resource_header* list) : m_list(list) {}
  task* execute(context&) override {
    // The runtime's own task: not counted as executed in the statistics (worker::statistics).
    current_worker()->count_reclaim_run();
    free_resource_list(std::exchange(m_list, nullptr));
    return nullptr;
  }

 private:
  resource_header* m_list;
};

}  // namespace

void worker::retire(resource_header* h) noexcept {
  m_retired.push(h, m_sched.global_epoch());
#if defined(TESSERA_DEBUG_CHECKS)
  if (auto* hook = test_hooks::resource_retired.load(std::memory_order_acquire)) {
    hook(h->object(), h->retired_epoch);
  }
#endif
}

void worker::maybe_reclaim() {
  // Resources retired by other threads become ours, stamped with the current epoch: their
  // retiring threads stamped nothing we could order in our newest-first list, and a later
  // epoch only frees them later, never too early.
  if (m_sched.has_external_retired()) [[unlikely]] {
    for (resource_header* h : m_sched.take_external_retired()) retire(h);
  }
  if (m_retired.empty()) return;
  resource_header* old = m_retired.take_expired(m_sched.global_epoch());
  if (old == nullptr) return;
  auto* t = m_sched.rt().make_task<reclaim_task>(old);
  // Normal priority, at the back of this worker's queue: it runs after what is queued now. At low
  // priority it would wait for a moment with nothing else to run, and a worker kept busy (a
  // closed-loop client) never has one: the task, counted in the current epoch's slot, would then
  // keep the global epoch from moving, and nothing retired anywhere would be freed (measured so:
  // 287,230 retired, 0 freed in 3.5 s, and throughput a hundredfold lower as every periodic()
  // walked the growing list).
  t->annotate(worker_id{m_index});
#if defined(TESSERA_DEBUG_CHECKS)
  if (auto* hook = test_hooks::reclaim_task_made.load(std::memory_order_acquire)) hook(*this);
#endif
  // Dekker with scheduler::stop(), all four seq_cst: this store of the spawn count, then the load
  // of `stopping` below; stop() stores `stopping`, then quiescent() loads the counts. Either
  // stop() sees this spawn (and waits for it before the workers exit), or we see `stopping` and
  // reclaim here, since a task routed now could be left behind by workers that already exit.
  // (seq_cst operations, not two seq_cst fences: ThreadSanitizer does not model fences.)
  hdr(t).m_epoch_slot = m_sched.epochs().count_in_current_slot(
      [this](unsigned slot, int d) { m_epoch.add_spawn_seq_cst(slot, d); });
  bump(m_stats.reclaims_spawned);
  if (m_sched.stopping()) {
    const unsigned slot = hdr(t).m_epoch_slot;
    t->execute(m_ctx);
    destroy_task(t);
    m_epoch.count_completion(slot);
    return;
  }
  m_sched.route(t, this);
}

void worker::reclaim_all() noexcept { free_resource_list(m_retired.take_all()); }

}  // namespace tessera::detail
