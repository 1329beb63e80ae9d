// The studio's routes, one file each by topic (docs/studio.md lists the API).
#pragma once

namespace loft::studio {

struct StudioContext;

// GET /api/health, /api/session, the page (/) and its files (/static/NAME).
void add_session_routes(StudioContext& ctx);
// GET /api/fs, /api/models, /api/info, /api/data/inspect, /api/options/finetune.
void add_file_routes(StudioContext& ctx);
// /api/runs: start, list, detail, events, stop, resume, report.
void add_run_routes(StudioContext& ctx);
// POST /api/evaluate, /api/exports; /api/jobs.
void add_job_routes(StudioContext& ctx);
// POST /api/chat.
void add_chat_routes(StudioContext& ctx);

}  // namespace loft::studio
