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

/// One pattern element at pattern[p] against c; advances p past the element. Outcome: matched.
bool match_one(std::string_view pattern, std::size_t& p, char c, bool nocase) noexcept {
  const char pc = pattern[p];
  if (pc == '?') {
    ++p;
    return true;
  }
  if (pc == '[') {
    ++p;
    return match_class(pattern, p, c, nocase);
  }
  char want = pc;
  if (pc == '\\' && p + 1 < pattern.size()) want = pattern[++p];
  ++p;
  return fold(want, nocase) == fold(c, nocase);
}

}  // namespace

bool glob_match(std::string_view pattern, std::string_view text, bool nocase) noexcept {
  // Greedy matching that backtracks to the last '*' only: O(pattern * text), where the
  // recursive form is exponential in the number of stars.
  std::size_t p = 0;
  std::size_t t = 0;
  std::size_t star_p = std::string_view::npos;
  std::size_t star_t = 0;
  while (t < text.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      star_p = ++p;
      star_t = t;
      continue;
    }
    if (p < pattern.size()) {
      std::size_t next = p;
      if (match_one(pattern, next, text[t], nocase)) {
        p = next;
        ++t;
        continue;
      }
    }
    if (star_p == std::string_view::npos) return false;
    p = star_p;
    t = ++star_t;
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

}  // namespace server
