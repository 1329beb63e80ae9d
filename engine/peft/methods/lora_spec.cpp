// lora: bf16 LoRA on the dense frozen weight (docs/methods.md, "LoRA (bf16 reference)").
#include "engine/peft/frozen_linear.h"
#include "engine/peft/method_spec.h"

namespace loft {

LinearFactory lora_family_factory(const MethodOptions& opt, std::mt19937_64& rng, FrozenStore store) {
  // Every frozen projection, adapted or not, is stored the method's way.
  return [opt, &rng, store](const std::string& name, const std::string& target,
                            WeightSource weight) -> std::unique_ptr<AdaptedLinear> {
    auto frozen = store(name, weight);
    if (!opt.targets.count(target)) return std::make_unique<FrozenLinear>(std::move(frozen));
    return std::make_unique<LoraLinear>(name, std::move(frozen), opt.lora, rng);
  };
}

namespace {

class LoraSpec : public MethodSpec {
 public:
  std::string name() const override { return "lora"; }
  // docs/methods.md: the QLoRA recipe.
  MethodDefaults defaults() const override { return {64, 16.0f, 2e-4, "constant", 0, 0.3, 16}; }
  std::vector<MethodMemoryRow> memory_rows(const ProjectionSizes& s) const override {
    return {{"lora-bf16", "bf16 W", memory_mul(s.compute_bytes, s.weights), s.lora()}};
  }
  std::string memory_row(const MethodOptions&) const override { return "lora-bf16"; }
  LinearFactory linear_factory(const MethodOptions& opt, std::mt19937_64& rng) const override {
    return lora_family_factory(opt, rng, [](const std::string&, const WeightSource& w) { return dense_weight(w.dense()); });
  }
};

}  // namespace

LOFT_DEFINE_METHOD_SPEC(lora, LoraSpec)

}  // namespace loft
