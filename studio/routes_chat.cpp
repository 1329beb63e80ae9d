// POST /api/chat: a `loft generate --chat --stream-json` job whose pieces of text are forwarded
// as server-sent events (event: token, then event: done with the stop reason) as they are decoded.
// A client that goes away stops the job.
#include <stdlib.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/core/error.h"
#include "engine/io/json_read.h"
#include "studio/context.h"
#include "studio/http_error.h"
#include "studio/http_util.h"
#include "studio/job_request.h"
#include "studio/routes.h"
#include "studio/sse.h"

namespace loft::studio {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// A private folder for a conversation's prompt file, removed with the stream.
struct ChatFiles {
  fs::path dir;
  ~ChatFiles() {
    std::error_code ec;
    if (!dir.empty()) fs::remove_all(dir, ec);
  }
};

struct ChatStream {
  std::string job;
  size_t offset = 0;  // of the job's stdout, up to the last whole line read
  bool announced_queue = false;
  json stop = nullptr;
  std::shared_ptr<ChatFiles> files;

  bool poll(const StudioContext& ctx, std::string& out) {
    const std::optional<JobView> v = ctx.jobs->get(job);
    if (!v) return false;
    if (v->status == JobStatus::queued && !announced_queue) {
      announced_queue = true;
      out += sse_event("status", {{"status", "queued"}});
    }
    for (size_t end; (end = v->out.find('\n', offset)) != std::string::npos; offset = end + 1) {
      std::string error;
      const std::optional<json> line = try_parse_json(std::string_view(v->out).substr(offset, end - offset), error);
      if (!line || !line->is_object()) continue;
      if (line->contains("text")) out += sse_event("token", {{"text", (*line)["text"]}});
      if (line->contains("stop_reason")) stop = *line;
    }
    if (v->live()) return true;
    if (v->status == JobStatus::finished && stop.is_object()) {
      out += sse_event("done", {{"stop_reason", stop["stop_reason"]}, {"generated_tokens", stop.value("generated_tokens", 0)}});
    } else {
      out += sse_event("error", {{"error", v->error.empty() ? std::string(status_name(v->status)) : v->error}});
      out += sse_event("done", {{"stop_reason", "error"}});
    }
    return false;
  }
};

}  // namespace

void add_chat_routes(StudioContext& ctx) {
  ctx.http.Post("/api/chat", [&ctx](const httplib::Request& req, httplib::Response& res) {
    const json body = json_body(req);
    auto stream = std::make_shared<ChatStream>();
    stream->files = std::make_shared<ChatFiles>();
    std::vector<std::string> extra{"--chat", "--stream-json"};
    if (body.contains("messages")) {
      if (body.contains("prompt")) throw HttpError(400, "give one of 'prompt' and 'messages'");
      if (!body["messages"].is_array()) throw HttpError(400, cat("'messages' must be a list, got ", brief(body["messages"])));
      std::string dir = (fs::temp_directory_path() / "loft-studio-chat-XXXXXX").string();
      if (!mkdtemp(dir.data())) throw Error("cannot create a folder for the chat's prompt");
      stream->files->dir = dir;
      const fs::path file = stream->files->dir / "prompt.jsonl";
      std::ofstream(file, std::ios::binary) << json{{"messages", body["messages"]}}.dump() << "\n";
      extra.push_back("--prompts=" + file.string());
    } else if (!body.contains("prompt")) {
      throw HttpError(400, "missing 'prompt' (or 'messages')");
    }
    const JobArgs a = job_args(body, {"generate", {"model", "adapter"}, {"prompts", "json", "stream-json", "chat"}},
                               ctx.paths, {"messages"}, extra);
    stream->job = ctx.jobs->submit({"chat", a.args, a.devices, {}, {}, {}});
    stream_events(
        ctx, res, [&ctx, stream](std::string& out) { return stream->poll(ctx, out); },
        [&ctx, stream](bool complete) {
          if (!complete) ctx.jobs->stop(stream->job);
          stream->files.reset();
        });
  });
}

}  // namespace loft::studio
