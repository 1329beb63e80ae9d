#include "studio/run_folders.h"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <fstream>

#include "engine/core/error.h"
#include "engine/io/atomic_file.h"
#include "engine/io/json_read.h"
#include "engine/train/run_folder.h"
#include "studio/http_error.h"

namespace loft::studio {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

double mtime_s(const fs::path& p) {
  struct stat st {};
  if (stat(p.c_str(), &st) != 0) return 0;
  return double(st.st_mtim.tv_sec) + double(st.st_mtim.tv_nsec) * 1e-9;
}

json read_json_or_null(const fs::path& file) {
  std::error_code ec;
  if (!fs::is_regular_file(file, ec)) return nullptr;
  try {
    return read_json_file(file);
  } catch (const std::exception&) {
    return nullptr;
  }
}

// The last complete line of a metrics file, read from its end (runs can be long).
json last_metrics_line(const fs::path& file) {
  constexpr size_t kRead = 65536;
  const std::string text = file_tail(file, kRead);
  const size_t end = text.rfind('\n');  // a line without its newline is still being written
  if (end == std::string::npos) return nullptr;
  const size_t before = end == 0 ? std::string::npos : text.rfind('\n', end - 1);
  const size_t start = before == std::string::npos ? 0 : before + 1;
  std::string error;
  std::optional<json> j = try_parse_json(text.substr(start, end - start), error);
  return j && j->is_object() ? *j : json(nullptr);  // (a line cut by kRead does not parse)
}

int64_t newest_checkpoint(const fs::path& dir) {
  int64_t best = -1;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir / "checkpoints", ec)) {
    const std::string name = e.path().filename().string();
    if (!name.starts_with("step-") || !e.is_directory()) continue;
    try {
      size_t used = 0;
      const int64_t s = std::stoll(name.substr(5), &used);
      if (used == name.size() - 5) best = std::max(best, s);
    } catch (const std::logic_error&) {
    }
  }
  return best;
}

// "2026-11-27T10:00:00Z" -> seconds since the epoch (0 when it is not that shape).
double parse_iso_utc(const std::string& s) {
  std::tm tm{};
  if (!strptime(s.c_str(), "%Y-%m-%dT%H:%M:%S", &tm)) return 0;
  return double(timegm(&tm));
}

}  // namespace

void save_run_outcome(const fs::path& run_dir, const RunOutcome& o) {
  write_file_atomic(run_dir / "studio-job.json",
                    json{{"status", o.status}, {"error", o.error}, {"ended_at", o.ended_at}}.dump() + "\n");
}

bool is_run_folder(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return false;
  for (const char* f : {kRunMarker, "run_config.json", "metrics.jsonl", "checkpoints", "adapter", kFolderLockFile, kStudioRecipe})
    if (fs::exists(dir / f, ec)) return true;
  return false;
}

std::vector<fs::path> list_run_folders(const fs::path& runs) {
  std::vector<std::pair<double, fs::path>> found;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(runs, ec)) {
    const std::string name = e.path().filename().string();
    if (name.starts_with(".") || e.is_symlink() || !is_run_folder(e.path())) continue;
    found.emplace_back(mtime_s(e.path()), e.path());
  }
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<fs::path> out;
  for (auto& f : found) out.push_back(std::move(f.second));
  return out;
}

fs::path run_dir_of(const fs::path& runs, const std::string& id) {
  const bool plain = !id.empty() && id.size() <= 255 && !id.starts_with(".") &&
                     id.find_first_of("/\\") == std::string::npos && id.find('\0') == std::string::npos;
  const fs::path dir = runs / id;
  std::error_code ec;
  if (!plain || fs::is_symlink(dir, ec) || !is_run_folder(dir))
    throw HttpError(404, cat("no run ", brief(id), " under ", runs.string()));
  return dir;
}

std::vector<json> read_metrics(const fs::path& dir, size_t& line) {
  std::vector<json> out;
  std::ifstream in(dir / "metrics.jsonl", std::ios::binary);
  std::string text;
  for (size_t n = 0; std::getline(in, text); ++n) {
    if (in.eof()) break;  // no newline yet: a line still being written
    if (n < line) continue;
    line = n + 1;
    std::string error;
    if (std::optional<json> j = try_parse_json(text, error); j && j->is_object()) out.push_back(std::move(*j));
  }
  return out;
}

std::string file_tail(const fs::path& file, size_t bytes) {
  std::ifstream in(file, std::ios::binary | std::ios::ate);
  if (!in) return "";
  const std::streamoff size = in.tellg();
  const std::streamoff from = std::max<std::streamoff>(0, size - std::streamoff(bytes));
  in.seekg(from);
  std::string text(size_t(size - from), '\0');
  in.read(text.data(), std::streamsize(text.size()));
  return text;
}

RunFolder read_run_folder(const fs::path& dir) {
  RunFolder r;
  r.dir = dir;
  r.id = dir.filename().string();
  r.config = read_json_or_null(dir / "run_config.json");
  r.last_metrics = last_metrics_line(dir / "metrics.jsonl");
  r.newest_checkpoint = newest_checkpoint(dir);
  std::error_code ec;
  r.has_adapter = fs::exists(dir / "adapter" / "adapter_config.json", ec);
  r.lock_holder = folder_lock_holder(dir);
  const json outcome = read_json_or_null(dir / "studio-job.json");
  if (outcome.is_object() && outcome.value("ended_at", 0.0) + 1e-3 >= mtime_s(dir / "metrics.jsonl"))
    r.outcome = RunOutcome{outcome.value("status", ""), outcome.value("error", ""), outcome.value("ended_at", 0.0)};
  if (r.lock_holder && !r.lock_holder->started.empty()) r.started = parse_iso_utc(r.lock_holder->started);
  if (r.started == 0) {
    double first = 0;
    for (const char* f : {kStudioRecipe, "run_config.json", "metrics.jsonl"})
      if (const double t = mtime_s(dir / f); t > 0 && (first == 0 || t < first)) first = t;
    r.started = first;
  }
  return r;
}

std::string status_from_files(const RunFolder& r) {
  if (r.lock_holder) return "running";
  if (r.outcome && !r.outcome->status.empty()) return r.outcome->status;
  const int64_t step = r.last_metrics.is_object() ? r.last_metrics.value("step", int64_t(0)) : 0;
  const int64_t steps = r.config.is_object() ? r.config.value("steps", int64_t(0)) : 0;
  if (r.has_adapter && steps > 0 && step >= steps) return "finished";
  if (r.newest_checkpoint >= 0) return "stopped";  // resumable: --resume continues it
  if (r.has_adapter) return "finished";           // the data ran out before --steps
  return "failed";
}

json run_summary(const RunFolder& r) {
  const json& c = r.config;
  const json& m = r.last_metrics;
  auto field = [](const json& j, const char* k) { return j.is_object() && j.contains(k) ? j[k] : json(nullptr); };
  return {{"id", r.id},
          {"dir", r.dir.string()},
          {"name", r.id},
          {"step", m.is_object() ? m.value("step", int64_t(0)) : 0},
          {"steps", field(c, "steps")},
          {"loss", field(m, "loss")},
          {"method", field(c, "method")},
          {"model", field(c, "model")},
          {"started", r.started}};
}

}  // namespace loft::studio
