// /api/runs: training runs are run folders under --runs (studio/run_folders.h), started as
// `loft finetune --config RUN/studio-recipe.yaml` jobs (studio/run_request.h), stopped with
// SIGTERM (finetune checkpoints first) and resumed with --resume.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <ctime>
#include <nlohmann/json.hpp>

#include "engine/core/error.h"
#include "engine/io/atomic_file.h"
#include "engine/io/json_read.h"
#include "engine/train/run_folder.h"
#include "studio/command_runner.h"
#include "studio/context.h"
#include "studio/http_error.h"
#include "studio/http_util.h"
#include "studio/routes.h"
#include "studio/run_folders.h"
#include "studio/run_request.h"
#include "studio/sse.h"

namespace loft::studio {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr size_t kLogTail = 64 << 10;

struct RunState {
  RunFolder files;
  std::optional<JobView> job;  // the newest job of this studio for the folder
  std::string status, error;
  bool live() const { return status == "queued" || status == "running" || status == "stopping"; }
};

RunState run_state(const StudioContext& ctx, const fs::path& dir) {
  RunState s{read_run_folder(dir), ctx.jobs->latest_for_run(dir), "", ""};
  if (s.job && s.job->live()) {
    s.status = status_name(s.job->status);
  } else {
    s.status = status_from_files(s.files);
    if (s.files.outcome) s.error = s.files.outcome->error;
  }
  return s;
}

json summary(const RunState& s) {
  json j = run_summary(s.files);
  j["status"] = s.status;
  j["error"] = s.error.empty() ? json(nullptr) : json(s.error);
  j["job"] = s.job ? json(s.job->id) : json(nullptr);
  return j;
}

// Seconds left from the recent steps' pace; null unless the run trains now.
json eta(const RunState& s, const std::vector<json>& metrics) {
  const int64_t steps = s.files.config.is_object() ? s.files.config.value("steps", int64_t(0)) : 0;
  if (s.status != "running" || metrics.empty() || steps <= 0) return nullptr;
  double secs = 0;
  size_t n = 0;
  for (auto it = metrics.rbegin(); it != metrics.rend() && n < 20; ++it, ++n) secs += it->value("step_seconds", 0.0);
  const int64_t left = steps - metrics.back().value("step", int64_t(0));
  return left > 0 && n > 0 ? json(secs / double(n) * double(left)) : json(0.0);
}

std::string log_tail(const RunState& s) {
  if (s.job && s.job->live()) return s.job->log_tail;
  return file_tail(s.files.dir / kStudioLog, kLogTail);
}

std::string fresh_run_name(const fs::path& runs) {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "run-%Y%m%d-%H%M%S", &tm);
  std::string name = stamp;
  for (int k = 2; fs::exists(runs / name); ++k) name = cat(stamp, "-", k);
  return name;
}

// Refuses a folder another job or process uses, or that holds a run already (409).
void check_free(const StudioContext& ctx, const fs::path& dir) {
  if (const auto job = ctx.jobs->latest_for_run(dir); job && job->live())
    throw HttpError(409, cat("run ", dir.filename().string(), " is ", status_name(job->status), " (job ", job->id, ")"));
  const RunFolder f = read_run_folder(dir);
  if (f.lock_holder)
    throw HttpError(409, cat("run folder ", dir.string(), " is in use by ", f.lock_holder->describe()));
}

void send_run(const StudioContext& ctx, const fs::path& dir, httplib::Response& res, int status) {
  const RunState s = run_state(ctx, dir);
  send_json(res, summary(s), status);
}

json run_detail(const StudioContext& ctx, const fs::path& dir) {
  const RunState s = run_state(ctx, dir);
  size_t line = 0;
  const std::vector<json> metrics = read_metrics(dir, line);
  json j = summary(s);
  j["config"] = s.files.config;
  std::string recipe = file_tail(dir / kStudioRecipe, 1 << 20);
  if (recipe.empty()) recipe = file_tail(dir / "config.yaml", 1 << 20);
  j["recipe"] = recipe;
  j["metrics"] = metrics;
  j["log_tail"] = log_tail(s);
  j["eta_s"] = eta(s, metrics);
  if (s.job && !s.job->error.empty()) j["error"] = s.job->error;
  return j;
}

// The events of one run's stream since the last call: new metrics lines, new log text, status.
struct RunEvents {
  fs::path dir;
  size_t metrics_line = 0;
  std::streamoff log_offset = 0;
  std::string status;

  bool poll(const StudioContext& ctx, std::string& out) {
    for (const json& m : read_metrics(dir, metrics_line)) out += sse_event("metric", m);
    std::ifstream log(dir / kStudioLog, std::ios::binary | std::ios::ate);
    if (log && log.tellg() > log_offset) {
      const std::streamoff end = log.tellg();
      std::string text(size_t(end - log_offset), '\0');
      log.seekg(log_offset);
      log.read(text.data(), std::streamsize(text.size()));
      const size_t cut = text.rfind('\n');  // whole lines only
      if (cut != std::string::npos) {
        text.resize(cut + 1);
        log_offset += std::streamoff(text.size());
        out += sse_event("log", {{"text", text}});
      }
    }
    const RunState s = run_state(ctx, dir);
    if (s.status != status) {
      status = s.status;
      out += sse_event("status", {{"status", s.status}, {"error", s.error.empty() ? json(nullptr) : json(s.error)}});
    }
    return s.live();
  }
};

}  // namespace

void add_run_routes(StudioContext& ctx) {
  ctx.http.Post("/api/runs", [&ctx](const httplib::Request& req, httplib::Response& res) {
    const json body = json_body(req);
    std::lock_guard lock(ctx.runs_mutex);
    const CheckedRun plan = check_run_request(body, ctx.paths, fresh_run_name(ctx.paths.runs()));
    check_free(ctx, plan.dir);
    const RunFolder existing = read_run_folder(plan.dir);
    if (existing.config.is_object() || existing.last_metrics.is_object() || existing.newest_checkpoint >= 0 ||
        existing.has_adapter)
      throw HttpError(409, cat("output_dir ", plan.dir.string(), " already holds a run; resume it or pick another"));
    // The engine's claim (refuses a foreign folder, writes the .loft-run marker) makes the folder a
    // loft run folder, so the finetune child accepts it though the studio's recipe and log are in it;
    // the lock is let go at once for the child to take.
    claim_run_folder(plan.dir, RunFolderUse::fresh, "studio");
    const fs::path recipe = plan.dir / kStudioRecipe;
    write_file_atomic(recipe, plan.recipe_yaml);
    fs::remove(plan.dir / "studio-job.json");  // a failed earlier attempt's outcome
    ctx.jobs->submit({"run", {"finetune", "--config", recipe.string()}, plan.devices, plan.dir / kStudioLog, plan.dir, {{"run", plan.dir.filename().string()}}});
    send_run(ctx, plan.dir, res, 201);
  });
  // What POST /api/runs would start, without starting it: the recipe checked the same way, then
  // `loft finetune --plan` (app/run_plan.h) — the method, every default filled in, the memory
  // estimate and whether it fits. The run folder is neither claimed nor written.
  ctx.http.Post("/api/runs/plan", [&ctx](const httplib::Request& req, httplib::Response& res) {
    const CheckedRun run = check_run_request(json_body(req), ctx.paths, fresh_run_name(ctx.paths.runs()));
    const ScratchRecipe recipe(ctx.paths.runs(), run.recipe_yaml);
    send_json(res, run_loft_json(ctx, {"finetune", "--config", recipe.path().string(), "--plan"}, 120));
  });
  ctx.http.Get("/api/runs", [&ctx](const httplib::Request&, httplib::Response& res) {
    json out = json::array();
    for (const fs::path& dir : list_run_folders(ctx.paths.runs())) out.push_back(summary(run_state(ctx, dir)));
    send_json(res, out);
  });
  ctx.http.Get("/api/runs/([^/]+)", [&ctx](const httplib::Request& req, httplib::Response& res) {
    send_json(res, run_detail(ctx, run_dir_of(ctx.paths.runs(), req.matches[1])));
  });
  ctx.http.Get("/api/runs/([^/]+)/events", [&ctx](const httplib::Request& req, httplib::Response& res) {
    auto events = std::make_shared<RunEvents>();
    events->dir = run_dir_of(ctx.paths.runs(), req.matches[1]);
    if (const auto from = query_param(req, "from")) {
      try {
        events->metrics_line = std::stoull(*from);
      } catch (const std::logic_error&) {
        throw HttpError(400, cat("'from' is a line number, not ", brief(*from)));
      }
    }
    stream_events(ctx, res, [&ctx, events](std::string& out) { return events->poll(ctx, out); });
  });
  ctx.http.Post("/api/runs/([^/]+)/stop", [&ctx](const httplib::Request& req, httplib::Response& res) {
    const fs::path dir = run_dir_of(ctx.paths.runs(), req.matches[1]);
    const RunState s = run_state(ctx, dir);
    if (!(s.job && s.job->live() && ctx.jobs->stop(s.job->id))) {
      if (s.files.lock_holder)
        throw HttpError(409, cat("run ", s.files.id, " runs in ", s.files.lock_holder->describe(),
                                 " outside this studio: stop it there (Ctrl-C checkpoints)"));
      throw HttpError(409, cat("run ", s.files.id, " is not running (", s.status, ")"));
    }
    send_run(ctx, dir, res, 202);
  });
  ctx.http.Post("/api/runs/([^/]+)/resume", [&ctx](const httplib::Request& req, httplib::Response& res) {
    const fs::path dir = run_dir_of(ctx.paths.runs(), req.matches[1]);
    std::lock_guard lock(ctx.runs_mutex);
    check_free(ctx, dir);
    const RunFolder f = read_run_folder(dir);
    if (f.newest_checkpoint < 0) throw HttpError(409, cat("run ", f.id, " has no checkpoint to resume from"));
    fs::path recipe = dir / kStudioRecipe;
    if (!fs::exists(recipe)) recipe = dir / "config.yaml";
    if (!fs::exists(recipe)) throw HttpError(409, cat("run ", f.id, " has no studio-recipe.yaml or config.yaml to resume with"));
    const std::vector<std::string> devices = recipe_devices(recipe, ctx.paths);
    ctx.jobs->submit({"run", {"finetune", "--config", recipe.string(), "--resume", "--out", dir.string()}, devices,
                      dir / kStudioLog, dir, {{"run", dir.filename().string()}}});
    send_run(ctx, dir, res, 202);
  });
  ctx.http.Get("/api/runs/([^/]+)/report", [&ctx](const httplib::Request& req, httplib::Response& res) {
    const fs::path dir = run_dir_of(ctx.paths.runs(), req.matches[1]);
    const RunState s = run_state(ctx, dir);
    fs::path file = dir / "report.html";
    std::optional<fs::path> scratch;
    if (s.live() || !fs::exists(file)) {
      if (!fs::exists(dir / "metrics.jsonl")) throw HttpError(404, cat("run ", s.files.id, " has no metrics yet"));
      if (s.live()) {  // a report of the run so far, outside the folder finetune still writes
        static std::atomic<int> n{0};
        scratch = ctx.paths.runs() / cat(".studio-report-", getpid(), "-", n++, ".html");
        file = *scratch;
      }
      std::vector<std::string> args{"report", dir.string()};
      if (scratch) args.insert(args.end(), {"--out", scratch->string()});
      run_loft(ctx, args, 120);
    }
    std::string html = file_tail(file, size_t(64) << 20);
    if (scratch) fs::remove(*scratch);
    res.set_content(html, "text/html; charset=utf-8");
    // The report is a file with text from the run (data, names): no script runs in it.
    res.set_header("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src data:; sandbox");
  });
}

}  // namespace loft::studio
