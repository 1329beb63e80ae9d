#include "report/report_tables.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>

#include "engine/core/error.h"
#include "report/html_text.h"
#include "report/svg_chart.h"

namespace loft::report {

using nlohmann::json;

namespace {

const char* kNone = "—";

// One row from a per-run cell function; a row every run lacks is left out.
void add_row(std::vector<Row>& rows, const std::vector<RunData>& runs, const std::string& label,
             const std::function<std::string(const RunData&)>& cell) {
  Row r{label, {}};
  bool any = false;
  for (const auto& run : runs) {
    std::string c = cell(run);
    any |= !c.empty();
    r.cells.push_back(c.empty() ? kNone : c);
  }
  if (any) rows.push_back(std::move(r));
}

std::string json_text(const json& v) {
  if (v.is_null()) return "";
  if (v.is_string()) return html_escape(v.get<std::string>());
  if (v.is_number_float()) return short_number(v.get<double>(), 4);
  if (v.is_array()) {
    std::string s;
    for (const auto& e : v) s += (s.empty() ? "" : ", ") + json_text(e);
    return s;
  }
  return html_escape(v.dump());
}

std::string field(const RunData& r, const char* key) {
  return r.run_config.is_object() && r.run_config.contains(key) ? json_text(r.run_config[key]) : "";
}

std::string fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

// Counts in full with thousands separators (29,022), other numbers compactly.
std::string int_text(const json& v) {
  if (!v.is_number_integer()) return v.is_number() ? short_number(v.get<double>(), 6) : "";
  const std::string digits = std::to_string(v.get<int64_t>());
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && digits[i] != '-' && digits[i - 1] != '-' && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string median_tokens_per_s(const RunData& r) {
  std::vector<double> v;
  for (const auto& p : r.metrics) v.push_back(p.tokens_per_s);
  if (v.empty()) return "";
  std::nth_element(v.begin(), v.begin() + long(v.size() / 2), v.end());
  return short_number(v[v.size() / 2]);
}

std::string val_loss(const RunData& r, bool best) {
  const MetricPoint* pick = nullptr;
  for (const auto& p : r.metrics)
    if (p.val_loss && (!pick || !best || *p.val_loss < *pick->val_loss)) pick = &p;
  if (!pick) return "";
  return fixed(*pick->val_loss, 4) + " <span class=\"muted\">(step " + std::to_string(pick->step) + ")</span>";
}

// "0.2500 (1/4)" for an accuracy group of an evaluate report.
std::string group_text(const json& g) {
  std::string s = g["acc"].is_number() ? fixed(g["acc"].get<double>(), 4) : "";
  if (g.contains("correct") && g.contains("questions"))
    s += " <span class=\"muted\">(" + int_text(g["correct"]) + "/" + int_text(g["questions"]) + ")</span>";
  return s;
}

bool is_group(const json& j) { return j.is_object() && j.contains("acc") && j.contains("questions"); }

// Numeric leaves of a report's metrics as (path, text); accuracy groups as one cell each.
void flatten_metrics(const json& m, const std::string& path, std::vector<std::pair<std::string, std::string>>& out) {
  if (is_group(m)) {
    out.emplace_back(path, group_text(m));
    return;
  }
  if (m.is_number()) {
    out.emplace_back(path, m.is_number_float() ? fixed(m.get<double>(), 4) : int_text(m));
    return;
  }
  if (!m.is_object()) return;
  for (const auto& [k, v] : m.items()) flatten_metrics(v, path.empty() ? k : path + " · " + k, out);
}

std::string task_label(const json& report) {
  std::string s = report.value("task", std::string("?"));
  const json& p = report.contains("protocol") ? report["protocol"] : json();
  if (p.is_object() && p.contains("shots") && p["shots"].is_number()) s += cat(" ", int_text(p["shots"]), "-shot");
  if (p.is_object() && p.contains("limit") && p["limit"].is_number()) s += cat(", limit ", int_text(p["limit"]));
  return s;
}

}  // namespace

std::vector<Row> summary_rows(const std::vector<RunData>& runs) {
  std::vector<Row> rows;
  add_row(rows, runs, "model", [](const RunData& r) { return field(r, "model"); });
  add_row(rows, runs, "method", [](const RunData& r) { return field(r, "method"); });
  add_row(rows, runs, "steps", [](const RunData& r) {
    return r.metrics.empty() ? std::string() : std::to_string(r.metrics.back().step);
  });
  add_row(rows, runs, "batch × seq", [](const RunData& r) {
    const std::string b = field(r, "batch"), s = field(r, "seq");
    return b.empty() ? b : b + " × " + s;
  });
  add_row(rows, runs, "learning rate", [](const RunData& r) {
    const std::string lr = field(r, "lr");
    return lr.empty() ? lr : lr + " " + field(r, "schedule") + ", warmup " + field(r, "warmup");
  });
  add_row(rows, runs, "final training loss (smoothed)", [](const RunData& r) {
    Points p;
    for (const auto& m : r.metrics) p.emplace_back(double(m.step), m.loss);
    const Points s = ema_smooth(p);
    return s.empty() ? std::string() : fixed(s.back().second, 4);
  });
  add_row(rows, runs, "final validation loss", [](const RunData& r) { return val_loss(r, false); });
  add_row(rows, runs, "best validation loss", [](const RunData& r) { return val_loss(r, true); });
  add_row(rows, runs, "tokens/s (median step)", median_tokens_per_s);
  add_row(rows, runs, "peak memory", [](const RunData& r) {
    double peak = -1;
    for (const auto& p : r.metrics)
      if (p.peak_memory) peak = std::max(peak, *p.peak_memory);
    return peak < 0 ? std::string() : bytes_text(peak);
  });
  add_row(rows, runs, "training time", [](const RunData& r) {
    double s = 0;
    for (const auto& p : r.metrics) s += p.seconds;
    return s > 0 ? fixed(s, 1) + " s" : std::string();
  });
  add_row(rows, runs, "device", [](const RunData& r) { return field(r, "device"); });
  return rows;
}

std::vector<Row> method_rows(const std::vector<RunData>& runs) {
  std::vector<Row> rows;
  add_row(rows, runs, "method", [](const RunData& r) { return field(r, "method"); });
  add_row(rows, runs, "rank r", [](const RunData& r) { return field(r, "rank"); });
  add_row(rows, runs, "alpha", [](const RunData& r) { return field(r, "alpha"); });
  add_row(rows, runs, "targets", [](const RunData& r) { return field(r, "targets"); });
  add_row(rows, runs, "chat template", [](const RunData& r) { return field(r, "chat_template"); });
  // The method's own options (HALO's level and format, FALQON's top-k, ...), whatever it records.
  // Keys are looked up as they are: a JSON pointer built from them would misread '~' and '/'.
  using Key = std::pair<std::string, std::string>;  // (method, option)
  const auto record = [](const RunData& r) -> const json* {
    if (!r.run_config.is_object()) return nullptr;
    const auto it = r.run_config.find("method_record");
    return it != r.run_config.end() && it->is_object() ? &*it : nullptr;
  };
  std::vector<Key> keys;
  for (const auto& r : runs)
    if (const json* m = record(r))
      for (const auto& [k, v] : m->items())
        if (v.is_object())
          for (const auto& [k2, v2] : v.items())
            if (std::find(keys.begin(), keys.end(), Key{k, k2}) == keys.end()) keys.emplace_back(k, k2);
  for (const auto& key : keys)
    add_row(rows, runs, key.first + "." + key.second, [&key, &record](const RunData& r) {
      const json* m = record(r);
      if (!m || !m->contains(key.first) || !(*m)[key.first].is_object()) return std::string();
      const json& options = (*m)[key.first];
      return options.contains(key.second) ? json_text(options[key.second]) : std::string();
    });
  return rows;
}

std::vector<Row> data_rows(const std::vector<RunData>& runs) {
  std::vector<Row> rows;
  const auto stat = [](const char* key) {
    return [key](const RunData& r) {
      return r.data_stats.is_object() && r.data_stats.contains(key) ? int_text(r.data_stats[key]) : std::string();
    };
  };
  add_row(rows, runs, "examples trained", stat("examples"));
  add_row(rows, runs, "trained tokens (targets)", stat("trained_tokens"));
  add_row(rows, runs, "masked tokens (prompts, context)", stat("masked_tokens"));
  add_row(rows, runs, "trained share", [](const RunData& r) {
    const json& d = r.data_stats;
    if (!d.is_object() || !d.contains("trained_tokens") || !d.contains("masked_tokens") ||
        !d["trained_tokens"].is_number() || !d["masked_tokens"].is_number())
      return std::string();
    const double t = d["trained_tokens"].get<double>(), m = d["masked_tokens"].get<double>();
    return t + m > 0 ? fixed(100 * t / (t + m), 1) + "%" : std::string();
  });
  add_row(rows, runs, "examples truncated to seq", stat("truncated"));
  add_row(rows, runs, "examples dropped (nothing left to train)", stat("dropped_untrained"));
  add_row(rows, runs, "bad records skipped", stat("skipped_bad"));
  add_row(rows, runs, "micro-batches", stat("batches"));
  return rows;
}

std::vector<Row> eval_rows(const std::vector<RunData>& runs) {
  // (row label) -> cell per run, in first-seen order.
  std::vector<std::string> order;
  std::map<std::string, std::vector<std::string>> cells;
  for (size_t i = 0; i < runs.size(); ++i)
    for (const auto& e : runs[i].evals) {
      std::vector<std::pair<std::string, std::string>> flat;
      json metrics = e.json["metrics"];
      if (is_group(metrics)) {  // MMLU: the overall group first, subjects are too many for a table
        flat.emplace_back("acc", group_text(metrics));
        for (const char* k : {"acc", "correct", "questions", "subjects"}) metrics.erase(k);
      }
      if (metrics.is_object() && metrics.contains("exact_match")) metrics.erase("correct");  // GSM8K: the rates say it
      flatten_metrics(metrics, "", flat);
      for (const auto& [path, text] : flat) {
        const std::string label = task_label(e.json) + " · " + path;
        if (!cells.count(label)) order.push_back(label), cells[label].assign(runs.size(), kNone);
        cells[label][i] = text;
      }
    }
  std::vector<Row> rows;
  for (const auto& l : order) rows.push_back({l, cells[l]});
  return rows;
}

std::string html_table(const std::vector<RunData>& runs, const std::vector<Row>& rows) {
  if (rows.empty()) return "";
  std::string h = "<table><thead><tr><th></th>";
  for (const auto& r : runs) h += "<th>" + html_escape(r.name) + "</th>";
  h += "</tr></thead><tbody>";
  for (const auto& row : rows) {
    h += "<tr><th>" + html_escape(row.label) + "</th>";
    for (const auto& c : row.cells) h += "<td>" + c + "</td>";
    h += "</tr>";
  }
  return h + "</tbody></table>";
}

}  // namespace loft::report
