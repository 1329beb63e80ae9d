#include "studio/gate.h"

#include "engine/core/error.h"
#include "engine/io/json_read.h"
#include "studio/context.h"
#include "studio/http_util.h"
#include "studio/security.h"

namespace loft::studio {

namespace {

bool refuse(httplib::Response& res, int status, const std::string& why) {
  send_json(res, {{"error", why}}, status);
  return false;
}

bool changes_state(const std::string& method) {
  return method != "GET" && method != "HEAD" && method != "OPTIONS";
}

// Routes that hold nothing secret: the health check and the page shell.
bool is_public(const httplib::Request& req) {
  return (req.method == "GET" || req.method == "HEAD") && (req.path == "/api/health" || req.path == "/");
}

}  // namespace

bool admit(const StudioContext& ctx, const httplib::Request& req, httplib::Response& res) {
  const std::string host = req.get_header_value("Host");
  if (!host_allowed(host, ctx.hosts))
    return refuse(res, 403, cat("Host ", brief(host), " is not this studio's address (DNS rebinding protection)"));
  if (req.has_header("Origin") && !origin_allowed(req.get_header_value("Origin"), ctx.hosts))
    return refuse(res, 403, cat("Origin ", brief(req.get_header_value("Origin")), " may not call this studio"));

  if (req.method == "GET" && req.has_param("token") && !req.path.starts_with("/api/")) {
    if (!same_secret(req.get_param_value("token"), ctx.token)) return refuse(res, 401, "wrong token in the URL");
    res.set_header("Set-Cookie", token_cookie(ctx.token));
    // The bare URL, so the token leaves the address bar and history ("//host" would leave the site).
    res.set_redirect(req.path.starts_with("//") ? "/" : req.path, 302);
    return false;
  }
  if (is_public(req)) return true;

  std::optional<std::string> given = bearer_token(req.get_header_value("Authorization"));
  if (!given) given = cookie_value(req.get_header_value("Cookie"), "loft_token");
  if (!given || !same_secret(*given, ctx.token))
    return refuse(res, 401, "missing or wrong token: open the URL loft studio printed (it ends in ?token=...)");
  if (changes_state(req.method) && !same_secret(req.get_header_value("X-CSRF-Token"), ctx.csrf))
    return refuse(res, 403, "missing or wrong X-CSRF-Token header (GET /api/session gives it)");
  return true;
}

}  // namespace loft::studio
