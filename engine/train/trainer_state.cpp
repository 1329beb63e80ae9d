// What --resume reads back as data: trainer_state.json and metrics.jsonl lines (trainer.h).
#include "engine/core/error.h"
#include "engine/io/json_fields.h"
#include "engine/io/json_read.h"
#include "engine/train/trainer.h"

namespace loft {

std::optional<int64_t> metrics_line_step(std::string_view line, const std::string& where) {
  std::string error;
  const auto j = try_parse_json(line, error);
  if (!j) return std::nullopt;  // blank, or the torn last line of a killed run
  if (!j->is_object()) throw Error(cat(where, ": not a JSON object"));
  return JsonFields(*j, where).integer("step", 0);
}

TrainerState trainer_state_from(const nlohmann::json& state, const std::string& source, int64_t max_steps) {
  if (!state.is_object() || !state.contains("step") || !state.contains("data"))
    throw Error(cat(source, " is not a loft trainer state"));
  const JsonFields f(state, source);
  TrainerState s;
  s.step = f.integer("step", 0);
  if (s.step > max_steps)
    f.fail("step", cat("is ", s.step, ", beyond the run's ", max_steps, " steps (--steps)"));
  // An update per step at most: a larger count would skew AdamW's bias correction.
  s.optimizer_steps = f.has("optimizer_steps") ? f.integer("optimizer_steps", 0, s.step) : s.step;
  s.data = state["data"];  // the BatchSource's own state: its restore() checks it
  return s;
}

}  // namespace loft
