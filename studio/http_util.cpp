#include "studio/http_util.h"

#include "engine/core/error.h"
#include "engine/io/json_read.h"
#include "studio/http_error.h"

namespace loft::studio {

using nlohmann::json;

void send_json(httplib::Response& res, const json& body, int status) {
  res.status = status;
  res.set_content(body.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

json json_body(const httplib::Request& req) {
  const std::string type = req.get_header_value("Content-Type");
  if (!type.starts_with("application/json"))
    throw HttpError(415, cat("the request body must be application/json, not ", brief(type)));
  std::string error;
  std::optional<json> j = try_parse_json(req.body, error);
  if (!j) throw HttpError(400, cat("request body: ", error));
  if (!j->is_object()) throw HttpError(400, cat("request body: expected a JSON object, got ", brief(*j)));
  return *j;
}

std::optional<std::string> query_param(const httplib::Request& req, const std::string& key, bool required) {
  if (req.has_param(key)) return req.get_param_value(key);
  if (required) throw HttpError(400, cat("missing query parameter '", key, "'"));
  return std::nullopt;
}

}  // namespace loft::studio
