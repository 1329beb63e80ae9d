#include "engine/peft/peft_adapter.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "engine/io/atomic_file.h"
#include "engine/io/safetensors_reader.h"
#include "engine/io/safetensors_writer.h"
#include "engine/io/json_fields.h"
#include "engine/io/json_read.h"
#include "engine/peft/method_record.h"
#include "engine/peft/method_state.h"
#include "engine/tensor/finite.h"

namespace loft {

namespace fs = std::filesystem;

namespace {
constexpr std::string_view kPrefix = "base_model.model.";

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
    throw Error(cat(file.string(), ": field 'loft.rank' is ", m.lora.rank, " but r is ", a.rank));
  if (m.lora.alpha != a.alpha)
    throw Error(cat(file.string(), ": field 'loft.alpha' is ", m.lora.alpha, " but lora_alpha is ",
                    a.alpha));
  std::set<std::string> peft;
  for (const std::string& t : a.target_modules) peft.insert(peft_target_leaf(t));
  if (peft != m.targets)
    throw Error(cat(file.string(), ": field 'loft.targets' names other projections than ",
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

PeftAdapter load_peft_adapter(const fs::path& dir) {
  const fs::path cfg_path = dir / "adapter_config.json";
  if (!fs::exists(cfg_path)) throw Error(cat("adapter: cannot read ", cfg_path.string()));
  PeftAdapter a = peft_adapter_config_from(read_json_file(cfg_path), cfg_path);

  const fs::path tensors_path = dir / "adapter_model.safetensors";
  const SafetensorsReader file = SafetensorsReader::open(tensors_path);
  std::map<std::string, Tensor> a_of, b_of;
  // PEFT writes ".lora_A.weight"; in-memory state dicts carry the adapter name (".default") too.
  auto strip = [](const std::string& s, std::initializer_list<std::string_view> suffixes) {
    for (std::string_view sfx : suffixes)
      if (s.size() > sfx.size() && s.ends_with(sfx)) return s.substr(0, s.size() - sfx.size());
    return std::string();
  };
  for (const std::string& name : file.names()) {
    const std::string module = name.rfind(kPrefix, 0) == 0 ? name.substr(kPrefix.size()) : name;
    if (auto m = strip(module, {".lora_A.weight", ".lora_A.default.weight"}); !m.empty())
      a_of[m] = file.tensor(name);
    else if (auto m2 = strip(module, {".lora_B.weight", ".lora_B.default.weight"}); !m2.empty())
      b_of[m2] = file.tensor(name);
    else
      throw Error(cat(tensors_path.string(), ": tensor '", name, "' is not a LoRA A/B weight"));
  }
  for (const auto& [module, at] : a_of) {
    auto it = b_of.find(module);
    if (it == b_of.end())
      throw Error(cat(tensors_path.string(), ": ", module, " has lora_A but no lora_B"));
    const Tensor& bt = it->second;
    if (at.dim() != 2 || bt.dim() != 2 || at.size(0) != a.rank || bt.size(1) != a.rank)
      throw Error(cat(tensors_path.string(), ": ", module, " has A ", shape_str(at.shape()),
                      " and B ", shape_str(bt.shape()), ", which do not match r = ", a.rank));
    auto to_f32 = [](const Tensor& t) {
      if (t.dtype() == DType::F32) return t.clone();
      const auto v = t.to_float_vector();  // F16/BF16 adapters are widened exactly
      return Tensor::from_vector(v, t.shape());
    };
    require_finite(at, module + ".lora_A", tensors_path.string());
    require_finite(bt, module + ".lora_B", tensors_path.string());
    a.modules[module] = {to_f32(at), to_f32(bt)};
  }
  for (const auto& [module, bt] : b_of)
    if (!a_of.count(module))
      throw Error(cat(tensors_path.string(), ": ", module, " has lora_B but no lora_A"));
  if (a.modules.empty()) throw Error(cat(tensors_path.string(), ": no LoRA tensors"));

  const fs::path state_path = dir / kMethodStateFile;
  if (fs::exists(state_path)) {
    if (!a.method)
      throw Error(cat(state_path.string(), ": method state without a loft record in ",
                      cfg_path.string()));
    a.method_state = read_method_state(state_path);
  }
  return a;
}

void save_peft_adapter(const fs::path& dir, const PeftAdapter& a) {
  LOFT_CHECK(a.method || a.method_state.empty(), "save_peft_adapter: method state needs a method record");
  fs::create_directories(dir);
  std::map<std::string, Tensor> tensors;
  for (const auto& [module, ab] : a.modules) {
    tensors[std::string(kPrefix) + module + ".lora_A.weight"] = ab.first;
    tensors[std::string(kPrefix) + module + ".lora_B.weight"] = ab.second;
  }
  write_safetensors(dir / "adapter_model.safetensors", tensors, {{"format", "pt"}});
  // Written before the config, so a config naming a method never meets a missing state file of
  // this save; a state file from an earlier save into this folder must not outlive it.
  if (!a.method_state.empty())
    write_method_state(dir / kMethodStateFile, a.method_state);
  else
    fs::remove(dir / kMethodStateFile);
  nlohmann::json j = {{"peft_type", "LORA"},
                      {"task_type", "CAUSAL_LM"},
                      {"r", a.rank},
                      {"lora_alpha", a.alpha},
                      {"lora_dropout", 0.0},
                      {"target_modules", a.target_modules},
                      {"bias", "none"},
                      {"fan_in_fan_out", false},
                      {"use_dora", false},
                      {"use_rslora", false},
                      {"init_lora_weights", true},
                      {"inference_mode", true},
                      {"modules_to_save", nullptr},
                      {"base_model_name_or_path", a.base_model}};
  if (a.method) j["loft"] = method_options_to_json(*a.method);
  write_file_atomic(dir / "adapter_config.json", j.dump(2) + "\n");
}

}  // namespace loft
