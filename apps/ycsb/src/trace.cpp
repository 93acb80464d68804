// Trace reader and writer (ycsb/trace.h). The BasicDB line forms come from site.ycsb.BasicDB
// (verbose mode):
//   READ <table> <key> [ <fields or <all fields>> ]      UPDATE <table> <key> [ f=v ... ]
//   INSERT <table> <key> [ f=v ... ]                     SCAN <table> <startkey> <count> [ ... ]
//   DELETE <table> <key>
#include "ycsb/trace.h"

#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <istream>
#include <ostream>

namespace ycsb {

trace_error::trace_error(std::string file, uint64_t line, std::string reason)
    // Line 0: the file as a whole (it cannot be opened, or is empty): no line number shown.
    : std::runtime_error{file + (line == 0 ? "" : ":" + std::to_string(line)) + ": " + reason},
      m_file{std::move(file)},
      m_line{line},
      m_reason{std::move(reason)} {}

namespace {

constexpr bool is_space(char c) noexcept {
  return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}
constexpr bool is_digit(char c) noexcept { return c >= '0' && c <= '9'; }

// Splits a line into whitespace-separated tokens.
class tokenizer {
 public:
  explicit tokenizer(std::string_view line) noexcept : m_rest{line} {}

  std::string_view next() noexcept {
    skip_space();
    std::size_t n = 0;
    while (n < m_rest.size() && !is_space(m_rest[n])) ++n;
    const std::string_view token = m_rest.substr(0, n);
    m_rest.remove_prefix(n);
    return token;
  }
  // The unread rest of the line without surrounding whitespace.
  std::string_view remainder() noexcept {
    skip_space();
    std::string_view rest = m_rest;
    while (!rest.empty() && is_space(rest.back())) rest.remove_suffix(1);
    return rest;
  }

 private:
  void skip_space() noexcept {
    while (!m_rest.empty() && is_space(m_rest.front())) m_rest.remove_prefix(1);
  }

  std::string_view m_rest;
};

// 'token' for messages, shortened when long.
std::string quoted(std::string_view token) {
  constexpr std::size_t max_shown = 40;
  std::string s = "'";
  if (token.size() > max_shown) {
    s.append(token.substr(0, max_shown));
    s.append("...");
  } else {
    s.append(token);
  }
  s.push_back('\'');
  return s;
}

bool equals_ignoring_case(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const char ca = (a[i] >= 'a' && a[i] <= 'z') ? static_cast<char>(a[i] - 'a' + 'A') : a[i];
    if (ca != b[i]) return false;
  }
  return true;
}

std::optional<op_type> parse_verb(std::string_view verb) noexcept {
  if (equals_ignoring_case(verb, "READ")) return op_type::read;
  if (equals_ignoring_case(verb, "UPDATE")) return op_type::update;
  if (equals_ignoring_case(verb, "INSERT")) return op_type::insert;
  if (equals_ignoring_case(verb, "SCAN")) return op_type::scan;
  if (equals_ignoring_case(verb, "DELETE")) return op_type::remove;
  if (equals_ignoring_case(verb, "RMW") || equals_ignoring_case(verb, "READMODIFYWRITE")) {
    return op_type::read_modify_write;
  }
  return std::nullopt;
}

constexpr std::string_view user_prefix = "user";

std::string_view without_user_prefix(std::string_view token) noexcept {
  return token.starts_with(user_prefix) ? token.substr(user_prefix.size()) : token;
}

// A token meant as a key: digits (or a sign, so that "-5" is reported as a bad key), optionally
// after "user".
bool looks_like_key(std::string_view token) noexcept {
  const std::string_view t = without_user_prefix(token);
  return !t.empty() && (is_digit(t.front()) || t.front() == '+' || t.front() == '-');
}

enum class number_status { ok, not_decimal, out_of_range };

template <typename T>
number_status parse_decimal(std::string_view text, T& out) noexcept {
  if (text.empty()) return number_status::not_decimal;
  for (const char c : text) {
    if (!is_digit(c)) return number_status::not_decimal;
  }
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  if (ec == std::errc::result_out_of_range) return number_status::out_of_range;
  if (ec != std::errc{} || end != text.data() + text.size()) return number_status::not_decimal;
  return number_status::ok;
}

}  // namespace

std::optional<operation> parse_trace_line(std::string_view line, const std::string& name,
                                          uint64_t line_number) {
  const auto fail = [&](std::string reason) {
    return trace_error{name, line_number, std::move(reason)};
  };

  tokenizer tokens{line};
  const std::string_view verb = tokens.next();
  if (verb.empty() || verb.front() == '#') return std::nullopt;  // blank line or comment

  const std::optional<op_type> type = parse_verb(verb);
  if (!type) {
    throw fail("unknown verb " + quoted(verb) +
               " (expected INSERT, READ, UPDATE, SCAN, DELETE or RMW)");
  }

  // [table] key
  std::string_view key_token = tokens.next();
  if (key_token.empty() || key_token.front() == '[')
    throw fail("missing key after " + std::string(verb));
  if (!looks_like_key(key_token)) {
    const std::string_view table = key_token;
    key_token = tokens.next();
    if (key_token.empty() || key_token.front() == '[') {
      throw fail("missing key after " + std::string(verb) + " " + quoted(table) +
                 " (taken as the table name)");
    }
  }
  operation op{};
  op.type = *type;
  switch (parse_decimal(without_user_prefix(key_token), op.key)) {
    case number_status::ok: break;
    case number_status::not_decimal:
      throw fail("key " + quoted(key_token) + " is not a 64-bit unsigned decimal");
    case number_status::out_of_range:
      throw fail("key " + quoted(key_token) + " is out of the 64-bit unsigned range");
  }

  if (op.type == op_type::scan) {
    const std::string_view count = tokens.next();
    if (count.empty() || count.front() == '[') throw fail("missing scan length after the key");
    switch (parse_decimal(count, op.scan_length)) {
      case number_status::ok: break;
      case number_status::not_decimal:
        throw fail("scan length " + quoted(count) + " is not a 32-bit unsigned decimal");
      case number_status::out_of_range:
        throw fail("scan length " + quoted(count) + " is out of the 32-bit unsigned range");
    }
  }

  // BasicDB's field list "[ ... ]" (its values are printable but may contain anything, brackets
  // included).
  const std::string_view rest = tokens.remainder();
  if (!rest.empty()) {
    if (rest.front() != '[') throw fail("trailing garbage " + quoted(rest));
    if (rest.back() != ']')
      throw fail("unterminated field list " + quoted(rest) + " (no closing ']')");
  }

  switch (op.type) {
    case op_type::insert: op.value = value_of(op.key); break;
    case op_type::update:
    case op_type::read_modify_write: op.value = updated_value_of(op.key); break;
    default: break;
  }
  return op;
}

std::vector<operation> read_trace(std::istream& in, std::string name) {
  std::vector<operation> ops;
  std::string line;
  uint64_t line_number = 0;
  while (std::getline(in, line)) {
    ++line_number;
    if (std::optional<operation> op = parse_trace_line(line, name, line_number)) ops.push_back(*op);
  }
  if (in.bad()) throw trace_error{std::move(name), line_number, "read error"};
  return ops;
}

std::vector<operation> read_trace(const std::string& path) {
  std::ifstream in{path};
  if (!in.is_open())
    throw trace_error{path, 0, std::string("cannot open file: ") + std::strerror(errno)};
  return read_trace(in, path);
}

void write_trace(std::ostream& out, std::span<const operation> ops) {
  std::string buffer;
  buffer.reserve(std::size_t{64} * 1024);
  char number[24];
  for (const operation& op : ops) {
    buffer.append(to_string(op.type));
    buffer.push_back(' ');
    buffer.append(number, std::to_chars(number, number + sizeof number, op.key).ptr);
    if (op.type == op_type::scan) {
      buffer.push_back(' ');
      buffer.append(number, std::to_chars(number, number + sizeof number, op.scan_length).ptr);
    }
    buffer.push_back('\n');
    if (buffer.size() > std::size_t{60} * 1024) {
      out.write(buffer.data(), static_cast<std::streamsize>(buffer.size()));
      buffer.clear();
    }
  }
  out.write(buffer.data(), static_cast<std::streamsize>(buffer.size()));
}

}  // namespace ycsb
