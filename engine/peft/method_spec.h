// The method registry: each fine-tuning method is one MethodSpec, defined beside its numerics
// (engine/methods/<name>/<name>_spec.cpp: docs/methods-layout.md) and listed once in
// engine/peft/method_registry.cpp. The app, the model loader, the memory estimate and the exporters
// ask the spec; none names a method.
#pragma once
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/peft/frozen_weight.h"
#include "engine/peft/method.h"
#include "engine/peft/transposed_codes.h"

namespace loft {

class JsonFields;

// One command-line option of a method (finetune, bench), read as text and parsed by the method.
struct MethodFlag {
  std::string name;          // "--halo-level"
  std::string help;          // what it sets; the command adds its default
  std::string default_text;  // "2", "the rank"
  // Integer options: the accepted range, checked as the command line is read.
  std::optional<std::pair<int64_t, int64_t>> int_range = std::nullopt;
  // A switch takes no value: given, `set` receives "true".
  bool is_switch = false;
  // Stores a value into the options; UsageError naming the option for a bad one.
  std::function<void(MethodOptions&, const std::string&)> set = nullptr;
  // The value the options hold, as `set` reads it.
  std::function<std::string(const MethodOptions&)> get = nullptr;
  // A non-default value under a method that does not take this option is an error rather than
  // ignored: the run would silently not be what was asked (--backbone nf4 under lora).
  bool refused_elsewhere = false;
};

// A model's adapted projections, summed over its layers, for the memory estimate.
struct ProjectionSizes {
  int64_t weights = 0;        // Σ out·in
  int64_t nf4_bytes = 0;      // Σ NF4-DQ bytes of each projection tensor
  int64_t largest_layer = 0;  // one layer's Σ out·in
  // The largest out·in: a decoded weight's elements, and the bytes of the shared scratch a
  // transposed weight's codes (one byte each) are made in for a dX GEMM (quant::TransposeScratch).
  int64_t largest_projection = 0;
  int64_t compute_bytes = 2;       // the compute dtype's element: bf16 on a GPU, f32 on the CPU
  int64_t rank_in = 0;        // r·Σ in  (A's elements)
  int64_t rank_out = 0;       // r·Σ out (B's elements)
  int64_t lora() const;       // rank_in + rank_out
  // One layer's projections {out, in} and the number of layers, for a method whose store pads
  // each projection's shape.
  std::vector<std::pair<int64_t, int64_t>> layer_shapes = {};
  int64_t layers = 0;
};

// What a method keeps for its projections: frozen bytes and trainable parameters.
struct MethodMemoryRow {
  std::string name;         // "halo-int8": the method and the form it stores W in
  std::string description;  // how the frozen projections are held
  int64_t frozen_bytes = 0;  // resident: what --shard-backbone spreads over the ranks
  int64_t trainable = 0;
  // The LoRA family saves each projection's input for its backward and keeps compute-dtype copies
  // of A and B for the GEMMs; a method that does neither (FALQON) says so. Bytes per trainable
  // parameter it keeps beyond the 16 of fp32 value, grad and AdamW moments: e.g. FALQON's ΣΔB.
  bool saves_inputs = true;
  bool compute_copies = true;
  int64_t extra_bytes_per_trainable = 0;
  // What one product's backward adds per token beyond the LoRA family's (HOT: dY rotated to fp32,
  // its codes and the int32 accumulator of the dX product), counted over a token tile.
  int64_t working_bytes_per_token = 0;
  // The scratch one frozen product decodes or transposes its codes into (the largest
  // projection's): every device holds it whole, sharded or not.
  int64_t scratch_bytes = 0;
};

// 64-bit arithmetic for the memory estimate: UsageError instead of wrapping on absurd sizes.
int64_t memory_mul(int64_t a, int64_t b);
int64_t memory_add(int64_t a, int64_t b);

class MethodSpec {
 public:
  virtual ~MethodSpec() = default;
  virtual std::string name() const = 0;  // --method
  virtual MethodDefaults defaults() const = 0;

  // Options (finetune, bench): flags in help order; bench's "name:variant" items.
  virtual std::vector<MethodFlag> flags() const { return {}; }
  // Whether flags() has the option `flag` ("--backbone").
  bool takes_flag(const std::string& flag) const;
  virtual bool apply_variant(MethodOptions&, const std::string& variant) const {
    (void)variant;
    return false;
  }
  virtual std::string variants_help() const { return ""; }     // "reset|accumulate"
  virtual std::vector<std::string> variant_examples() const { return {}; }  // {"falqon:reset"}
  // What the method fixes regardless of the command line.
  virtual void apply_invariants(MethodOptions&) const {}
  // UsageError for options this method cannot build (the one check of its own options).
  virtual void validate(const MethodOptions&) const {}
  // Appended to the refusal of another method's flag under this one ("; qlora already ...").
  virtual std::string foreign_flag_note(const std::string& flag) const {
    (void)flag;
    return "";
  }

  // The adapter record ("loft" in adapter_config.json): the method's own object, if any.
  virtual void write_record(const MethodOptions&, nlohmann::json& /*loft*/) const {}
  // `loft` is the record; errors name the field. Records written before a field existed must
  // still read (a missing field keeps its old meaning).
  virtual void read_record(const JsonFields& /*loft*/, MethodOptions&) const {}

  // Descriptions: finetune's plan ("level 2, fp8, backbone nf4"), an adapter note ("level 1,
  // int8"), bench's options object. Empty: nothing beyond the name.
  virtual std::string plan_detail(const MethodOptions&) const { return ""; }
  virtual std::string brief_detail(const MethodOptions&) const { return ""; }
  virtual void bench_options(const MethodOptions&, nlohmann::ordered_json&) const {}

  // Memory (the plan, the fit check): the row `opt` trains with.
  virtual MethodMemoryRow memory_row(const ProjectionSizes&, const MethodOptions& opt) const = 0;
  // Every form the method can store W in (loft info): by default the one row of its default
  // options; a method whose options choose the form lists each.
  virtual std::vector<MethodMemoryRow> memory_rows(const ProjectionSizes& s) const {
    return {memory_row(s, MethodOptions{})};
  }

  // A choice the method leaves to the memory a run has (FALQON's kept transposed codes): made
  // here, once the run's model and devices are known (RunPlan::resolve_memory_choices), asking
  // `fits` whether the run with the given options leaves room on every device.
  using MemoryFits = std::function<bool(const MethodOptions&)>;
  virtual void resolve_memory_choices(MethodOptions&, const MemoryFits&) const {}

  // Builds the projections (make_linear_factory validates first).
  virtual LinearFactory linear_factory(const MethodOptions&, std::mt19937_64& rng) const = 0;

  // Export. A pair method's adapter is its PEFT A/B, merged onto export_backbone(W) (W exact F32
  // [out, in] on the CPU: the backbone as the adapter trained against it); otherwise the trained
  // projection is rebuilt from the method state and its PEFT pair is a fit.
  virtual bool pair_adapter() const { return true; }
  virtual Tensor export_backbone(const Tensor& w, const MethodOptions&) const { return w; }
  // The adapter trained against a quantized backbone (an export gap warning says so).
  virtual bool quantized_backbone() const { return false; }
};

// The QLoRA paper's recipe, which the LoRA family keeps: methods that change only how the frozen
// weight is stored or multiplied (lora, qlora, hot) train with it.
inline MethodDefaults qlora_recipe() {
  return {.rank = 64, .alpha = 16.0f, .lr = 2e-4, .schedule = "constant", .warmup = 0, .max_grad_norm = 0.3,
          .batch = 16};
}

// Defines name##_spec(), the registry's entry point to the method's one spec object.
#define LOFT_DEFINE_METHOD_SPEC(name, Spec) \
  const MethodSpec& name##_spec() {         \
    static const Spec spec;                 \
    return spec;                            \
  }

// Every registered method, in registry order (the order `loft info` and the help list them).
const std::vector<const MethodSpec*>& method_specs();
// nullptr for an unknown name.
const MethodSpec* find_method_spec(const std::string& name);
// UsageError naming --method and the known names for an unknown one.
const MethodSpec& method_spec(const std::string& name);
// "lora, qlora, falqon, halo", or with " or " before the last.
std::string method_name_list(const char* last_separator = ", ");

// The LoRA family's factory (engine/peft/lora_family.cpp): each projection's frozen weight stored
// by `store` (given the module name, e.g. for a per-projection seed), and a LoraLinear on the
// targets.
using FrozenStore =
    std::function<std::unique_ptr<FrozenWeight>(const std::string& name, const WeightSource&)>;
LinearFactory lora_family_factory(const MethodOptions& opt, std::mt19937_64& rng, FrozenStore store);

// The whole of `v` as an int; UsageError naming `flag` otherwise.
int parse_int_flag(const std::string& flag, const std::string& v);

// One flag of a method's own options struct T: `field` reads and writes it, `parse`/`print`
// convert text.
template <class T, class V>
MethodFlag method_flag(std::string name, std::string help, std::string default_text,
                       V T::*field, std::function<V(const std::string&)> parse,
                       std::function<std::string(V)> print) {
  MethodFlag f{std::move(name), std::move(help), std::move(default_text)};
  f.set = [field, parse](MethodOptions& m, const std::string& v) { m.get<T>().*field = parse(v); };
  f.get = [field, print](const MethodOptions& m) { return print(m.get<T>().*field); };
  return f;
}
// An integer flag in [lo, hi].
template <class T>
MethodFlag int_method_flag(std::string name, std::string help, std::string default_text,
                           int T::*field, int lo, int hi) {
  const std::string flag = name;
  MethodFlag f = method_flag<T, int>(
      std::move(name), std::move(help), std::move(default_text), field,
      [flag](const std::string& v) { return parse_int_flag(flag, v); },
      [](int v) { return std::to_string(v); });
  f.int_range = std::pair<int64_t, int64_t>{lo, hi};
  return f;
}
// A transposed-codes flag (--falqon-transposed, --halo-transposed): auto, keep or per-step.
template <class T>
MethodFlag transposed_codes_flag(std::string name, std::string help, TransposedCodes T::*field) {
  const std::string flag = name;
  return method_flag<T, TransposedCodes>(
      std::move(name), std::move(help), "auto", field,
      [flag](const std::string& v) { return parse_transposed_codes(flag, v); },
      [](TransposedCodes t) { return std::string(transposed_codes_name(t)); });
}
// Resolves an auto transposed-codes choice for the run (MethodSpec::resolve_memory_choices): keep
// where the run's estimate with the kept copies fits, per_step otherwise; a given choice stays.
template <class T>
void keep_transposed_where_it_fits(MethodOptions& m, const MethodSpec::MemoryFits& fits, TransposedCodes T::*field) {
  if (m.get<T>().*field != TransposedCodes::auto_choice) return;
  MethodOptions keep = m;
  keep.get<T>().*field = TransposedCodes::keep;
  m.get<T>().*field = fits(keep) ? TransposedCodes::keep : TransposedCodes::per_step;
}

}  // namespace loft
