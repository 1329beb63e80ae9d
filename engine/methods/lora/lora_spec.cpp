// lora: bf16 LoRA on the dense frozen weight (docs/methods.md, "LoRA (bf16 reference)").
#include "engine/peft/method_spec.h"

namespace loft {

namespace {

class LoraSpec : public MethodSpec {
 public:
  std::string name() const override { return "lora"; }
  MethodDefaults defaults() const override { return qlora_recipe(); }
  MethodMemoryRow memory_row(const ProjectionSizes& s, const MethodOptions&) const override {
    return {"lora-bf16", "bf16 W", memory_mul(s.compute_bytes, s.weights), s.lora()};
  }
  LinearFactory linear_factory(const MethodOptions& opt, std::mt19937_64& rng) const override {
    return lora_family_factory(opt, rng, [](const std::string&, const WeightSource& w) { return dense_weight(w.dense()); });
  }
};

}  // namespace

LOFT_DEFINE_METHOD_SPEC(lora, LoraSpec)

}  // namespace loft
