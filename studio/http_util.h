// Small helpers the studio's routes share: JSON replies, the JSON request body (bounded and
// checked) and query parameters.
#pragma once
#include <httplib.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace loft::studio {

// Largest JSON request body (httplib answers 413 beyond it, before a handler runs).
inline constexpr size_t kMaxJsonBody = size_t(1) << 20;

void send_json(httplib::Response& res, const nlohmann::json& body, int status = 200);

// The request body as a JSON object: HttpError 400 naming what is wrong (not JSON, not an object,
// nested too deep), 415 when the Content-Type is not application/json.
nlohmann::json json_body(const httplib::Request& req);

// A query parameter; HttpError 400 naming it when `required` and absent.
std::optional<std::string> query_param(const httplib::Request& req, const std::string& key, bool required = false);

}  // namespace loft::studio
