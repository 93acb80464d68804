// ycsb/trace.h: reads (and writes) operation traces, one operation per line, either in the plain
// form `INSERT k`, `READ k`, `UPDATE k`, `SCAN k n`, `DELETE k`, `RMW k` or as printed by YCSB's
// BasicDB (site.ycsb.BasicDB with -p basicdb.verbose=true), e.g. `READ usertable
// user6284781860667377211 [ <all fields>]`.
//
// Usage:
//   try {
//     std::vector<ycsb::operation> ops = ycsb::read_trace("trace.txt");
//     ycsb::write_trace(std::cout, ops);  // the plain form, which read_trace reads back
//   } catch (const ycsb::trace_error& e) {
//     std::fprintf(stderr, "%s\n", e.what());  // "trace.txt:12: unknown verb 'FROB' (...)"
//   }
//
// Grammar (tokens separated by spaces or tabs; a trailing '\r' is ignored):
//   line    := blank | '#' anything | verb [table] key [count] [fields]
//   verb    := INSERT | READ | UPDATE | SCAN | DELETE | RMW | READMODIFYWRITE   (any letter case)
//   table   := a token that does not look like a key (it starts with neither a digit, '+', '-' nor
//              "user" followed by one of those), e.g. "usertable"; it is ignored
//   key     := ["user"] decimal digits, value < 2^64 (leading zeros allowed: YCSB's zeropadding)
//   count   := decimal digits, value < 2^32: required for SCAN, forbidden otherwise
//   fields := the rest of the line, starting with '[' and ending with ']' (BasicDB's field list,
//   ignored)
// The key is used as is (it is already hashed in YCSB traces). Values are filled in as the
// generator does: INSERT -> value_of(key), UPDATE and RMW -> updated_value_of(key), others 0.
// DELETE -> op_type::remove. A malformed line throws trace_error with what() = "NAME:LINE: reason"
// (LINE counts from 1; a file that cannot be opened gives "PATH:0: cannot open file: ...").
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "ycsb/operation.h"

namespace ycsb {

class trace_error : public std::runtime_error {
 public:
  /// `line` 0: about the file as a whole (what() then shows no line number).
  trace_error(std::string file, uint64_t line, std::string reason);

  [[nodiscard]] const std::string& file() const noexcept { return m_file; }
  [[nodiscard]] uint64_t line() const noexcept { return m_line; }
  [[nodiscard]] const std::string& reason() const noexcept { return m_reason; }

 private:
  std::string m_file;
  uint64_t m_line;
  std::string m_reason;
};

// Parses one line (without its '\n'). std::nullopt for a blank or comment line; trace_error naming
// `name` and `line_number` for a malformed one.
[[nodiscard]] std::optional<operation> parse_trace_line(std::string_view line,
                                                        const std::string& name,
                                                        uint64_t line_number);

[[nodiscard]] std::vector<operation> read_trace(std::istream& in, std::string name);
[[nodiscard]] std::vector<operation> read_trace(const std::string& path);

// Writes ops in the plain form (`SCAN k n`, `DELETE k` for remove, `RMW k` for read_modify_write),
// one per line; read_trace gives the same operations back.
void write_trace(std::ostream& out, std::span<const operation> ops);

}  // namespace ycsb
