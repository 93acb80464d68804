// src/util/compiler.h — compiler hints used on the scheduler's hot paths.
#pragma once

/// Inlines a small function into every caller even where the optimizer would not (a task's
/// spawn and completion run tens of millions of times a second; a call and its register saves
/// are a measurable share of that).
#if defined(__GNUC__) || defined(__clang__)
#define TESSERA_ALWAYS_INLINE inline __attribute__((always_inline))
#define TESSERA_NOINLINE __attribute__((noinline))
/// On the definition of an out-of-line public function (declared in include/tessera/, defined in
/// a .cpp): inlined into callers in other translation units when link-time optimization is on
/// (the `bench` preset), an ordinary function otherwise. GCC warns that such a function "might
/// not be inlinable" (true without LTO), hence the pragma around it: TESSERA_LTO_INLINE_BEGIN /
/// TESSERA_LTO_INLINE_END.
#define TESSERA_LTO_INLINE __attribute__((always_inline))
#define TESSERA_LTO_INLINE_BEGIN \
  _Pragma("GCC diagnostic push") _Pragma("GCC diagnostic ignored \"-Wattributes\"")
#define TESSERA_LTO_INLINE_END _Pragma("GCC diagnostic pop")
#else
#define TESSERA_ALWAYS_INLINE inline
#define TESSERA_NOINLINE
#define TESSERA_LTO_INLINE
#define TESSERA_LTO_INLINE_BEGIN
#define TESSERA_LTO_INLINE_END
#endif
