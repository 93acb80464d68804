// server::request_parser — see resp_parser.h.
#include "resp_parser.h"

#include <algorithm>
#include <cctype>
#include <climits>
#include <cstring>

namespace server {
namespace {

constexpr std::string_view err_multibulk_len = "-ERR Protocol error: invalid multibulk length\r\n";
constexpr std::string_view err_unauth_multibulk_len =
    "-ERR Protocol error: unauthenticated multibulk length\r\n";
constexpr std::string_view err_bulk_len = "-ERR Protocol error: invalid bulk length\r\n";
constexpr std::string_view err_big_mbulk = "-ERR Protocol error: too big mbulk count string\r\n";
constexpr std::string_view err_big_bulk = "-ERR Protocol error: too big bulk count string\r\n";
constexpr std::string_view err_big_inline = "-ERR Protocol error: too big inline request\r\n";
constexpr std::string_view err_quotes = "-ERR Protocol error: unbalanced quotes in request\r\n";

/// "-ERR Protocol error: expected '$', got 'X'\r\n" for each byte X (Redis prints the byte as it
/// is, a control character included).
std::string_view expected_dollar(char got) {
  static const auto table = [] {
    std::vector<std::string> t(256);
    for (int c = 0; c < 256; ++c) {
      t[static_cast<std::size_t>(c)] = std::string("-ERR Protocol error: expected '$', got '") +
                                       static_cast<char>(c) + "'\r\n";
    }
    return t;
  }();
  return table[static_cast<unsigned char>(got)];
}

parse_result error(std::string_view text) {
  return {.outcome = parse_outcome::protocol_error, .consumed = 0, .error = text};
}

constexpr parse_result need_more{};

/// Where the header line that starts at `pos` ends (its '\r'), as Redis finds it: the first '\r'
/// from `pos`; npos while it and the byte after it are not both there. Inlined into its three
/// calls a request (a call each cost about a third of its instructions).
[[gnu::always_inline]] inline std::size_t line_end(std::string_view in, std::size_t pos) noexcept {
  // Nearly every header is "*N", "$N" or "$NN": its '\r' is among the next four bytes, looked at
  // one by one without a call (memchr: three calls a GET).
  constexpr std::size_t npos = std::string_view::npos;
  const std::size_t n = in.size();
  std::size_t cr = 0;
  if (pos + 4 < n) {  // (then a '\r' among them has its next byte)
    const char* p = in.data() + pos;
    if (p[0] == '\r') return pos;
    if (p[1] == '\r') return pos + 1;
    if (p[2] == '\r') return pos + 2;
    if (p[3] == '\r') return pos + 3;
    cr = in.find('\r', pos + 4);
  } else {
    cr = in.find('\r', pos);
  }
  if (cr == npos || cr + 1 >= n) return npos;
  return cr;
}

int hex_digit(char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool is_blank(char c) noexcept {
  return c == ' ' || c == '\n' || c == '\r' || c == '\t' || c == '\v' || c == '\f' || c == '\0';
}

/// parse_integer for a header's count or length, with the one- and two-digit ones (nearly
/// every request's) decided inline.
bool parse_length(std::string_view s, long long& out) noexcept {
  const auto digit = [](char c) { return c >= '0' && c <= '9'; };
  if (s.size() == 1 && digit(s[0])) {
    out = s[0] - '0';
    return true;
  }
  if (s.size() == 2 && s[0] != '0' && digit(s[0]) && digit(s[1])) {
    out = (s[0] - '0') * 10 + (s[1] - '0');
    return true;
  }
  return parse_integer(s, out);
}

}  // namespace

bool parse_integer(std::string_view s, long long& out) noexcept {
  if (s.empty() || s.size() > 20) return false;
  std::size_t i = 0;
  bool negative = false;
  if (s[0] == '-') {
    negative = true;
    i = 1;
    if (s.size() == 1) return false;
  }
  if (s[i] == '0') {
    if (s.size() == 1) {
      out = 0;
      return true;
    }
    return false;  // a leading zero, or "-0"
  }
  unsigned long long v = 0;
  // Up to 19 digits cannot overflow an unsigned 64-bit value (10^19 - 1 < 2^64); only a 20th
  // digit is checked (a division per digit was most of a request header's parse).
  const std::size_t unchecked = std::min(s.size(), i + 19);
  for (; i < unchecked; ++i) {
    const char c = s[i];
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<unsigned long long>(c - '0');
  }
  for (; i < s.size(); ++i) {
    const char c = s[i];
    if (c < '0' || c > '9') return false;
    const auto d = static_cast<unsigned long long>(c - '0');
    if (v > (ULLONG_MAX - d) / 10) return false;
    v = v * 10 + d;
  }
  if (negative) {
    if (v > static_cast<unsigned long long>(LLONG_MAX) + 1) return false;
    out = v == static_cast<unsigned long long>(LLONG_MAX) + 1 ? LLONG_MIN
                                                               : -static_cast<long long>(v);
  } else {
    if (v > static_cast<unsigned long long>(LLONG_MAX)) return false;
    out = static_cast<long long>(v);
  }
  return true;
}

bool split_inline_args(std::string_view line, std::deque<std::string>& owned,
                       std::vector<std::string_view>& args) {
  std::size_t p = 0;
  const std::size_t n = line.size();
  const std::size_t first = args.size();
  while (true) {
    while (p < n && is_blank(line[p])) ++p;
    if (p >= n) return true;
    const std::size_t start = p;
    bool plain = true;  // no quotes or escapes: the argument is a view into the line
    std::string current;
    bool in_double = false;
    bool in_single = false;
    bool done = false;
    while (!done) {
      if (in_double) {
        if (p >= n) {
          args.resize(first);
          return false;
        }
        if (line[p] == '\\' && p + 3 < n && line[p + 1] == 'x' && hex_digit(line[p + 2]) >= 0 &&
            hex_digit(line[p + 3]) >= 0) {
          current += static_cast<char>(hex_digit(line[p + 2]) * 16 + hex_digit(line[p + 3]));
          p += 3;
        } else if (line[p] == '\\' && p + 1 < n) {
          ++p;
          switch (line[p]) {
            case 'n': current += '\n'; break;
            case 'r': current += '\r'; break;
            case 't': current += '\t'; break;
            case 'b': current += '\b'; break;
            case 'a': current += '\a'; break;
            default: current += line[p]; break;
          }
        } else if (line[p] == '"') {
          // The closing quote must be followed by a blank or the end.
          if (p + 1 < n && !is_blank(line[p + 1])) {
            args.resize(first);
            return false;
          }
          done = true;
        } else {
          current += line[p];
        }
      } else if (in_single) {
        if (p >= n) {
          args.resize(first);
          return false;
        }
        if (line[p] == '\\' && p + 1 < n && line[p + 1] == '\'') {
          ++p;
          current += '\'';
        } else if (line[p] == '\'') {
          if (p + 1 < n && !is_blank(line[p + 1])) {
            args.resize(first);
            return false;
          }
          done = true;
        } else {
          current += line[p];
        }
      } else {
        if (p >= n || is_blank(line[p])) {
          done = true;
          break;  // p stays on the blank
        }
        if (line[p] == '"') {
          in_double = true;
          plain = false;
        } else if (line[p] == '\'') {
          in_single = true;
          plain = false;
        } else {
          current += line[p];
        }
      }
      if (p < n) ++p;
    }
    if (plain) {
      args.push_back(line.substr(start, current.size()));
    } else {
      owned.push_back(std::move(current));
      args.emplace_back(owned.back());
    }
  }
}

parse_result request_parser::parse(std::string_view in, std::vector<std::string_view>& args,
                                   bool authenticated) {
  if (in.empty()) return need_more;
  if (in[0] == '*') return parse_multibulk(in, args, authenticated);
  return parse_inline(in, args);
}

parse_result request_parser::parse_inline(std::string_view in,
                                          std::vector<std::string_view>& args) {
  const std::size_t nl = in.find('\n');
  if (nl == std::string_view::npos) {
    if (in.size() > m_limits.max_inline) return error(err_big_inline);
    return need_more;
  }
  if (nl > m_limits.max_inline) return error(err_big_inline);
  std::string_view line = in.substr(0, nl);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  if (!split_inline_args(line, m_owned, args)) return error(err_quotes);
  return {.outcome = parse_outcome::complete, .consumed = nl + 1, .error = {}};
}

parse_result request_parser::parse_multibulk(std::string_view in,
                                             std::vector<std::string_view>& args,
                                             bool authenticated) {
  std::size_t cr = line_end(in, 0);
  if (cr == std::string_view::npos) {
    if (in.size() > m_limits.max_inline) return error(err_big_mbulk);
    return need_more;
  }
  if (cr > m_limits.max_inline) return error(err_big_mbulk);
  long long count = 0;
  // (Views by pointer and length here and below, their bounds checked already: substr's own
  // check kept it out of line, a call each. in[0] is '*', so 1 <= cr < in.size().)
  if (!parse_length(std::string_view(in.data() + 1, cr - 1), count) || count > INT_MAX) {
    return error(err_multibulk_len);
  }
  if (count > 0 && static_cast<unsigned long long>(count) > m_limits.max_multibulk) {
    return error(err_multibulk_len);
  }
  if (!authenticated && count > 0 &&
      static_cast<unsigned long long>(count) > m_limits.max_multibulk_unauthenticated) {
    return error(err_unauth_multibulk_len);
  }
  std::size_t pos = cr + 2;
  if (count <= 0) return {.outcome = parse_outcome::complete, .consumed = pos, .error = {}};
  const std::size_t first = args.size();
  for (long long i = 0; i < count; ++i) {
    if (pos >= in.size()) {
      args.resize(first);
      return need_more;
    }
    if (in[pos] != '$') {
      args.resize(first);
      return error(expected_dollar(in[pos]));
    }
    cr = line_end(in, pos);
    if (cr == std::string_view::npos) {
      args.resize(first);
      if (in.size() - pos > m_limits.max_inline) return error(err_big_bulk);
      return need_more;
    }
    if (cr - pos > m_limits.max_inline) {
      args.resize(first);
      return error(err_big_bulk);
    }
    long long len = 0;
    // (in[pos] is '$', so pos < cr < in.size().)
    if (!parse_length(std::string_view(in.data() + pos + 1, cr - pos - 1), len) || len < 0 ||
        static_cast<unsigned long long>(len) > m_limits.max_bulk_len) {
      args.resize(first);
      return error(err_bulk_len);
    }
    pos = cr + 2;
    const auto ulen = static_cast<std::size_t>(len);
    // The bulk and the two bytes after it (Redis skips them without looking).
    if (in.size() - pos < ulen + 2) {
      args.resize(first);
      return need_more;
    }
    args.emplace_back(in.data() + pos, ulen);  // (in.size() - pos >= ulen + 2, above)
    pos += ulen + 2;
  }
  return {.outcome = parse_outcome::complete, .consumed = pos, .error = {}};
}

}  // namespace server
