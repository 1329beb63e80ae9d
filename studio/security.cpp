#include "studio/security.h"

#include <arpa/inet.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <fstream>

#include "engine/core/error.h"

namespace loft::studio {

std::string random_hex(size_t bytes) {
  std::ifstream in("/dev/urandom", std::ios::binary);
  std::string raw(bytes, '\0');
  if (!in.read(raw.data(), std::streamsize(bytes))) throw Error("cannot read /dev/urandom for the studio's token");
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : raw) {
    out += kHex[c >> 4];
    out += kHex[c & 15];
  }
  return out;
}

bool same_secret(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool is_wildcard(std::string_view host) { return host == "0.0.0.0" || host == "::" || host == "[::]"; }

// "::1" -> "[::1]": how an IPv6 address appears in a Host header.
std::string host_for_header(std::string_view host) {
  if (host.find(':') != std::string_view::npos && !host.starts_with("[")) return cat("[", host, "]");
  return std::string(host);
}

}  // namespace

bool is_loopback_host(std::string_view host) {
  std::string h = lower(host);
  if (h.size() > 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  if (h == "localhost") return true;
  in_addr v4{};
  if (inet_pton(AF_INET, h.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  if (inet_pton(AF_INET6, h.c_str(), &v6) == 1) return IN6_IS_ADDR_LOOPBACK(&v6);
  return false;
}

std::optional<std::string> cookie_value(std::string_view header, std::string_view name) {
  while (!header.empty()) {
    const size_t semi = header.find(';');
    std::string_view pair = trim(header.substr(0, semi));
    header = semi == std::string_view::npos ? std::string_view() : header.substr(semi + 1);
    const size_t eq = pair.find('=');
    if (eq != std::string_view::npos && trim(pair.substr(0, eq)) == name) return std::string(trim(pair.substr(eq + 1)));
  }
  return std::nullopt;
}

std::optional<std::string> bearer_token(std::string_view authorization) {
  authorization = trim(authorization);
  if (authorization.size() < 7 || lower(authorization.substr(0, 7)) != "bearer ") return std::nullopt;
  return std::string(trim(authorization.substr(7)));
}

std::vector<std::string> allowed_hosts(std::string_view bind_host, int port) {
  const std::string p = ":" + std::to_string(port);
  std::vector<std::string> out{"127.0.0.1" + p, "localhost" + p, "[::1]" + p};
  if (is_wildcard(bind_host)) {
    char name[256] = {};
    if (gethostname(name, sizeof name - 1) == 0 && name[0]) out.push_back(lower(name) + p);
  } else {
    out.push_back(lower(host_for_header(bind_host)) + p);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

bool host_allowed(std::string_view host, const std::vector<std::string>& allowed) {
  const std::string h = lower(trim(host));
  return std::find(allowed.begin(), allowed.end(), h) != allowed.end();
}

bool origin_allowed(std::string_view origin, const std::vector<std::string>& allowed) {
  origin = trim(origin);
  if (!origin.starts_with("http://")) return false;
  return host_allowed(origin.substr(7), allowed);
}

std::string token_cookie(std::string_view token) {
  return cat("loft_token=", token, "; Path=/; HttpOnly; SameSite=Strict");
}

}  // namespace loft::studio
