// Small helpers the studio's routes share: JSON replies, the JSON request body (bounded and
// checked), query parameters, and typed fields of a body with errors naming the key.
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

// Typed fields of a request body: HttpError 400 naming the key when it is missing (required) or of
// the wrong type.
std::string string_field(const nlohmann::json& body, const std::string& key);
std::optional<std::string> optional_string(const nlohmann::json& body, const std::string& key);
// A field as a command-line value: a string, a number or a boolean (true/false), else 400.
std::optional<std::string> scalar_field(const nlohmann::json& body, const std::string& key);

}  // namespace loft::studio
