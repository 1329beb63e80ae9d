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

}  // namespace

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
