// The flags of a subcommand as CLI11 options. CLI11 reads the command line: the names, `=`,
// which word is a flag's value, words that are no flag, --help and the help text. The value of
// a flag is checked and converted here (parse_value, one case per kind), by read_flags() after
// the parse: CLI11's own integer conversion takes 0x10 and 010 as 16 and 8 and saturates a
// number beyond 64 bits instead of refusing it, its range and member validators would not say
// which element of a list is wrong, and it runs no validator on a flag given without a value.
#include "common/flags.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <charconv>
#include <map>
#include <memory>
#include <stdexcept>
#include <system_error>
#include <utility>

#include "common/timing.h"

namespace tessera::bench {

namespace {

std::vector<std::string_view> split(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  for (;;) {
    const std::size_t end = text.find(separator, start);
    parts.push_back(text.substr(start, end == std::string_view::npos ? end : end - start));
    if (end == std::string_view::npos) return parts;
    start = end + 1;
  }
}

std::string quoted(std::string_view text) {
  std::string out(1, '\'');
  out += text;
  out += '\'';
  return out;
}

std::string joined(const std::vector<std::string>& items, std::string_view separator) {
  std::string out;
  for (const auto& item : items) {
    if (!out.empty()) out += separator;
    out += item;
  }
  return out;
}

enum class integer_outcome : std::uint8_t { ok, not_a_number, out_of_range };

integer_outcome parse_integer(std::string_view text, std::int64_t& out) {
  if (text.empty()) return integer_outcome::not_a_number;
  const char* first = text.data();
  const char* last = text.data() + text.size();
  if (*first == '+') ++first;  // from_chars rejects a leading '+'
  const auto [ptr, ec] = std::from_chars(first, last, out);
  if (ec == std::errc::result_out_of_range) return integer_outcome::out_of_range;
  if (ec != std::errc{} || ptr != last || first == last) return integer_outcome::not_a_number;
  return integer_outcome::ok;
}

std::string range_text(const flag_definition& def) {
  constexpr auto lowest = std::numeric_limits<std::int64_t>::min();
  constexpr auto highest = std::numeric_limits<std::int64_t>::max();
  if (def.min != lowest && def.max != highest)
    return "between " + std::to_string(def.min) + " and " + std::to_string(def.max);
  if (def.min != lowest) return ">= " + std::to_string(def.min);
  if (def.max != highest) return "<= " + std::to_string(def.max);
  return "";
}

/// What is wrong with `text` as a value of `def` ("" if nothing; then `out` holds the value).
/// An empty text is a flag given without a value: yes for a boolean, missing for the others.
std::string parse_value(const flag_definition& def, std::string_view text,
                        flag_values::value& out) {
  if (text.empty() && def.kind != flag_kind::boolean) return "missing value";
  switch (def.kind) {
    case flag_kind::integer: {
      std::int64_t v = 0;
      const integer_outcome r = parse_integer(text, v);
      const std::string range = range_text(def);
      if (r == integer_outcome::not_a_number)
        return "expected an integer" + (range.empty() ? "" : " " + range) + ", got " +
               quoted(text);
      if (r == integer_outcome::out_of_range)
        return "beyond a 64-bit integer" + (range.empty() ? "" : " (must be " + range + ")") +
               ", got " + quoted(text);
      if (v < def.min || v > def.max) return "must be " + range + ", got " + quoted(text);
      out = v;
      return "";
    }
    case flag_kind::uint_list: {
      std::vector<std::uint64_t> values;
      for (std::string_view part : split(text, ',')) {
        std::int64_t v = 0;
        const bool digits_only = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) {
          return c >= '0' && c <= '9';
        });
        if (!digits_only || parse_integer(part, v) != integer_outcome::ok || v < def.min ||
            v > def.max)
          return "expected a comma-separated list of integers " + range_text(def) + ", got " +
                 quoted(text);
        // A repeated value would be measured twice, and its ratios taken against the first
        // row of the reference with that value.
        if (std::find(values.begin(), values.end(), static_cast<std::uint64_t>(v)) != values.end())
          return std::string(part) + " is given twice in " + quoted(text);
        values.push_back(static_cast<std::uint64_t>(v));
      }
      out = std::move(values);
      return "";
    }
    case flag_kind::string:
      out = std::string(text);
      return "";
    case flag_kind::choice:
      if (std::find(def.choices.begin(), def.choices.end(), text) == def.choices.end())
        return "expected one of " + joined(def.choices, ",") + ", got " + quoted(text);
      out = std::string(text);
      return "";
    case flag_kind::choice_list: {
      std::vector<bool> chosen(def.choices.size(), false);
      for (std::string_view part : split(text, ',')) {
        if (part == "all") {
          std::fill(chosen.begin(), chosen.end(), true);
          continue;
        }
        const auto it = std::find(def.choices.begin(), def.choices.end(), part);
        if (it == def.choices.end())
          return "expected a comma-separated list of " + joined(def.choices, ",") +
                 " (or all), got " + quoted(text);
        chosen[static_cast<std::size_t>(it - def.choices.begin())] = true;
      }
      std::vector<std::string> values;
      for (std::size_t i = 0; i < chosen.size(); ++i)
        if (chosen[i]) values.push_back(def.choices[i]);
      out = std::move(values);
      return "";
    }
    case flag_kind::boolean:
      if (!text.empty() && text != "yes" && text != "no")
        return "expected yes or no, got " + quoted(text);
      out.emplace<bool>(text != "no");
      return "";
  }
  return "unknown flag kind";
}

/// The help line: what the flag does, then its range or choices and its default.
std::string help_line(const flag_definition& def) {
  std::string notes;
  if (def.kind == flag_kind::choice) notes = "one of: " + joined(def.choices, ", ");
  if (def.kind == flag_kind::choice_list) notes = "any of: " + joined(def.choices, ", ");
  if (def.kind == flag_kind::boolean) notes = "or --no-" + def.name + " for no";
  const std::string range = range_text(def);
  if ((def.kind == flag_kind::integer || def.kind == flag_kind::uint_list) && !range.empty())
    notes = (def.kind == flag_kind::uint_list ? "each " : "") + range;
  if (!notes.empty()) notes += "; ";
  notes += "default: " + (def.default_value.empty() ? std::string("none") : def.default_value);
  return def.help + " (" + notes + ")";
}

}  // namespace

flag_definition int_flag(std::string name, std::int64_t default_value, std::string help,
                         std::int64_t min, std::int64_t max) {
  return {.name = std::move(name), .kind = flag_kind::integer,
          .default_value = std::to_string(default_value), .help = std::move(help), .min = min,
          .max = max, .value_name = "INT"};
}

flag_definition uint_list_flag(std::string name, std::string default_value, std::string help,
                               std::int64_t min, std::int64_t max) {
  return {.name = std::move(name), .kind = flag_kind::uint_list,
          .default_value = std::move(default_value), .help = std::move(help), .min = min,
          .max = max, .value_name = "LIST"};
}

flag_definition string_flag(std::string name, std::string default_value, std::string help,
                            std::string value_name) {
  return {.name = std::move(name), .kind = flag_kind::string,
          .default_value = std::move(default_value), .help = std::move(help),
          .value_name = std::move(value_name)};
}

flag_definition choice_flag(std::string name, std::string default_value,
                            std::vector<std::string> choices, std::string help) {
  return {.name = std::move(name), .kind = flag_kind::choice,
          .default_value = std::move(default_value), .help = std::move(help),
          .choices = std::move(choices), .value_name = "CHOICE"};
}

flag_definition choice_list_flag(std::string name, std::string default_value,
                                 std::vector<std::string> choices, std::string help) {
  return {.name = std::move(name), .kind = flag_kind::choice_list,
          .default_value = std::move(default_value), .help = std::move(help),
          .choices = std::move(choices), .value_name = "LIST"};
}

flag_definition bool_flag(std::string name, bool default_value, std::string help) {
  return {.name = std::move(name), .kind = flag_kind::boolean,
          .default_value = default_value ? "yes" : "no", .help = std::move(help),
          .value_name = "[yes|no]"};
}

// ---- flag_values ---------------------------------------------------------------------------

const flag_values::value& flag_values::get(std::string_view name) const {
  const auto it = m_values.find(name);
  if (it == m_values.end())
    throw std::logic_error("tessera-bench: flag --" + std::string(name) + " was never defined");
  return it->second;
}

template <class T>
static const T& expect(const flag_values::value& v, std::string_view name) {
  if (const T* p = std::get_if<T>(&v)) return *p;
  throw std::logic_error("tessera-bench: flag --" + std::string(name) +
                         " read with the accessor of another kind");
}

std::int64_t flag_values::integer(std::string_view name) const {
  return expect<std::int64_t>(get(name), name);
}
const std::vector<std::uint64_t>& flag_values::uint_list(std::string_view name) const {
  return expect<std::vector<std::uint64_t>>(get(name), name);
}
const std::string& flag_values::text(std::string_view name) const {
  return expect<std::string>(get(name), name);
}
const std::vector<std::string>& flag_values::list(std::string_view name) const {
  return expect<std::vector<std::string>>(get(name), name);
}
bool flag_values::boolean(std::string_view name) const { return expect<bool>(get(name), name); }
bool flag_values::given(std::string_view name) const {
  get(name);  // throws for an undefined flag
  const auto it = m_given.find(name);
  return it != m_given.end() && it->second;
}
void flag_values::set(const std::string& name, value v, bool given) {
  m_values[name] = std::move(v);
  m_given[name] = given;
}

// ---- the CLI11 options -----------------------------------------------------------------------

namespace {

/// Adds `defs` to `command` as options (a boolean also as a hidden `--no-name`) in the help
/// section `group`, and lets `command` keep words it does not know for read_flags() to report.
void declare_flags(CLI::App& command, std::span<const flag_definition> defs,
                   const std::string& group) {
  command.allow_extras();  // read_flags() reports them, naming the word
  for (const flag_definition& def : defs) {
    flag_values::value unused;
    if (!def.default_value.empty() || def.kind != flag_kind::string) {
      if (const std::string problem = parse_value(def, def.default_value, unused); !problem.empty())
        throw std::logic_error("tessera-bench: default of --" + def.name + ": " + problem);
    }
    // At most one value, and none if the next word is a flag (CLI11 records "" then).
    command.add_option("--" + def.name, CLI::callback_t{}, help_line(def))
        ->expected(0, 1)
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)
        ->option_text(def.value_name)
        ->group(group);
    if (def.kind == flag_kind::boolean) {
      // Alone; read_flags() refuses a value. Hidden from the help table, whose line of --name
      // names it.
      command.add_flag("--no-" + def.name)->group("");
    }
  }
}

flag_values read_flags(const CLI::App& command, std::span<const flag_definition> defs) {
  if (const std::vector<std::string> left = command.remaining(); !left.empty()) {
    const std::string& word = left.front();
    if (word.size() > 1 && word[0] == '-' && (word[1] < '0' || word[1] > '9'))
      throw usage_failure("tessera-bench: " + word.substr(0, word.find('=')) +
                          ": unknown flag (see --help)");
    throw usage_failure("tessera-bench: " + word + ": unexpected argument");
  }
  flag_values values;
  for (const flag_definition& def : defs) {
    const std::string flag = "--" + def.name;
    const CLI::Option* option = command.get_option(flag);
    const CLI::Option* negation =
        def.kind == flag_kind::boolean ? command.get_option("--no-" + def.name) : nullptr;
    // Every value given is checked, in order; the last one counts (for a boolean, of --name and
    // --no-name). CLI11 records "" for a flag given without a value and "true" for --no-name
    // alone.
    flag_values::value v = std::string();  // a string flag without default, not given
    if (!def.default_value.empty() || def.kind != flag_kind::string)
      (void)parse_value(def, def.default_value, v);  // checked by declare_flags()
    bool given = false;
    std::size_t next_result = 0;
    std::size_t next_negation = 0;
    for (const CLI::Option* o : command.parse_order()) {
      if (o == option) {
        if (const std::string problem = parse_value(def, option->results().at(next_result++), v);
            !problem.empty())
          throw usage_failure("tessera-bench: " + flag + ": " + problem);
        given = true;
      } else if (negation != nullptr && o == negation) {
        if (negation->results().at(next_negation++) != "true")
          throw usage_failure("tessera-bench: --no-" + def.name + ": takes no value (it means " +
                              flag + "=no)");
        v.emplace<bool>(false);
        given = true;
      }
    }
    values.set(def.name, std::move(v), given);
  }
  return values;
}

}  // namespace

// ---- the program's command line ---------------------------------------------------------------

struct command_line::impl {
  CLI::App app;
  /// Per subcommand, every flag it takes, in the order of its sections.
  std::map<std::string, std::vector<flag_definition>, std::less<>> flags;

  impl(const std::string& description, const std::string& program) : app{description, program} {
    app.require_subcommand(1);
  }
};

command_line::command_line(const std::string& description, const std::string& program)
    : m_impl(std::make_unique<impl>(description, program)) {}

command_line::~command_line() = default;

void command_line::add_subcommand(const std::string& name, const std::string& help,
                                  const std::string& footer,
                                  std::span<const flag_section> sections) {
  CLI::App* sub = m_impl->app.add_subcommand(name, help);
  if (!footer.empty()) sub->footer(footer);
  std::vector<flag_definition>& all = m_impl->flags[name];
  try {
    for (const flag_section& section : sections) {
      declare_flags(*sub, section.flags, section.title);
      all.insert(all.end(), section.flags.begin(), section.flags.end());
    }
  } catch (const CLI::OptionAlreadyAdded& e) {
    throw std::logic_error("tessera-bench: " + name + ": a flag defined twice: " + e.what());
  }
}

void command_line::set_footer(const std::string& footer) { m_impl->app.footer(footer); }

std::string command_line::help() const { return m_impl->app.help(); }

parsed_command command_line::parse(const std::vector<std::string>& words) {
  parsed_command out;
  std::vector<std::string> args(words.rbegin(), words.rend());  // CLI11 takes them from the back
  try {
    m_impl->app.parse(args);
  } catch (const CLI::CallForHelp&) {
    out.result = parse_result::help;
    out.text = m_impl->app.help();  // the subcommand's, if one was given
    return out;
  } catch (const CLI::ParseError& e) {  // values and unknown words are read_flags()'s to report
    out.text = "tessera-bench: " + std::string(e.what());
    return out;
  }
  const std::vector<CLI::App*> chosen = m_impl->app.get_subcommands();
  if (chosen.size() != 1) {  // require_subcommand(1) lets nothing else through
    out.text = "tessera-bench: expected one subcommand (see --help)";
    return out;
  }
  out.subcommand = chosen.front()->get_name();
  try {
    out.values = read_flags(*chosen.front(), m_impl->flags.at(out.subcommand));
  } catch (const usage_failure& e) {
    out.text = e.what();
    return out;
  }
  out.result = parse_result::run;
  return out;
}

}  // namespace tessera::bench
