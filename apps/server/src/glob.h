#pragma once
// server::glob_match — Redis's glob-style pattern matching (util.c, stringmatchlen) for KEYS,
// SCAN MATCH and CONFIG GET: `*`, `?`, `[abc]`, `[^a-z]`, `\x` escapes; binary-safe.
//
//   server::glob_match("user:*", "user:42")      // true
//   server::glob_match("h[^e]llo", "hello")      // false

#include <string_view>

namespace server {

/// Outcome: true if `text` matches `pattern`. `nocase` folds ASCII case.
bool glob_match(std::string_view pattern, std::string_view text, bool nocase = false) noexcept;

}  // namespace server
