// bench/common/flags.h — the command line of tessera-bench: subcommands and their flags.
//
// A subcommand declares its flags as a list of flag_definition (made with the helpers below);
// command_line turns them into options of the subcommand, parses the words (with CLI11, which only
// flags.cpp includes) and then checks every value given (ranges, lists, choices). Every value —
// the defaults included — goes through the same check, so a default can never be something the
// user could not have typed.
//
//   command_line cli{"benchmarks", "tessera-bench"};
//   std::vector<flag_definition> defs{int_flag("n", 30, "fib argument", 0, 90)};
//   cli.add_subcommand("fib", "fib(n) with one task per call", "", {{"Options", defs}});
//   parsed_command p = cli.parse(argc, argv);
//   // `tessera-bench fib --n 25`: p.result == parse_result::run, p.values.integer("n") == 25
//   // `--n 91`: parse_result::usage_error, p.text "tessera-bench: --n: must be between 0 and 90,
//   //           got '91'"; `--help`: parse_result::help, p.text the subcommand's help
//
// Syntax: `--name value` or `--name=value`; lists are comma-separated without spaces. A flag
// whose next word is another flag (or nothing) has no value, which is an error except for a
// boolean. A flag given twice keeps the last value. A boolean flag is also given alone:
// `--name` (yes) or `--no-name` (no); a word after `--name` is its value (yes or no).
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace tessera::bench {

enum class flag_kind : std::uint8_t {
  integer,      ///< one signed integer within [min, max]
  uint_list,    ///< comma-separated unsigned integers, each within [min, max], none twice
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

/// A help section of a subcommand and the flags listed in it.
struct flag_section {
  std::string title;
  std::vector<flag_definition> flags;
};

/// What command_line::parse made of the words.
enum class parse_result : std::uint8_t {
  run,          ///< a subcommand and its values: run it
  help,         ///< --help after a subcommand: print `text` on stdout, exit 0
  usage_error,  ///< `text` is one line naming the word or flag: print it on stderr, exit 2
};

struct parsed_command {
  parse_result result = parse_result::usage_error;
  std::string subcommand;  ///< parse_result::run: its name
  flag_values values;      ///< parse_result::run: every flag of the subcommand
  std::string text;        ///< parse_result::help: the help text; usage_error: the error
};

/// A program's command line: exactly one subcommand, then that subcommand's flags.
class command_line {
 public:
  command_line(const std::string& description, const std::string& program);
  ~command_line();
  command_line(const command_line&) = delete;
  command_line& operator=(const command_line&) = delete;

  /// Throws std::logic_error for a default that its own check refuses or a flag defined twice
  /// (programmer errors).
  void add_subcommand(const std::string& name, const std::string& help, const std::string& footer,
                      std::span<const flag_section> sections);
  /// Text under the program's help.
  void set_footer(const std::string& footer);
  /// The program's help: its subcommands.
  std::string help() const;

  /// Parses the words after the program's name. A word that is none of the subcommand's flags
  /// is an error ("tessera-bench: --frobnicate: unknown flag (see --help)"), as is a value its
  /// check refuses ("tessera-bench: --n: must be between 0 and 90, got '91'").
  parsed_command parse(const std::vector<std::string>& words);

 private:
  struct impl;
  std::unique_ptr<impl> m_impl;
};

}  // namespace tessera::bench
