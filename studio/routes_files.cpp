// Routes that read the roots: folder listings, the models found there, `loft info --json` and
// `loft data inspect --json` of a model and a data file, and finetune's option table.
#include <nlohmann/json.hpp>

#include "engine/core/error.h"
#include "engine/io/json_read.h"
#include "studio/command_check.h"
#include "studio/command_runner.h"
#include "studio/context.h"
#include "studio/http_error.h"
#include "studio/http_util.h"
#include "studio/routes.h"

namespace loft::studio {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr size_t kMaxEntries = 10000;  // one listing
constexpr int kModelDepth = 3;         // how deep /api/models looks under each root

bool is_model_dir(const fs::path& dir) {
  std::error_code ec;
  return fs::is_regular_file(dir / "config.json", ec);
}

json list_folder(const StudioContext& ctx, const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw HttpError(400, cat("path ", brief(dir.string()), " is not a folder"));
  json entries = json::array();
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.starts_with(".")) continue;  // locks, temporaries, hidden files
    if (entries.size() == kMaxEntries) break;
    const bool is_dir = e.is_directory(ec);
    entries.push_back({{"name", name},
                       {"type", is_dir ? "dir" : "file"},
                       {"size", is_dir ? json(nullptr) : json(e.file_size(ec))},
                       {"is_model", is_dir && is_model_dir(e.path())}});
  }
  if (ec) throw HttpError(500, cat("cannot list ", dir.string(), ": ", ec.message()));
  std::sort(entries.begin(), entries.end(), [](const json& a, const json& b) {
    return std::make_pair(a["type"] != "dir", a["name"].get<std::string>()) <
           std::make_pair(b["type"] != "dir", b["name"].get<std::string>());
  });
  json parent = nullptr;
  try {
    if (dir.has_parent_path() && dir != dir.root_path()) parent = ctx.paths.resolve(dir.parent_path().string()).string();
  } catch (const HttpError&) {  // the top of a root
  }
  return {{"path", dir.string()}, {"parent", parent}, {"entries", entries}};
}

// Hugging Face folders (config.json inside) under each root and the runs folder, at most
// kModelDepth levels down, not following symlinks.
json find_models(const StudioContext& ctx) {
  json out = json::array();
  std::vector<fs::path> tops = ctx.paths.roots();
  tops.push_back(ctx.paths.runs());
  for (const fs::path& top : tops) {
    std::error_code ec;
    if (is_model_dir(top)) out.push_back({{"path", top.string()}, {"name", top.filename().string()}});
    for (auto it = fs::recursive_directory_iterator(top, fs::directory_options::skip_permission_denied, ec);
         it != fs::recursive_directory_iterator() && out.size() < kMaxEntries; it.increment(ec)) {
      if (ec) break;
      const bool hidden = it->path().filename().string().starts_with(".");
      if (hidden || it->is_symlink(ec) || !it->is_directory(ec)) {
        it.disable_recursion_pending();  // (only a real folder would be entered)
        continue;
      }
      if (is_model_dir(it->path()))
        out.push_back({{"path", it->path().string()}, {"name", fs::relative(it->path(), top, ec).string()}});
      if (it.depth() + 1 >= kModelDepth) it.disable_recursion_pending();
    }
  }
  return out;
}

// Query parameters as `--option=value` arguments (one vector element each: a value can never be
// read as another option); parameters the route does not know are refused.
std::vector<std::string> query_args(const httplib::Request& req, const std::map<std::string, std::string>& known,
                                    const std::vector<std::string>& handled) {
  std::vector<std::string> args;
  for (const auto& [key, value] : req.params) {
    if (std::find(handled.begin(), handled.end(), key) != handled.end()) continue;
    const auto it = known.find(key);
    if (it == known.end()) throw HttpError(400, cat("unknown query parameter ", brief(key)));
    if (it->second.starts_with("flag:")) {
      if (value == "1" || value == "true") args.push_back("--" + it->second.substr(5));
      else if (value != "0" && value != "false") throw HttpError(400, cat("'", key, "' is 1 or 0, not ", brief(value)));
    } else {
      args.push_back("--" + it->second + "=" + value);
    }
  }
  return args;
}

}  // namespace

void add_file_routes(StudioContext& ctx) {
  ctx.http.Get("/api/fs", [&ctx](const httplib::Request& req, httplib::Response& res) {
    send_json(res, list_folder(ctx, ctx.paths.resolve(*query_param(req, "path", true))));
  });
  ctx.http.Get("/api/models", [&ctx](const httplib::Request&, httplib::Response& res) {
    send_json(res, find_models(ctx));
  });
  ctx.http.Get("/api/info", [&ctx](const httplib::Request& req, httplib::Response& res) {
    const fs::path model = ctx.paths.resolve(*query_param(req, "model", true));
    std::vector<std::string> args{"info", "--model=" + model.string(), "--json"};
    const std::vector<std::string> extra =
        query_args(req, {{"batch", "batch"}, {"seq", "seq"}, {"lora_rank", "lora-rank"},
                         {"grad_checkpointing", "flag:grad-checkpointing"}, {"card", "card"},
                         {"estimate_for", "estimate-for"}},
                   {"model"});
    args.insert(args.end(), extra.begin(), extra.end());
    res.status = 200;
    res.set_content(run_loft(ctx, args, 120), "application/json");
  });
  ctx.http.Get("/api/data/inspect", [&ctx](const httplib::Request& req, httplib::Response& res) {
    const fs::path model = ctx.paths.resolve(*query_param(req, "model", true));
    const fs::path data = ctx.paths.resolve(*query_param(req, "data", true));
    std::vector<std::string> args{"data", "inspect", "--json", "--model=" + model.string()};
    const std::vector<std::string> extra =
        query_args(req, {{"template", "template"}, {"seq", "seq"}, {"examples", "examples"}, {"format", "format"},
                         {"train_on_inputs", "flag:train-on-inputs"}, {"on_bad_record", "on-bad-record"}},
                   {"model", "data"});
    args.insert(args.end(), extra.begin(), extra.end());
    args.push_back("--");  // the file is a positional argument
    args.push_back(data.string());
    const json j = run_loft_json(ctx, args, 600);
    send_json(res, j.at("files").at(0));
  });
  ctx.http.Get("/api/options/finetune", [](const httplib::Request&, httplib::Response& res) {
    send_json(res, command_options("finetune"));
  });
}

}  // namespace loft::studio
