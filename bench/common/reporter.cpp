#include "common/reporter.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <stdexcept>

namespace tessera::bench {

namespace {

constexpr std::string_view reserved_keys[] = {
    "benchmark",      "implementation", "workers",     "ops",         "seconds",
    "ops_per_second", "ns_per_op",      "seconds_min", "seconds_max", "runs",
    "statistic",      "reference",      "ratio",       "note",        "remark"};

std::string format(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

std::string json_number(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[64];
  const auto [ptr, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return ec == std::errc{} ? std::string(buf, ptr) : "null";
}

std::string cell_text(const cell& c) {
  if (const auto* i = std::get_if<std::int64_t>(&c)) return std::to_string(*i);
  if (const auto* d = std::get_if<double>(&c)) return format("%g", *d);
  return std::get<std::string>(c);
}

std::string cell_json(const cell& c) {
  if (const auto* i = std::get_if<std::int64_t>(&c)) return std::to_string(*i);
  if (const auto* d = std::get_if<double>(&c)) return json_number(*d);
  return json_string(std::get<std::string>(c));
}

/// 12.3M, 812.0k, 2.10G: three significant digits are all a benchmark table can claim.
std::string human(double v) {
  if (!std::isfinite(v)) return "-";
  if (v >= 1e9) return format("%.2fG", v / 1e9);
  if (v >= 1e6) return format("%.2fM", v / 1e6);
  if (v >= 1e3) return format("%.1fk", v / 1e3);
  return format("%.0f", v);
}

const cell* find_extra(const row& r, std::string_view key) {
  for (const auto& [k, v] : r.extra)
    if (k == key) return &v;
  return nullptr;
}

}  // namespace

// ---- row -----------------------------------------------------------------------------------

row::row(std::string benchmark_name, std::string implementation_name, unsigned worker_count,
         measurement m)
    : benchmark(std::move(benchmark_name)),
      implementation(std::move(implementation_name)),
      workers(worker_count),
      result(m) {}

row row::skipped(std::string benchmark_name, std::string implementation_name, unsigned worker_count,
                 std::string why) {
  row r(std::move(benchmark_name), std::move(implementation_name), worker_count, measurement{});
  r.note = why.empty() ? std::string("skipped") : std::move(why);
  return r;
}

row& row::with(std::string key, cell value) & {
  if (std::find(std::begin(reserved_keys), std::end(reserved_keys), key) !=
          std::end(reserved_keys) ||
      find_extra(*this, key) != nullptr)
    throw std::logic_error("tessera-bench: extra column '" + key + "' repeats or is reserved");
  extra.emplace_back(std::move(key), std::move(value));
  return *this;
}

double row::ops_per_second() const noexcept {
  return result.seconds > 0 ? static_cast<double>(result.ops) / result.seconds : 0.0;
}

double row::ns_per_op() const noexcept {
  return result.ops > 0 ? result.seconds * workers * 1e9 / static_cast<double>(result.ops) : 0.0;
}

// ---- reporter ------------------------------------------------------------------------------

const row* reporter::reference_for(const row& r) const noexcept {
  if (m_reference.empty()) return nullptr;
  for (const auto& candidate : m_rows) {
    if (!candidate.measured() || candidate.implementation != m_reference ||
        candidate.benchmark != r.benchmark || candidate.workers != r.workers ||
        candidate.extra.size() != r.extra.size())
      continue;
    bool same = true;
    for (const auto& [key, value] : r.extra) {
      const cell* other = find_extra(candidate, key);
      same = same && other != nullptr && *other == value;
    }
    if (same) return &candidate;
  }
  return nullptr;
}

std::string reporter::table() const {
  if (m_rows.empty()) return "";
  std::vector<std::string> extra_keys;
  for (const auto& r : m_rows)
    for (const auto& [key, value] : r.extra)
      if (std::find(extra_keys.begin(), extra_keys.end(), key) == extra_keys.end())
        extra_keys.push_back(key);

  std::vector<std::string> header{"benchmark", "implementation"};
  header.insert(header.end(), extra_keys.begin(), extra_keys.end());
  const std::size_t first_number = header.size();
  for (const char* h : {"workers", "ops", "seconds", "ns/op", "ops/s", "ops/s/worker"})
    header.emplace_back(h);
  if (!m_reference.empty()) header.push_back("vs " + m_reference);
  const std::size_t note_column = header.size();
  header.emplace_back("note");

  std::vector<std::vector<std::string>> lines{header};
  unsigned runs = 0;
  for (const auto& r : m_rows) {
    std::vector<std::string> line{r.benchmark, r.implementation};
    for (const auto& key : extra_keys) {
      const cell* c = find_extra(r, key);
      line.push_back(c ? cell_text(*c) : "-");
    }
    line.push_back(std::to_string(r.workers));
    if (r.measured()) {
      runs = std::max(runs, r.result.runs);
      line.push_back(std::to_string(r.result.ops));
      line.push_back(format(r.result.seconds >= 0.1 ? "%.3f" : "%.3g", r.result.seconds));
      line.push_back(format("%.1f", r.ns_per_op()));
      line.push_back(human(r.ops_per_second()));
      line.push_back(human(r.ops_per_second() / r.workers));
      if (!m_reference.empty()) {
        const row* ref = reference_for(r);
        line.push_back(ref && ref->ops_per_second() > 0
                           ? format("%.2fx", r.ops_per_second() / ref->ops_per_second())
                           : "-");
      }
    } else {
      for (int i = 0; i < 5; ++i) line.emplace_back("-");
      if (!m_reference.empty()) line.emplace_back("-");
    }
    line.push_back(r.measured() ? r.remark : r.note);
    lines.push_back(std::move(line));
  }

  std::vector<std::size_t> width(header.size(), 0);
  for (const auto& line : lines)
    for (std::size_t i = 0; i < line.size(); ++i) width[i] = std::max(width[i], line[i].size());
  std::string out;
  for (const auto& line : lines) {
    std::string text;
    for (std::size_t i = 0; i < line.size(); ++i) {
      if (i == note_column) {
        if (!line[i].empty()) text += "  " + line[i];
        continue;
      }
      const std::string pad(width[i] - line[i].size(), ' ');
      if (i > 0) text += "  ";
      text += i >= first_number ? pad + line[i] : line[i] + pad;
    }
    while (!text.empty() && text.back() == ' ') text.pop_back();
    out += text + "\n";
  }
  out += "seconds: ";
  out += to_string(reported_statistic());
  out += " of " + std::to_string(runs) +
         " run(s); ns/op: seconds x workers / ops (worker-time per operation)";
  const bool reference_ran =
      std::any_of(m_rows.begin(), m_rows.end(),
                  [this](const row& r) { return r.measured() && r.implementation == m_reference; });
  if (reference_ran)
    out += ";\nvs " + m_reference + ": ops/s over " + m_reference +
           "'s ops/s at the same workers and parameters";
  else if (!m_reference.empty())
    out += ";\nvs " + m_reference + ": " + m_reference + " was not run";
  out += "\n";
  return out;
}

std::string reporter::to_json(const row& r, const row* reference, std::string_view reference_name) {
  std::string out = "{\"benchmark\":" + json_string(r.benchmark) +
                    ",\"implementation\":" + json_string(r.implementation) +
                    ",\"workers\":" + std::to_string(r.workers) +
                    ",\"ops\":" + std::to_string(r.result.ops) +
                    ",\"seconds\":" + json_number(r.result.seconds) +
                    ",\"ops_per_second\":" + json_number(r.ops_per_second()) +
                    ",\"ns_per_op\":" + json_number(r.ns_per_op()) +
                    ",\"statistic\":" + json_string(to_string(reported_statistic())) +
                    ",\"runs\":" + std::to_string(r.result.runs) +
                    ",\"seconds_min\":" + json_number(r.result.min_seconds) +
                    ",\"seconds_max\":" + json_number(r.result.max_seconds);
  for (const auto& [key, value] : r.extra) {
    out += ',';
    out += json_string(key);
    out += ':';
    out += cell_json(value);
  }
  if (!r.remark.empty()) out += ",\"remark\":" + json_string(r.remark);
  if (reference != nullptr && reference->ops_per_second() > 0) {
    out += ",\"reference\":" + json_string(reference_name) +
           ",\"ratio\":" + json_number(r.ops_per_second() / reference->ops_per_second());
  }
  out += "}";
  return out;
}

void reporter::write_json(std::FILE* out) const {
  for (const auto& r : m_rows) {
    if (!r.measured()) continue;
    const std::string line = to_json(r, reference_for(r), m_reference) + "\n";
    std::fwrite(line.data(), 1, line.size(), out);
  }
  std::fflush(out);
}

std::string json_string(std::string_view text) {
  std::string out = "\"";
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += ch;
        }
    }
  }
  return out + "\"";
}

}  // namespace tessera::bench
