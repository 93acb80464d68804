// server::glob_match — see glob.h.
#include "glob.h"

#include <cctype>
#include <utility>

namespace server {
namespace {

char fold(char c, bool nocase) noexcept {
  return nocase ? static_cast<char>(std::tolower(static_cast<unsigned char>(c))) : c;
}

/// Matches a [...] class at pattern[p] (just after '['); advances p past it. Outcome: matched.
bool match_class(std::string_view pattern, std::size_t& p, char c, bool nocase) noexcept {
  bool negate = false;
  bool match = false;
  if (p < pattern.size() && pattern[p] == '^') {
    negate = true;
    ++p;
  }
  while (p < pattern.size() && pattern[p] != ']') {
    if (pattern[p] == '\\' && p + 1 < pattern.size()) {
      ++p;
      if (fold(pattern[p], nocase) == fold(c, nocase)) match = true;
    } else if (p + 2 < pattern.size() && pattern[p + 1] == '-' && pattern[p + 2] != ']') {
      char lo = fold(pattern[p], nocase);
      char hi = fold(pattern[p + 2], nocase);
      if (lo > hi) std::swap(lo, hi);
      const char f = fold(c, nocase);
      if (f >= lo && f <= hi) match = true;
      p += 2;
    } else if (fold(pattern[p], nocase) == fold(c, nocase)) {
      match = true;
    }
    ++p;
  }
  if (p < pattern.size()) ++p;  // the ']' (an unclosed class ends with the pattern)
  return negate ? !match : match;
}

bool match_from(std::string_view pattern, std::size_t p, std::string_view text, std::size_t t,
                bool nocase, int depth) noexcept {
  // Redis caps the recursion of `*` too (stringmatchlen_impl's nesting limit).
  if (depth > 1000) return false;
  while (p < pattern.size()) {
    const char pc = pattern[p];
    if (pc == '*') {
      while (p + 1 < pattern.size() && pattern[p + 1] == '*') ++p;
      if (p + 1 == pattern.size()) return true;
      for (std::size_t k = t; k <= text.size(); ++k) {
        if (match_from(pattern, p + 1, text, k, nocase, depth + 1)) return true;
      }
      return false;
    }
    if (t >= text.size()) return false;
    if (pc == '?') {
      ++p;
    } else if (pc == '[') {
      ++p;
      if (!match_class(pattern, p, text[t], nocase)) return false;
    } else {
      char want = pc;
      if (pc == '\\' && p + 1 < pattern.size()) want = pattern[++p];
      if (fold(want, nocase) != fold(text[t], nocase)) return false;
      ++p;
    }
    ++t;
  }
  return t == text.size();
}

}  // namespace

bool glob_match(std::string_view pattern, std::string_view text, bool nocase) noexcept {
  return match_from(pattern, 0, text, 0, nocase, 0);
}

}  // namespace server
