// The check every request passes before its route (httplib's pre-routing handler): Host and
// Origin, the token (?token= on a page visit sets the cookie and redirects to the bare URL), and
// the CSRF header on state-changing requests. docs/studio.md, "Security", describes the rules.
#pragma once
#include <httplib.h>

namespace loft::studio {

struct StudioContext;

// True when the request may go on to its route; otherwise `res` holds the refusal (403, 401) or
// the redirect that stores the token.
bool admit(const StudioContext& ctx, const httplib::Request& req, httplib::Response& res);

}  // namespace loft::studio
