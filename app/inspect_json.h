// `loft data inspect --json`: one file's inspection as JSON (what the studio's data page shows).
#pragma once
#include <nlohmann/json.hpp>

#include "datasets/inspect.h"

namespace loft::app {

// {path, format, template, template_origin, seq, examples: [{where, tokens, trained, segments:
// [{text, trained}]}], lengths: {count, total, min, mean, p50, p90, p99, max}, histogram: [{from,
// to, count}] (at most 20 equal-width bins), trained_tokens, truncated, kept_tokens, kept_trained,
// no_trained_left, skipped_bad, first_skip_reason}.
nlohmann::json inspection_json(const data::FileInspection& r, const data::InspectOptions& opt);

}  // namespace loft::app
