// bench/common/flags.h — the command-line flags of one tessera-bench subcommand.
//
// A subcommand declares its flags as a list of flag_definition (made with the helpers below);
// parse_flags() checks a command line against that list and returns the values, a request for
// help, or one error line. Every value — the defaults included — goes through the same
// parser, so a default can never be something the user could not have typed.
//
//   std::vector<flag_definition> defs{int_flag("n", 30, "fib argument", 0, 90)};
//   std::vector<std::string_view> args{"--n", "25"};
//   parse_result r = parse_flags(defs, args);
//   if (r.status == parse_status::error) { std::fputs(r.error.c_str(), stderr); return 2; }
//   std::int64_t n = r.values.integer("n");   // 25
//
// Syntax: `--name value` or `--name=value`; lists are comma-separated without spaces. A value
// that starts with "--" counts as missing. A flag given twice keeps the last value. A boolean
// flag is also given alone: `--name` (yes) or `--no-name` (no); a word after it is its value
// only if it is yes or no.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace tessera::bench {

enum class flag_kind : std::uint8_t {
  integer,      ///< one signed integer within [min, max]
  uint_list,    ///< comma-separated unsigned integers, each within [min, max]
  string,       ///< any non-empty text
  choice,       ///< one of `choices`
  choice_list,  ///< comma-separated subset of `choices` ("all" selects every choice)
  boolean,      ///< yes or no: `--name`, `--no-name`, `--name=no`, `--name no`
};

struct flag_definition {
  std::string name;  ///< without the leading "--"
  flag_kind kind = flag_kind::integer;
  std::string default_value;  ///< in command-line syntax; empty: the flag has no value unless given
  std::string help;           ///< one line
  std::vector<std::string> choices;
  std::int64_t min = std::numeric_limits<std::int64_t>::min();
  std::int64_t max = std::numeric_limits<std::int64_t>::max();
  std::string value_name;  ///< shown in --help (INT, LIST, FILE, ...)
};

flag_definition int_flag(std::string name, std::int64_t default_value, std::string help,
                         std::int64_t min = 0,
                         std::int64_t max = std::numeric_limits<std::int64_t>::max());
flag_definition uint_list_flag(std::string name, std::string default_value, std::string help,
                               std::int64_t min = 1,
                               std::int64_t max = std::numeric_limits<std::int64_t>::max());
flag_definition string_flag(std::string name, std::string default_value, std::string help,
                            std::string value_name = "TEXT");
flag_definition choice_flag(std::string name, std::string default_value,
                            std::vector<std::string> choices, std::string help);
flag_definition choice_list_flag(std::string name, std::string default_value,
                                 std::vector<std::string> choices, std::string help);
flag_definition bool_flag(std::string name, bool default_value, std::string help);

/// The parsed values of one command line, looked up by flag name. Asking for a flag that was not
/// defined, or with the accessor of another kind, is a programmer error (std::logic_error).
class flag_values {
 public:
  using value = std::variant<std::int64_t, std::vector<std::uint64_t>, std::string,
                             std::vector<std::string>, bool>;

  std::int64_t integer(std::string_view name) const;
  const std::vector<std::uint64_t>& uint_list(std::string_view name) const;
  /// string and choice flags; "" for a string flag without default that was not given.
  const std::string& text(std::string_view name) const;
  /// choice_list flags, in the order of the definition's choices, without duplicates.
  const std::vector<std::string>& list(std::string_view name) const;
  bool boolean(std::string_view name) const;
  /// True if the flag appeared on the command line.
  bool given(std::string_view name) const;
  /// True if the subcommand has this flag.
  bool defined(std::string_view name) const { return m_values.contains(name); }

  void set(const std::string& name, value v, bool given);

 private:
  const value& get(std::string_view name) const;

  std::map<std::string, value, std::less<>> m_values;
  std::map<std::string, bool, std::less<>> m_given;
};

enum class parse_status : std::uint8_t { ok, help, error };

struct parse_result {
  parse_status status = parse_status::ok;
  flag_values values;
  /// For parse_status::error: "tessera-bench: <flag>: <what is wrong>" (no newline).
  std::string error;
};

/// Parses `args` (the words after the subcommand) against `defs`. "--help" or "-h" anywhere
/// gives parse_status::help.
parse_result parse_flags(std::span<const flag_definition> defs,
                         std::span<const std::string_view> args);

/// One line per flag: "  --name VALUE   help (default: ...)".
std::string flags_help(std::span<const flag_definition> defs);

}  // namespace tessera::bench
