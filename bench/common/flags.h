// bench/common/flags.h — the command-line flags of one tessera-bench subcommand.
//
// A subcommand declares its flags as a list of flag_definition (made with the helpers below).
// declare_flags() makes each one an option, with its help line, of the subcommand's CLI11 app;
// CLI11 parses the command line; read_flags() then checks every value given (ranges, lists,
// choices) and returns the values. Every value — the defaults included — goes through the same
// check, so a default can never be something the user could not have typed.
//
//   CLI::App app{"benchmarks", "tessera-bench"};
//   CLI::App* fib = app.add_subcommand("fib", "fib(n) with one task per call");
//   std::vector<flag_definition> defs{int_flag("n", 30, "fib argument", 0, 90)};
//   declare_flags(*fib, defs);
//   app.parse(argc, argv);                           // CLI::CallForHelp for --help
//   std::int64_t n = read_flags(*fib, defs).integer("n");    // 25 for `tessera-bench fib --n 25`
//   // `--n 91`: usage_failure "tessera-bench: --n: must be between 0 and 90, got '91'"
//
// Syntax: `--name value` or `--name=value`; lists are comma-separated without spaces. A flag
// whose next word is another flag (or nothing) has no value, which is an error except for a
// boolean. A flag given twice keeps the last value. A boolean flag is also given alone:
// `--name` (yes) or `--no-name` (no); a word after `--name` is its value (yes or no).
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace CLI {
class App;
}  // namespace CLI

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

/// Adds `defs` to `command` as options (a boolean also as a hidden `--no-name`) in the help
/// section `group`, and lets `command` keep words it does not know for read_flags() to report.
/// Throws std::logic_error for a default that its own check refuses and CLI::OptionAlreadyAdded
/// for a name defined twice (programmer errors).
void declare_flags(CLI::App& command, std::span<const flag_definition> defs,
                   const std::string& group = "Options");

/// After `command` was parsed: the value of every flag in `defs` (the default where it was not
/// given). Throws usage_failure, one line naming the flag or word, for a word that is none of
/// its flags ("tessera-bench: --frobnicate: unknown flag (see --help)") or a value its check
/// refuses ("tessera-bench: --n: must be between 0 and 90, got '91'").
flag_values read_flags(const CLI::App& command, std::span<const flag_definition> defs);

}  // namespace tessera::bench
