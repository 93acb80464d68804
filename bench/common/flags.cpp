#include "common/flags.h"

#include <algorithm>
#include <charconv>
#include <stdexcept>
#include <system_error>
#include <utility>

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

/// Parses `text` as a value of `def`; on failure returns false and sets `problem`.
bool parse_value(const flag_definition& def, std::string_view text, flag_values::value& out,
                 std::string& problem) {
  switch (def.kind) {
    case flag_kind::integer: {
      std::int64_t v = 0;
      const integer_outcome r = parse_integer(text, v);
      const std::string range = range_text(def);
      if (r == integer_outcome::not_a_number) {
        problem =
            "expected an integer" + (range.empty() ? "" : " " + range) + ", got " + quoted(text);
        return false;
      }
      if (r == integer_outcome::out_of_range) {
        problem = "beyond a 64-bit integer" + (range.empty() ? "" : " (must be " + range + ")") +
                  ", got " + quoted(text);
        return false;
      }
      if (v < def.min || v > def.max) {
        problem = "must be " + range + ", got " + quoted(text);
        return false;
      }
      out = v;
      return true;
    }
    case flag_kind::uint_list: {
      std::vector<std::uint64_t> values;
      const std::string expected = "expected a comma-separated list of integers " +
                                   range_text(def) + ", got " + quoted(text);
      for (std::string_view part : split(text, ',')) {
        std::int64_t v = 0;
        const bool digits_only = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) {
          return c >= '0' && c <= '9';
        });
        if (!digits_only || parse_integer(part, v) != integer_outcome::ok || v < def.min ||
            v > def.max) {
          problem = expected;
          return false;
        }
        if (std::find(values.begin(), values.end(), static_cast<std::uint64_t>(v)) !=
            values.end()) {
          // A repeated value would be measured twice, and its ratios taken against the first
          // row of the reference with that value.
          problem = std::string(part) + " is given twice in " + quoted(text);
          return false;
        }
        values.push_back(static_cast<std::uint64_t>(v));
      }
      out = std::move(values);
      return true;
    }
    case flag_kind::string:
      if (text.empty()) {
        problem = "expected a non-empty value";
        return false;
      }
      out = std::string(text);
      return true;
    case flag_kind::choice:
      if (std::find(def.choices.begin(), def.choices.end(), text) == def.choices.end()) {
        problem = "expected one of " + joined(def.choices, ",") + ", got " + quoted(text);
        return false;
      }
      out = std::string(text);
      return true;
    case flag_kind::choice_list: {
      std::vector<bool> chosen(def.choices.size(), false);
      for (std::string_view part : split(text, ',')) {
        if (part == "all") {
          std::fill(chosen.begin(), chosen.end(), true);
          continue;
        }
        const auto it = std::find(def.choices.begin(), def.choices.end(), part);
        if (it == def.choices.end()) {
          problem = "expected a comma-separated list of " + joined(def.choices, ",") +
                    " (or all), got " + quoted(text);
          return false;
        }
        chosen[static_cast<std::size_t>(it - def.choices.begin())] = true;
      }
      std::vector<std::string> values;
      for (std::size_t i = 0; i < chosen.size(); ++i)
        if (chosen[i]) values.push_back(def.choices[i]);
      out = std::move(values);
      return true;
    }
    case flag_kind::boolean:
      if (text != "yes" && text != "no") {
        problem = "expected yes or no, got " + quoted(text);
        return false;
      }
      out.emplace<bool>(text == "yes");
      return true;
  }
  problem = "unknown flag kind";
  return false;
}

std::string default_value_name(flag_kind kind) {
  switch (kind) {
    case flag_kind::integer: return "INT";
    case flag_kind::uint_list: return "LIST";
    case flag_kind::string: return "TEXT";
    case flag_kind::choice: return "CHOICE";
    case flag_kind::choice_list: return "LIST";
    case flag_kind::boolean: return "";
  }
  return "VALUE";
}

}  // namespace

flag_definition int_flag(std::string name, std::int64_t default_value, std::string help,
                         std::int64_t min, std::int64_t max) {
  flag_definition def;
  def.name = std::move(name);
  def.kind = flag_kind::integer;
  def.default_value = std::to_string(default_value);
  def.help = std::move(help);
  def.min = min;
  def.max = max;
  def.value_name = "INT";
  return def;
}

flag_definition uint_list_flag(std::string name, std::string default_value, std::string help,
                               std::int64_t min, std::int64_t max) {
  flag_definition def;
  def.name = std::move(name);
  def.kind = flag_kind::uint_list;
  def.default_value = std::move(default_value);
  def.help = std::move(help);
  def.min = min;
  def.max = max;
  def.value_name = "LIST";
  return def;
}

flag_definition string_flag(std::string name, std::string default_value, std::string help,
                            std::string value_name) {
  flag_definition def;
  def.name = std::move(name);
  def.kind = flag_kind::string;
  def.default_value = std::move(default_value);
  def.help = std::move(help);
  def.value_name = std::move(value_name);
  return def;
}

flag_definition choice_flag(std::string name, std::string default_value,
                            std::vector<std::string> choices, std::string help) {
  flag_definition def;
  def.name = std::move(name);
  def.kind = flag_kind::choice;
  def.default_value = std::move(default_value);
  def.help = std::move(help);
  def.choices = std::move(choices);
  def.value_name = "CHOICE";
  return def;
}

flag_definition choice_list_flag(std::string name, std::string default_value,
                                 std::vector<std::string> choices, std::string help) {
  flag_definition def;
  def.name = std::move(name);
  def.kind = flag_kind::choice_list;
  def.default_value = std::move(default_value);
  def.help = std::move(help);
  def.choices = std::move(choices);
  def.value_name = "LIST";
  return def;
}

flag_definition bool_flag(std::string name, bool default_value, std::string help) {
  flag_definition def;
  def.name = std::move(name);
  def.kind = flag_kind::boolean;
  def.default_value = default_value ? "yes" : "no";
  def.help = std::move(help);
  return def;
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

// ---- parsing -------------------------------------------------------------------------------

parse_result parse_flags(std::span<const flag_definition> defs,
                         std::span<const std::string_view> args) {
  parse_result result;
  for (const auto& def : defs) {
    flag_values::value v;
    if (def.default_value.empty() && def.kind == flag_kind::string) {
      v = std::string();
    } else {
      std::string problem;
      if (!parse_value(def, def.default_value, v, problem))
        throw std::logic_error("tessera-bench: default of --" + def.name + ": " + problem);
    }
    result.values.set(def.name, std::move(v), false);
  }

  auto fail = [&](std::string_view flag, const std::string& what) {
    result.status = parse_status::error;
    result.error = "tessera-bench: " + std::string(flag) + ": " + what;
    return result;
  };

  std::string bare_boolean;  // the previous argument, if it was a boolean flag without a value
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string_view arg = args[i];
    if (arg == "--help" || arg == "-h") {
      result.status = parse_status::help;
      return result;
    }
    if (arg.size() < 3 || !arg.starts_with("--")) {
      if (!bare_boolean.empty())
        return fail(arg, "unexpected argument (" + bare_boolean +
                             " takes yes or no, or no value: " + bare_boolean + ", --no-" +
                             bare_boolean.substr(2) + ")");
      return fail(arg, "unexpected argument");
    }
    bare_boolean.clear();

    std::string_view name = arg.substr(2);
    std::string_view text;
    bool has_value = false;
    if (const std::size_t eq = name.find('='); eq != std::string_view::npos) {
      text = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    const std::string flag = "--" + std::string(name);
    auto def = std::find_if(defs.begin(), defs.end(),
                            [&](const flag_definition& d) { return d.name == name; });
    if (def == defs.end() && name.starts_with("no-")) {
      // `--no-name`: a boolean flag set to no.
      def = std::find_if(defs.begin(), defs.end(), [&](const flag_definition& d) {
        return d.kind == flag_kind::boolean && d.name == name.substr(3);
      });
      if (def != defs.end()) {
        if (has_value) return fail(flag, "takes no value (it means --" + def->name + "=no)");
        result.values.set(def->name, flag_values::value(std::in_place_type<bool>, false), true);
        continue;
      }
    }
    if (def == defs.end()) return fail(flag, "unknown flag (see --help)");
    if (!has_value && def->kind == flag_kind::boolean) {
      // `--name` alone is yes; a following yes/no is its value (positional words are errors).
      text = "yes";
      if (i + 1 < args.size() && (args[i + 1] == "yes" || args[i + 1] == "no")) {
        text = args[++i];
      } else {
        bare_boolean = flag;
      }
      has_value = true;
    }
    if (!has_value) {
      if (i + 1 >= args.size() || args[i + 1].starts_with("--")) return fail(flag, "missing value");
      text = args[++i];
    }
    flag_values::value v;
    std::string problem;
    if (!parse_value(*def, text, v, problem)) return fail(flag, problem);
    result.values.set(def->name, std::move(v), true);
  }
  return result;
}

std::string flags_help(std::span<const flag_definition> defs) {
  std::vector<std::string> heads;
  std::size_t width = 0;
  for (const auto& def : defs) {
    if (def.kind == flag_kind::boolean) {
      heads.push_back("--[no-]" + def.name);
    } else {
      heads.push_back("--" + def.name + " " +
                      (def.value_name.empty() ? default_value_name(def.kind) : def.value_name));
    }
    width = std::max(width, heads.back().size());
  }
  std::string out;
  for (std::size_t i = 0; i < defs.size(); ++i) {
    const auto& def = defs[i];
    out += "  " + heads[i] + std::string(width - heads[i].size() + 3, ' ') + def.help;
    std::string notes;
    if (def.kind == flag_kind::choice) notes = "one of: " + joined(def.choices, ", ");
    if (def.kind == flag_kind::choice_list) notes = "any of: " + joined(def.choices, ", ");
    const std::string range = range_text(def);
    if ((def.kind == flag_kind::integer || def.kind == flag_kind::uint_list) && !range.empty())
      notes = (def.kind == flag_kind::uint_list ? "each " : "") + range;
    if (!notes.empty()) notes += "; ";
    notes += "default: " + (def.default_value.empty() ? std::string("none") : def.default_value);
    out += " (" + notes + ")\n";
  }
  return out;
}

}  // namespace tessera::bench
