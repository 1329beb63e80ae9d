// The options a fine-tuning run's method is built from, and the factory that builds each model
// projection for it. The methods themselves (names, defaults, flags, records, ...) are the
// registry's (engine/peft/method_spec.h); nothing here names one.
#pragma once
#include <any>
#include <map>
#include <random>
#include <set>
#include <string>
#include <typeindex>
#include <vector>

#include "engine/peft/adapted_linear.h"
#include "engine/peft/lora_linear.h"

namespace loft {

// Hyper-parameters a method brings when the user does not override them. No member defaults:
// each spec names every field (designated initialisers; -Wextra warns of one left out).
struct MethodDefaults {
  int rank;
  float alpha;
  double lr;
  std::string schedule;
  int64_t warmup;
  double max_grad_norm;
  int64_t batch;
};

// The registered method names, in registry order; the first is the default.
const std::vector<std::string>& method_names();
const std::string& default_method();
// UsageError naming --method for an unknown name.
MethodDefaults method_defaults(const std::string& method);

// The seven projections a Llama layer has, in Hugging Face's names.
const std::vector<std::string>& all_lora_targets();
// "all" or a comma list of projection names; UsageError naming --lora-targets on a bad name.
std::set<std::string> parse_lora_targets(const std::string& spec);

struct MethodOptions {
  std::string method = default_method();
  LoraOptions lora;
  std::set<std::string> targets;  // projections that get an adapter; the others stay frozen
  uint64_t seed = 0;              // a method's own random choices (FALQON's SVD directions)

  // A method's own options (HaloOptions, FalqonOptions, ...), one object per type, made with its
  // defaults on first use. Kept by type so that adding a method adds no field here.
  template <class T>
  T& get() {
    std::any& a = own[std::type_index(typeid(T))];
    if (!a.has_value()) a = T{};
    return std::any_cast<T&>(a);
  }
  template <class T>
  const T& get() const {
    static const T defaults{};
    auto it = own.find(std::type_index(typeid(T)));
    return it == own.end() ? defaults : std::any_cast<const T&>(it->second);
  }
  std::map<std::type_index, std::any> own = {};
};

// Settles what a method fixes regardless of the command line (FALQON: alpha = rank, so its
// adapter's PEFT α/r is 1). Call once the options are chosen.
void apply_method_invariants(MethodOptions& opt);
// UsageError for an unknown method, options it cannot build, or another method's option that
// would be silently ignored (--backbone nf4 under lora).
void validate_method_options(const MethodOptions& opt);

// Builds projections for `opt.method` (validated first): an adapter on each target, a
// FrozenLinear elsewhere, each stored the method's way. `rng` (kept alive by the caller) draws the
// LoRA adapters' initial values.
LinearFactory make_linear_factory(const MethodOptions& opt, std::mt19937_64& rng);

}  // namespace loft
