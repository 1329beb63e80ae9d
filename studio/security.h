// The studio's access rules (docs/studio.md, "Security"): a random token every request carries
// (cookie loft_token, or Authorization: Bearer), Host and Origin checked against the names this
// studio answers to (DNS rebinding), and a CSRF token on every state-changing request.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace loft::studio {

// `bytes` random bytes from /dev/urandom as lowercase hex (Error when it cannot be read).
std::string random_hex(size_t bytes);

// Equal strings, compared in time independent of where they differ.
bool same_secret(std::string_view a, std::string_view b);

// True for an address or name that stays on this machine: localhost, 127.0.0.0/8, ::1.
bool is_loopback_host(std::string_view host);

// The value of cookie `name` in a Cookie header, if present.
std::optional<std::string> cookie_value(std::string_view cookie_header, std::string_view name);
// The token of an "Authorization: Bearer T" header, if it is one.
std::optional<std::string> bearer_token(std::string_view authorization);

// The Host values (name:port) a studio bound to `bind_host`:`port` accepts: 127.0.0.1, localhost
// and [::1] with the port, and the --host value itself (with this machine's name when it is a
// wildcard address such as 0.0.0.0).
std::vector<std::string> allowed_hosts(std::string_view bind_host, int port);
// Whether a Host header is one of `allowed` (names compared without case).
bool host_allowed(std::string_view host, const std::vector<std::string>& allowed);
// Whether an Origin header is http:// + one of `allowed`.
bool origin_allowed(std::string_view origin, const std::vector<std::string>& allowed);

// The Set-Cookie value that stores the token: HttpOnly, SameSite=Strict, for the whole site.
std::string token_cookie(std::string_view token);

}  // namespace loft::studio
