// The routes that need no job: health, the session (CSRF token, roots), and the embedded page.
#include <nlohmann/json.hpp>

#include "studio/assets.h"
#include "studio/context.h"
#include "studio/http_util.h"
#include "studio/routes.h"

namespace loft::studio {

namespace {

// The page runs only its own files: no inline script, nothing from elsewhere.
constexpr const char* kPagePolicy =
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

void send_asset(httplib::Response& res, const Asset& a) {
  res.set_content(a.data.data(), a.data.size(), std::string(content_type_for(a.name)));
  if (a.name.ends_with(".html")) res.set_header("Content-Security-Policy", kPagePolicy);
}

}  // namespace

void add_session_routes(StudioContext& ctx) {
  ctx.http.Get("/api/health", [](const httplib::Request&, httplib::Response& res) {
    send_json(res, {{"ok", true}, {"version", LOFT_VERSION}});
  });
  ctx.http.Get("/api/session", [&ctx](const httplib::Request&, httplib::Response& res) {
    nlohmann::json roots = nlohmann::json::array();
    for (const auto& r : ctx.paths.roots()) roots.push_back(r.string());
    send_json(res, {{"csrf", ctx.csrf}, {"version", LOFT_VERSION}, {"roots", roots},
                    {"runs_dir", ctx.paths.runs().string()}});
  });
  ctx.http.Get("/", [](const httplib::Request&, httplib::Response& res) {
    const Asset* page = find_asset("index.html");
    if (!page) {
      send_json(res, {{"error", "this build has no studio/web/index.html"}}, 404);
      return;
    }
    send_asset(res, *page);
  });
  ctx.http.Get("/static/(.+)", [](const httplib::Request& req, httplib::Response& res) {
    const Asset* a = find_asset(req.matches[1].str());
    if (!a) {
      send_json(res, {{"error", "no such file: " + req.matches[1].str().substr(0, 200)}}, 404);
      return;
    }
    send_asset(res, *a);
  });
}

}  // namespace loft::studio
