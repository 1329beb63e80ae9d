// Short commands the studio runs and waits for (loft info --json, loft data inspect --json,
// loft report): a child of the loft binary with an argument vector, its JSON or its failure.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace loft::studio {

struct StudioContext;

// Runs `loft ARGS...` to completion (at most `timeout_s`) and returns its stdout. A failure is an
// HttpError carrying the command's own one-line error: 400 for a usage error (exit 2), 500 else.
std::string run_loft(const StudioContext& ctx, const std::vector<std::string>& args, double timeout_s);

// The same, its stdout parsed as one JSON value (500 when it is not JSON).
nlohmann::json run_loft_json(const StudioContext& ctx, const std::vector<std::string>& args, double timeout_s);

}  // namespace loft::studio
