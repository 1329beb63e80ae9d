// The method record: the "loft" object of an adapter's adapter_config.json, holding the full
// MethodOptions so `loft evaluate` / `loft finetune --init-adapter` rebuild the model the adapter
// was trained on (a HALO adapter on its rotated INT8/FP8 backbone, not on bf16). Layout (format 1):
//   {"format_version": 1, "method": "halo", "rank": 16, "alpha": 8.0, "targets": ["q_proj", ...],
//    "halo": {"level": 1, "format": "int8"}}
// Only the active method's own object is written, by its spec (engine/peft/method_spec.h). PEFT
// ignores the key; adapters PEFT made have none (they are LoRA).
#pragma once
#include <filesystem>
#include <nlohmann/json.hpp>

#include "engine/peft/method.h"

namespace loft {

// The record's layout version; a reader refuses a newer one.
inline constexpr int kMethodRecordVersion = 1;

nlohmann::json method_options_to_json(const MethodOptions& opt);
// Parses a record written by method_options_to_json. `file` is the adapter_config.json it came
// from: every error is one line naming it and the field ("loft.halo.level").
MethodOptions method_options_from_json(const nlohmann::json& record,
                                       const std::filesystem::path& file);

}  // namespace loft
