// tessera/resource.h — data objects whose synchronization the runtime injects.
//
// A resource is a user object created through the runtime with hints that describe how it is
// used. The runtime places a 64-byte header (version, latch word, owning pool) immediately
// before the object and chooses a synchronization primitive from the hints (or takes the one
// named explicitly). Tasks that annotate the resource with an access mode are then routed and
// wrapped so that they are safe: user code never takes a latch or reads a version itself.
//
//   auto* acct = rt.make_resource<account>({.isolation = tessera::isolation::exclusive_writers,
//                                           .read_ratio = 0.95});
//   auto* t = rt.make_task<deposit>(acct, 100);
//   t->annotate_resource(acct, tessera::access::write);
//   rt.spawn(t);              // runs under the selected primitive
//   rt.retire_resource(acct); // freed once no task can still see it (epoch-based)
//
// What an object must be for optimistic reading. Under the optimistic primitives (the automatic
// choice for `exclusive_writers`, the default isolation) a reader runs while a writer changes the
// object, and learns only afterwards, from the version, that it must run again. So the object is
// read as plain fields, through racy_load (optimistic.h): numbers, fixed arrays, pointers to
// memory that stays valid (other resources, which are retired, never freed under a reader). A
// reader must not walk memory that a writer frees or moves: a std::vector that grows, a
// std::string, a std::unordered_map that rehashes or is cleared. Such a reader can crash (a map
// of 200 entries, cleared and refilled by writers, segfaulted in 5 of 5 runs) before it could
// validate. For such an object name the latch: `.primitive = primitive::rwlatch`
// (readers in parallel, never beside a writer), or `.isolation = isolation::exclusive`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "tessera/detail/resource_header.h"

namespace tessera {

/// What concurrent accesses to the object must be isolated from each other.
enum class isolation : std::uint8_t {
  exclusive,          ///< every access alone (readers too)
  exclusive_writers,  ///< writers alone, readers in parallel with each other
  none,               ///< the runtime adds no synchronization
};

/// How often tasks touch the object, relative to other resources.
enum class frequency : std::uint8_t { low, normal, high };

/// The synchronization primitive applied around tasks that annotate the resource.
enum class primitive : std::uint8_t {
  automatic,             ///< let select_primitive() decide from the hints
  none,                  ///< no synchronization
  spinlock,              ///< exclusive spinlock for every task
  rwlatch,               ///< reader/writer latch, readers shared
  optimistic_latch,      ///< readers validate a version; writers take a latch (OLFIT)
  optimistic_scheduled,  ///< readers validate a version; writers serialized through the pool
  scheduling,            ///< every task runs in the resource's pool, in order, no latch
};

std::string_view to_string(primitive p) noexcept;

/// How tasks use a resource. The defaults choose an optimistic primitive: right for objects of
/// plain fields, wrong for one that owns memory its writers free or move (see the top of this
/// header); name `primitive::rwlatch` for those.
struct resource_hints {
  enum isolation isolation = isolation::exclusive_writers;
  /// Expected fraction of accesses that only read, 0.0 .. 1.0.
  double read_ratio = 0.5;
  enum frequency frequency = frequency::normal;
  /// Anything but `automatic` overrides the selection.
  enum primitive primitive = primitive::automatic;
};

/// The primitive the runtime would choose for `hints` (after [MxTasks] §4.2 in docs/references.md,
/// adjusted to what `tessera-bench sync` measured: with tasks of tens of nanoseconds, routing every
/// writer through a pool costs more than the latch it avoids, so optimistic latching is the
/// default):
///
/// | isolation         | read ratio | frequency   | primitive            |
/// |-------------------|------------|-------------|----------------------|
/// | none              | any        | any         | none                 |
/// | exclusive         | any        | high        | scheduling           |
/// | exclusive         | any        | low/normal  | spinlock             |
/// | exclusive_writers | < 0.1      | any         | spinlock             |
/// | exclusive_writers | otherwise  | any         | optimistic_latch     |
///
/// An object almost never read (read_ratio < 0.1) gains nothing from optimistic readers, while
/// every writer would pay the version's two stores and the reader/writer latch's compare-and-swap
/// over a spinlock's exchange (`tessera-bench sync --mix 0/100` at 2 workers: ~6 instructions an
/// operation more than the spinlock, callgrind; the wall clock of the shared test VM did not
/// resolve the difference).
/// At a read ratio of 0.5 on a hot object optimistic latching was faster than a spinlock, so the
/// bound stays far below that.
///
/// optimistic_scheduled (writers through the resource's pool, readers validating as under
/// optimistic_latch) is never chosen: for objects read 99 % of the time it was no faster than
/// optimistic_latch at 2 workers and slower at 16 (`tessera-bench sync`, 100/0 on a hot object:
/// 1.15x optimistic's time at 2 workers), and a tree whose inner nodes all had their writers in
/// one worker's pool collapsed at 16 workers (that worker behind on the splits' links, every
/// descent meanwhile through right links: 93 M tasks for a 10 M-record load instead of 0.4 M;
/// docs/results.md, 16-core VM). Name it in `hints.primitive` where a pool should order the
/// writers. An explicit `hints.primitive` is returned unchanged.
primitive select_primitive(const resource_hints& hints) noexcept;

/// The primitive a runtime of `workers` workers applies around the tasks of a resource made with
/// `hints`: select_primitive(hints), except that an automatic choice in a runtime of one worker
/// is primitive::none. One worker runs one task at a time, to its end (a task never blocks), so
/// nothing can overlap it: a latch, a version or a pool hop would only add to each operation
/// (`tessera-bench sync` at 1 worker, docs/results.md). runtime::primitive_of still reports
/// select_primitive(hints), and context::writing() answers as under it. An explicit
/// `hints.primitive` is applied as named, whatever the worker count.
primitive select_primitive(const resource_hints& hints, unsigned workers) noexcept;

/// The header of a resource object created by runtime::make_resource.
template <class T>
detail::resource_header* header_of(T* object) noexcept {
  return detail::resource_header::of(object);
}

}  // namespace tessera
