// src/util/compiler.h — compiler hints used on the scheduler's hot paths.
#pragma once

/// Inlines a small function into every caller even where the optimizer would not (a task's
/// spawn and completion run tens of millions of times a second; a call and its register saves
/// are a measurable share of that).
#if defined(__GNUC__) || defined(__clang__)
#define TESSERA_ALWAYS_INLINE inline __attribute__((always_inline))
#define TESSERA_NOINLINE __attribute__((noinline))
#else
#define TESSERA_ALWAYS_INLINE inline
#define TESSERA_NOINLINE
#endif
