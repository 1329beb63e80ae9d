// adapter_config.json: PEFT's fields and loft's method record, read with typed fields.
#include <set>

#include "engine/core/error.h"
#include "engine/io/json_fields.h"
#include "engine/io/json_read.h"
#include "engine/peft/method_record.h"
#include "engine/peft/peft_adapter.h"

namespace loft {

namespace fs = std::filesystem;

namespace {

// Rejects PEFT features whose tensors or maths loft does not implement, instead of silently
// computing something else.
void reject_unsupported(const JsonFields& f) {
  auto truthy = [&](const char* k) { return f.has(k) && f.json()[k] != false; };
  if (const std::string type = f.string("peft_type", ""); type != "LORA")
    f.fail("peft_type", cat("is ", brief(type), "; only LORA is supported"));
  for (const char* k : {"use_dora", "use_rslora", "use_qalora", "fan_in_fan_out"})
    if (truthy(k)) f.fail(k, "is not supported");
  if (const std::string bias = f.string("bias", "none"); bias != "none")
    f.fail("bias", cat("is ", brief(bias), "; only none is supported"));
  for (const char* k : {"rank_pattern", "alpha_pattern"})
    if (f.has(k) && f.json()[k].is_object() && !f.json()[k].empty())
      f.fail(k, "(per-module) is not supported");
  if (f.has("modules_to_save") && !f.json()["modules_to_save"].empty())
    f.fail("modules_to_save", "is not supported");
}

// The loft record restates r, lora_alpha and target_modules; a hand-edited config where they
// disagree would rebuild a model the tensors do not fit.
void check_record_matches_peft(const PeftAdapter& a, const fs::path& file) {
  const MethodOptions& m = *a.method;
  if (m.lora.rank != a.rank)
    throw Error(cat(file.string(), ": field loft.rank is ", m.lora.rank, " but r is ", a.rank));
  if (m.lora.alpha != a.alpha)
    throw Error(cat(file.string(), ": field loft.alpha is ", m.lora.alpha, " but lora_alpha is ",
                    a.alpha));
  std::set<std::string> peft;
  for (const std::string& t : a.target_modules) peft.insert(peft_target_leaf(t));
  if (peft != m.targets)
    throw Error(cat(file.string(), ": field loft.targets names other projections than ",
                    "target_modules"));
}

}  // namespace

std::string peft_target_leaf(const std::string& t) {
  const size_t dot = t.rfind('.');
  return dot == std::string::npos ? t : t.substr(dot + 1);
}

PeftAdapter peft_adapter_config_from(const nlohmann::json& j, const fs::path& cfg_path) {
  if (!j.is_object()) throw Error(cat(cfg_path.string(), ": not a JSON object"));
  const JsonFields f(j, cfg_path.string());
  reject_unsupported(f);
  PeftAdapter a;
  a.rank = int(f.positive("r", INT32_MAX));
  a.alpha = f.float32("lora_alpha");
  a.target_modules = f.strings("target_modules", /*allow_single=*/true);
  a.base_model = f.string("base_model_name_or_path", "");
  if (j.contains("loft")) {
    a.method = method_options_from_json(j["loft"], cfg_path);
    check_record_matches_peft(a, cfg_path);
  }
  return a;
}

}  // namespace loft
