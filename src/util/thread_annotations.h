// src/util/thread_annotations.h — clang's thread-safety annotations (-Wthread-safety), after
// Abseil's absl/base/thread_annotations.h and clang's ThreadSafetyAnalysis documentation.
//
// They say which mutex protects which member and which functions need it held, and clang checks
// every access at compile time (the `clang` preset makes a violation an error). Under another
// compiler they expand to nothing. libstdc++'s std::mutex carries no annotations: use
// util/mutex.h's detail::mutex and detail::lock.
//
//   detail::mutex m_mutex;
//   std::vector<task*> m_items GUARDED_BY(m_mutex);
//   void push_locked(task* t) REQUIRES(m_mutex);   // the caller holds m_mutex
//   void push(task* t) EXCLUDES(m_mutex);          // takes it itself
#pragma once

#if defined(__clang__)
#define TESSERA_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define TESSERA_THREAD_ANNOTATION(x)
#endif

/// On a class: its objects are capabilities (mutexes) named `x` in diagnostics.
#define CAPABILITY(x) TESSERA_THREAD_ANNOTATION(capability(x))
/// On a class: an RAII object that holds a capability from construction to destruction.
#define SCOPED_CAPABILITY TESSERA_THREAD_ANNOTATION(scoped_lockable)
/// On a member or global: read or written only with `x` held.
#define GUARDED_BY(x) TESSERA_THREAD_ANNOTATION(guarded_by(x))
/// On a pointer: what it points to is read or written only with `x` held.
#define PT_GUARDED_BY(x) TESSERA_THREAD_ANNOTATION(pt_guarded_by(x))
/// On a mutex: the order in which mutexes are taken.
#define ACQUIRED_BEFORE(...) TESSERA_THREAD_ANNOTATION(acquired_before(__VA_ARGS__))
#define ACQUIRED_AFTER(...) TESSERA_THREAD_ANNOTATION(acquired_after(__VA_ARGS__))
/// On a function: the caller holds these (exclusively / shared) and still holds them after.
#define REQUIRES(...) TESSERA_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define REQUIRES_SHARED(...) TESSERA_THREAD_ANNOTATION(requires_shared_capability(__VA_ARGS__))
/// On a function: it takes these (held on return) / gives them up (held on entry). Without an
/// argument on a member function of a capability or a scoped capability: `this`.
#define ACQUIRE(...) TESSERA_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define ACQUIRE_SHARED(...) TESSERA_THREAD_ANNOTATION(acquire_shared_capability(__VA_ARGS__))
#define RELEASE(...) TESSERA_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define RELEASE_SHARED(...) TESSERA_THREAD_ANNOTATION(release_shared_capability(__VA_ARGS__))
/// On a function: it takes the capabilities when it returns the first argument (true or false).
#define TRY_ACQUIRE(...) TESSERA_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
/// On a function: the caller must not hold these (the function takes them; no self-deadlock).
#define EXCLUDES(...) TESSERA_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
/// On a function: it checks at run time that the capability is held (the analysis trusts it).
#define ASSERT_CAPABILITY(x) TESSERA_THREAD_ANNOTATION(assert_capability(x))
/// On a function: it returns a reference to the capability `x`.
#define RETURN_CAPABILITY(x) TESSERA_THREAD_ANNOTATION(lock_returned(x))
/// On a function: not analyzed (say why beside it).
#define NO_THREAD_SAFETY_ANALYSIS TESSERA_THREAD_ANNOTATION(no_thread_safety_analysis)
