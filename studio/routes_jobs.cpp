// POST /api/evaluate and /api/exports queue `loft evaluate --json` and `loft export` jobs;
// /api/jobs lists every job of this studio (runs and chats too) with its progress and result.
#include <nlohmann/json.hpp>

#include "engine/core/error.h"
#include "engine/io/json_read.h"
#include "studio/context.h"
#include "studio/http_error.h"
#include "studio/http_util.h"
#include "studio/job_request.h"
#include "studio/routes.h"
#include "studio/run_folders.h"

namespace loft::studio {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// The job's result: evaluate's JSON report (the last JSON line it printed), an export's output
// (with export_report.json when it wrote one), a run's id.
json job_result(const JobView& v) {
  if (v.status != JobStatus::finished) return nullptr;
  if (v.spec.kind == "evaluate") {
    const size_t end = v.out.find_last_not_of("\r\n");
    if (end == std::string::npos) return nullptr;
    const size_t begin = v.out.find_last_of('\n', end);
    std::string error;
    std::optional<json> j = try_parse_json(v.out.substr(begin == std::string::npos ? 0 : begin + 1), error);
    return j ? *j : json(nullptr);
  }
  if (v.spec.kind == "export") {
    json r = v.spec.info;
    const fs::path report = fs::path(v.spec.info.value("out", "")) / "export_report.json";
    std::error_code ec;
    if (fs::is_regular_file(report, ec)) {
      std::string error;
      if (std::optional<json> j = try_parse_json(file_tail(report, 1 << 20), error)) r["report"] = *j;
    }
    return r;
  }
  return v.spec.info.empty() ? json(nullptr) : v.spec.info;
}

json job_json(const JobView& v) {
  auto time = [](double t) { return t > 0 ? json(t) : json(nullptr); };
  return {{"id", v.id},
          {"kind", v.spec.kind},
          {"status", status_name(v.status)},
          {"progress", v.progress},
          {"result", job_result(v)},
          {"error", v.error.empty() ? json(nullptr) : json(v.error)},
          {"log_tail", v.log_tail},
          {"devices", v.spec.devices},
          {"queued_at", time(v.queued_at)},
          {"started_at", time(v.started_at)},
          {"ended_at", time(v.ended_at)}};
}

JobView job_or_404(const StudioContext& ctx, const std::string& id) {
  std::optional<JobView> v = ctx.jobs->get(id);
  if (!v) throw HttpError(404, cat("no job ", brief(id)));
  return *v;
}

}  // namespace

void add_job_routes(StudioContext& ctx) {
  ctx.http.Post("/api/evaluate", [&ctx](const httplib::Request& req, httplib::Response& res) {
    const JobArgs a = job_args(json_body(req), {"evaluate", {"model", "adapter", "data", "train", "test"},
                                                {"json", "report", "log-samples"}},
                               ctx.paths, {}, {"--json"});
    const std::string id = ctx.jobs->submit({"evaluate", a.args, a.devices, {}, {}, {}});
    send_json(res, job_json(*ctx.jobs->get(id)), 202);
  });
  ctx.http.Post("/api/exports", [&ctx](const httplib::Request& req, httplib::Response& res) {
    const json body = json_body(req);
    if (!body.contains("out")) throw HttpError(400, "missing 'out'");
    const JobArgs a = job_args(body, {"export", {"model", "adapter", "out"}, {}}, ctx.paths, {}, {});
    const std::string id = ctx.jobs->submit({"export", a.args, a.devices, {}, {}, {{"out", a.resolved.at("out")}}});
    send_json(res, job_json(*ctx.jobs->get(id)), 202);
  });
  ctx.http.Get("/api/jobs", [&ctx](const httplib::Request&, httplib::Response& res) {
    json out = json::array();
    for (const JobView& v : ctx.jobs->list()) out.push_back(job_json(v));
    send_json(res, out);
  });
  ctx.http.Get("/api/jobs/([^/]+)", [&ctx](const httplib::Request& req, httplib::Response& res) {
    send_json(res, job_json(job_or_404(ctx, req.matches[1])));
  });
  ctx.http.Post("/api/jobs/([^/]+)/stop", [&ctx](const httplib::Request& req, httplib::Response& res) {
    const JobView v = job_or_404(ctx, req.matches[1]);
    if (!ctx.jobs->stop(v.id)) throw HttpError(409, cat("job ", v.id, " has ended (", status_name(v.status), ")"));
    send_json(res, job_json(*ctx.jobs->get(v.id)), 202);
  });
}

}  // namespace loft::studio
