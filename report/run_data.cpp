#include "report/run_data.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "engine/core/error.h"
#include "engine/io/json_fields.h"
#include "engine/io/json_read.h"

namespace loft::report {

namespace fs = std::filesystem;

namespace {

bool blank(const std::string& line) { return line.find_first_not_of(" \t\r") == std::string::npos; }

// Every line must be a step's JSON object; only the last may be torn (a killed run's partial
// write), which costs a warning. Anything else is an error naming the line.
std::vector<MetricPoint> read_metrics(const fs::path& file, std::vector<std::string>& warnings) {
  std::ifstream in(file);
  if (!in) throw Error(cat(file.string(), ": not a run folder (no metrics.jsonl)"));
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(std::move(line));
  while (!lines.empty() && blank(lines.back())) lines.pop_back();
  std::vector<MetricPoint> out;
  std::string error;
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string where = cat(file.string(), ":", i + 1);
    if (blank(lines[i])) continue;
    const auto j = try_parse_json(lines[i], error);
    if (!j && i + 1 == lines.size() && !out.empty()) {
      warnings.push_back(cat(where, ": the last line is not a whole JSON object (a killed run's torn write); "
                                    "the report ends at step ", out.back().step));
      continue;
    }
    if (!j) throw Error(cat(where, ": not a metrics line: ", error));
    if (!j->is_object()) throw Error(cat(where, ": not a metrics line: a JSON ", j->type_name(), ", not an object"));
    const JsonFields f(*j, where);
    MetricPoint p;
    p.step = f.integer("step", 0);
    p.loss = f.number("loss");
    p.lr = f.number("lr");
    p.grad_norm = f.number("grad_norm");
    p.tokens_per_s = f.has("tokens_per_s") ? f.number("tokens_per_s") : 0.0;
    p.seconds = f.has("step_seconds") ? f.number("step_seconds") : 0.0;
    if (f.has("peak_memory")) p.peak_memory = f.number("peak_memory");
    if (f.has("val_loss")) p.val_loss = f.number("val_loss");
    out.push_back(p);
  }
  if (out.empty()) throw Error(cat(file.string(), ": holds no training step"));
  // A resumed run appends after truncating, so steps ascend; keep the last line of any repeat.
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.step < b.step; });
  std::vector<MetricPoint> unique;
  for (const auto& p : out) {
    if (!unique.empty() && unique.back().step == p.step) unique.back() = p;
    else unique.push_back(p);
  }
  return unique;
}

// data_stats.json (DataLoader::stats, written by finetune): an object of counts. The report's
// tables read them as numbers, so a field of another type is an error naming it.
nlohmann::json read_data_stats(const fs::path& file) {
  nlohmann::json j = read_json_file(file);
  if (!j.is_object()) throw Error(cat(file.string(), ": not a JSON object (", brief(j), ")"));
  const JsonFields f(j, file.string());
  for (const char* key : kDataStatCounts)
    if (f.has(key)) f.integer(key, 0);
  return j;
}

bool is_eval_report(const nlohmann::json& j) {
  return j.is_object() && j.contains("task") && j["task"].is_string() && j.contains("metrics") &&
         j["metrics"].is_object();
}

// `warnings`: where every JSON file is evaluate's (RUN/eval/), one that cannot be read as its
// report is named there; elsewhere (the run folder itself) other JSON files are passed over.
void add_eval_reports(const fs::path& folder, const fs::path& run, std::vector<EvalReport>& out,
                      std::vector<std::string>* warnings = nullptr) {
  if (!fs::is_directory(folder)) return;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(folder))
    if (e.is_regular_file() && e.path().extension() == ".json") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    nlohmann::json j;
    try {
      j = read_json_file(f);
    } catch (const Error& e) {
      if (warnings) warnings->push_back(cat(f.string(), ": skipped, not readable as an evaluation report (", e.what(), ")"));
      continue;
    }
    if (is_eval_report(j)) out.push_back({fs::relative(f, run).string(), std::move(j)});
    else if (warnings) warnings->push_back(cat(f.string(), ": skipped, not an evaluation report"));
  }
}

}  // namespace

RunData load_run(const fs::path& dir) {
  RunData r;
  r.dir = dir;
  r.name = fs::weakly_canonical(dir).filename().string();
  r.metrics = read_metrics(dir / "metrics.jsonl", r.warnings);
  if (fs::exists(dir / "run_config.json")) {
    r.run_config = read_json_file(dir / "run_config.json");
    if (!r.run_config.is_object())
      throw Error(cat((dir / "run_config.json").string(), ": not a JSON object (", brief(r.run_config), ")"));
  }
  if (fs::exists(dir / "data_stats.json")) r.data_stats = read_data_stats(dir / "data_stats.json");
  if (std::ifstream y(dir / "config.yaml"); y) {
    std::ostringstream s;
    s << y.rdbuf();
    r.config_yaml = s.str();
  }
  add_eval_reports(dir, dir, r.evals);
  add_eval_reports(dir / "eval", dir, r.evals, &r.warnings);
  return r;
}

}  // namespace loft::report
