#include "report/html_report.h"

#include <iostream>

#include "engine/core/error.h"
#include "engine/io/atomic_file.h"
#include "report/html_text.h"
#include "report/report_tables.h"
#include "report/svg_chart.h"

namespace loft::report {

namespace fs = std::filesystem;

namespace {

// Series colours (s0..s7) for each theme; text and grid colours from the theme too.
constexpr const char* kCss = R"CSS(
:root{color-scheme:light dark;--bg:#ffffff;--fg:#1d2026;--muted:#687080;--grid:#e3e6eb;--card:#f6f7f9;--border:#d7dbe1;
--c0:#1f6fd1;--c1:#e0620d;--c2:#2a9d3a;--c3:#c8304b;--c4:#7b52c7;--c5:#8c5a2b;--c6:#d048a4;--c7:#5f6b7a}
@media (prefers-color-scheme: dark){:root{--bg:#15171c;--fg:#e3e6eb;--muted:#9aa3b2;--grid:#2b3039;--card:#1c1f26;--border:#333945;
--c0:#6aa9ff;--c1:#ff9d57;--c2:#63d475;--c3:#ff6f86;--c4:#b494ff;--c5:#d7a36f;--c6:#ff8bd8;--c7:#aab4c3}}
body{margin:0 auto;max-width:1280px;padding:24px;background:var(--bg);color:var(--fg);font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 10px;border-bottom:1px solid var(--border);padding-bottom:4px}
.muted{color:var(--muted)}.sub{color:var(--muted);margin:0}
.charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(420px,1fr));gap:14px}
.card{background:var(--card);border:1px solid var(--border);border-radius:8px;padding:6px}
svg.chart{width:100%;height:auto;display:block}
.ctitle{font-size:14px;font-weight:600;fill:var(--fg)}.axis{font-size:11px;fill:var(--muted)}
.grid{stroke:var(--grid);stroke-width:1}.frame{fill:none;stroke:var(--border)}
.line{fill:none;stroke:var(--c);stroke-width:2;stroke-linejoin:round}.faint{opacity:.28;stroke-width:1.2}
.dashed{stroke-dasharray:6 4}.dot{fill:var(--c)}
.s0{--c:var(--c0)}.s1{--c:var(--c1)}.s2{--c:var(--c2)}.s3{--c:var(--c3)}.s4{--c:var(--c4)}.s5{--c:var(--c5)}.s6{--c:var(--c6)}.s7{--c:var(--c7)}
.legend{display:flex;flex-wrap:wrap;gap:6px 18px;margin:0 0 10px}.sw{display:inline-block;width:22px;height:0;border-top:3px solid var(--c);vertical-align:middle;margin-right:6px}
.sw.dashed{border-top-style:dashed}.sw.faint{opacity:.35}
table{border-collapse:collapse;margin:4px 0 8px;font-variant-numeric:tabular-nums}
th,td{border:1px solid var(--border);padding:4px 10px;text-align:left;vertical-align:top}
thead th{background:var(--card)}tbody th{font-weight:500;color:var(--muted)}
pre{background:var(--card);border:1px solid var(--border);border-radius:6px;padding:10px;overflow:auto;font-size:12.5px}
details{margin:6px 0}summary{cursor:pointer;font-weight:600}
footer{margin-top:32px;color:var(--muted);font-size:12px}
)CSS";

using Get = double (*)(const MetricPoint&);

Points series_of(const RunData& r, Get get) {
  Points p;
  for (const auto& m : r.metrics) p.emplace_back(double(m.step), get(m));
  return p;
}

// One chart per quantity; with one run the raw curve lies faint under its smoothed one.
std::string quantity_chart(const std::vector<RunData>& runs, const std::string& title, Get get, bool smooth) {
  Chart c{title, {}};
  for (size_t i = 0; i < runs.size(); ++i) {
    const Points raw = series_of(runs[i], get);
    if (smooth) {
      c.series.push_back({runs[i].name + " raw", raw, int(i), true});
      c.series.push_back({runs[i].name + " smoothed", ema_smooth(raw), int(i)});
    } else {
      c.series.push_back({runs[i].name, raw, int(i)});
    }
  }
  return svg_line_chart(c);
}

std::string loss_chart(const std::vector<RunData>& runs) {
  Chart c{"Loss: training (smoothed, raw faint) and validation (dashed)", {}};
  for (size_t i = 0; i < runs.size(); ++i) {
    const Points raw = series_of(runs[i], [](const MetricPoint& m) { return m.loss; });
    Points val;
    for (const auto& m : runs[i].metrics)
      if (m.val_loss) val.emplace_back(double(m.step), *m.val_loss);
    c.series.push_back({runs[i].name + " training raw", raw, int(i), true});
    c.series.push_back({runs[i].name + " training smoothed", ema_smooth(raw), int(i)});
    if (!val.empty()) c.series.push_back({runs[i].name + " validation", val, int(i), false, true, true});
  }
  return svg_line_chart(c);
}

std::string memory_chart(const std::vector<RunData>& runs) {
  Chart c{"Peak memory (MiB)", {}};
  for (size_t i = 0; i < runs.size(); ++i) {
    Points p;
    for (const auto& m : runs[i].metrics)
      if (m.peak_memory) p.emplace_back(double(m.step), *m.peak_memory / double(1 << 20));
    c.series.push_back({runs[i].name, p, int(i)});
  }
  return svg_line_chart(c);
}

std::string legend(const std::vector<RunData>& runs) {
  std::string h = "<div class=\"legend\">";
  for (size_t i = 0; i < runs.size(); ++i)
    h += "<span class=\"s" + std::to_string(i % 8) + "\"><span class=\"sw\"></span>" + html_escape(runs[i].name) + "</span>";
  h += "<span class=\"s7 muted\"><span class=\"sw faint\"></span>raw</span>";
  h += "<span class=\"s7 muted\"><span class=\"sw dashed\"></span>validation</span></div>";
  return h;
}

std::string section(const std::string& title, const std::string& body) {
  return body.empty() ? "" : "<section><h2>" + title + "</h2>" + body + "</section>";
}

std::string configurations(const std::vector<RunData>& runs) {
  std::string h;
  for (const auto& r : runs) {
    const bool yaml = !r.config_yaml.empty();
    if (!yaml && r.run_config.is_null()) continue;
    h += "<details" + std::string(runs.size() == 1 ? " open" : "") + "><summary>" + html_escape(r.name) + ": " +
         (yaml ? "config.yaml" : "run_config.json") + "</summary><pre>" +
         html_escape(yaml ? r.config_yaml : r.run_config.dump(2)) + "</pre></details>";
  }
  return h;
}

}  // namespace

std::string render_report(const std::vector<RunData>& runs) {
  std::string names;
  for (const auto& r : runs) names += (names.empty() ? "" : ", ") + r.name;
  std::string h = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">" +
                  std::string(kGeneratorMeta) + " " + LOFT_VERSION + "\">"
                  "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">"
                  "<title>loft report: " + html_escape(names) + "</title><style>" + kCss + "</style></head><body>";
  h += "<header><h1>loft run report</h1><p class=\"sub\">" + std::string(runs.size() == 1 ? "run " : "runs ") +
       html_escape(names) + "</p></header>";
  h += section("Summary", html_table(runs, summary_rows(runs)));
  std::string charts = "<div class=\"charts\">";
  for (const std::string& svg :
       {loss_chart(runs),
        quantity_chart(runs, "Learning rate", [](const MetricPoint& m) { return m.lr; }, false),
        quantity_chart(runs, "Gradient norm (before clipping)", [](const MetricPoint& m) { return m.grad_norm; }, true),
        quantity_chart(runs, "Tokens/s", [](const MetricPoint& m) { return m.tokens_per_s; }, true),
        memory_chart(runs)})
    charts += "<div class=\"card\">" + svg + "</div>";
  h += section("Curves", legend(runs) + charts + "</div>");
  h += section("Evaluation", html_table(runs, eval_rows(runs)));
  h += section("Method", html_table(runs, method_rows(runs)));
  h += section("Data", html_table(runs, data_rows(runs)));
  h += section("Configuration", configurations(runs));
  h += std::string("<footer>written by loft ") + LOFT_VERSION + " (loft report RUN... regenerates it)</footer></body></html>\n";
  return h;
}

std::vector<RunData> load_runs(const std::vector<fs::path>& run_dirs) {
  if (run_dirs.empty()) throw UsageError("no run folder given");
  std::vector<RunData> runs;
  for (const auto& d : run_dirs) {
    runs.push_back(load_run(d));
    for (const std::string& w : runs.back().warnings) std::cerr << "warning: " << w << "\n";
  }
  return runs;
}

void write_report(const std::vector<fs::path>& run_dirs, const fs::path& out) {
  write_file_atomic(out, render_report(load_runs(run_dirs)));
}

}  // namespace loft::report
