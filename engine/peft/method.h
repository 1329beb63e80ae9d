// The fine-tuning methods loft offers, their defaults (METHODS.md), and the factory that builds
// each model projection for the chosen one.
#pragma once
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "engine/peft/adapted_linear.h"
#include "engine/peft/falqon_linear.h"
#include "engine/peft/halo_weight.h"
#include "engine/peft/lora_linear.h"

namespace loft {

// Hyper-parameters a method brings when the user does not override them.
struct MethodDefaults {
  int rank = 64;
  float alpha = 16.0f;
  double lr = 2e-4;
  std::string schedule = "constant";
  int64_t warmup = 0;
  double max_grad_norm = 0.3;
  int64_t batch = 16;
};

// "lora", "qlora", "falqon", "halo".
const std::vector<std::string>& method_names();
// UsageError naming --method for an unknown name.
MethodDefaults method_defaults(const std::string& method);

// The seven projections a Llama layer has, in Hugging Face's names.
const std::vector<std::string>& all_lora_targets();
// "all" or a comma list of projection names; UsageError naming --lora-targets on a bad name.
std::set<std::string> parse_lora_targets(const std::string& spec);

struct MethodOptions {
  std::string method = "lora";
  LoraOptions lora;
  std::set<std::string> targets;  // projections that get an adapter; the others stay frozen
  HaloOptions halo;               // --halo-level, --halo-format, --backbone (method halo)
  FalqonOptions falqon;           // --falqon-topk, --falqon-buffer (method falqon; rank = lora.rank)
};

// Settles what a method fixes regardless of the command line: FALQON has no α/r scaling, so its
// alpha is its rank and the adapter's PEFT α/r is 1. Call once the options are chosen.
void apply_method_invariants(MethodOptions& opt);

// --halo-format: "fp8" (E4M3 for X, W and dY, as HALO does) or "int8". UsageError otherwise.
quant::LowpFormat parse_halo_format(const std::string& name);

// Builds projections for `opt.method`: an adapter on each target, a FrozenLinear elsewhere; the
// frozen weight dense (lora), NF4-DQ (qlora) or Hadamard-rotated FP8/INT8 (halo; NF4-DQ under
// --backbone nf4). FALQON's targets are FalqonLinear (melded FP8 backbone + ΔB buffer, seeded by
// opt.falqon.seed); its other projections stay dense. `rng` (kept alive by the caller) draws the
// LoRA adapters' initial values. UsageError for an unknown method, --halo-level outside 0..2,
// a negative --falqon-topk, or --backbone nf4 with a method other than halo.
LinearFactory make_linear_factory(const MethodOptions& opt, std::mt19937_64& rng);

}  // namespace loft
