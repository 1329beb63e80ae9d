// The names, defaults and parsers of the methods' options (declared in method.h, halo_weight.h
// and falqon_linear.h), kept apart from the layers they configure: reading an adapter's method
// record needs these and nothing that computes.
#include <sstream>

#include "engine/core/error.h"
#include "engine/peft/method.h"

namespace loft {

const std::vector<std::string>& method_names() {
  static const std::vector<std::string> names{"lora", "qlora", "falqon", "halo"};
  return names;
}

MethodDefaults method_defaults(const std::string& method) {
  // METHODS.md: LoRA/QLoRA follow the QLoRA recipe; FALQON and HALO their reference scripts.
  if (method == "lora" || method == "qlora") return {64, 16.0f, 2e-4, "constant", 0, 0.3, 16};
  if (method == "falqon") return {64, 16.0f, 2e-3, "constant", 0, 3.0, 16};
  if (method == "halo") return {16, 8.0f, 3e-4, "linear", 20, 0.0, 32};
  throw UsageError(cat("--method: '", method, "' is not one of lora, qlora, falqon, halo"));
}

const std::vector<std::string>& all_lora_targets() {
  static const std::vector<std::string> t{"q_proj", "k_proj",  "v_proj",  "o_proj",
                                          "gate_proj", "up_proj", "down_proj"};
  return t;
}

std::set<std::string> parse_lora_targets(const std::string& spec) {
  if (spec == "all") return {all_lora_targets().begin(), all_lora_targets().end()};
  std::set<std::string> out;
  std::stringstream ss(spec);
  for (std::string item; std::getline(ss, item, ',');) {
    if (item.empty()) continue;
    bool known = false;
    for (const auto& t : all_lora_targets()) known |= t == item;
    if (!known)
      throw UsageError(cat("--lora-targets: '", item, "' is not one of q_proj, k_proj, v_proj, ",
                           "o_proj, gate_proj, up_proj, down_proj (or 'all')"));
    out.insert(item);
  }
  if (out.empty()) throw UsageError("--lora-targets: no projection named");
  return out;
}

void apply_method_invariants(MethodOptions& opt) {
  if (opt.method == "falqon") opt.lora.alpha = float(opt.lora.rank);
}

quant::LowpFormat parse_halo_format(const std::string& name) {
  if (name == "fp8") return quant::LowpFormat::E4M3;
  if (name == "int8") return quant::LowpFormat::INT8;
  throw UsageError(cat("--halo-format: '", name, "' is not fp8 or int8"));
}

HaloBackbone parse_halo_backbone(const std::string& name) {
  if (name == "dense") return HaloBackbone::Dense;
  if (name == "nf4") return HaloBackbone::Nf4;
  throw UsageError(cat("--backbone: '", name, "' is not dense or nf4"));
}

const char* backbone_name(HaloBackbone b) { return b == HaloBackbone::Nf4 ? "nf4" : "dense"; }

FalqonOptions::Buffer parse_falqon_buffer(const std::string& name) {
  if (name == "reset") return FalqonOptions::Buffer::reset;
  if (name == "accumulate") return FalqonOptions::Buffer::accumulate;
  throw UsageError(cat("--falqon-buffer: '", name, "' is not reset or accumulate"));
}

const char* falqon_buffer_name(FalqonOptions::Buffer buffer) {
  return buffer == FalqonOptions::Buffer::accumulate ? "accumulate" : "reset";
}

}  // namespace loft
