// qlora: LoRA on an NF4-DQ frozen weight (docs/methods.md, "QLoRA baseline"; engine/peft/nf4_weight.h).
#include "engine/peft/method_spec.h"
#include "engine/peft/nf4_weight.h"

namespace loft {

namespace {

class QloraSpec : public MethodSpec {
 public:
  std::string name() const override { return "qlora"; }
  MethodDefaults defaults() const override { return qlora_recipe(); }
  std::string foreign_flag_note(const std::string& flag) const override {
    return flag == "--backbone" ? "; qlora already stores its backbone NF4" : "";
  }
  MethodMemoryRow memory_row(const ProjectionSizes& s, const MethodOptions&) const override {
    // Each product decodes its W to the compute dtype first: one projection's worth at a time.
    MethodMemoryRow row{"qlora-nf4", "NF4 W with double quantization (4.127 bits/param)", s.nf4_bytes, s.lora()};
    row.scratch_bytes = memory_mul(s.compute_bytes, s.largest_projection);
    return row;
  }
  LinearFactory linear_factory(const MethodOptions& opt, std::mt19937_64& rng) const override {
    return lora_family_factory(opt, rng, [](const std::string&, const WeightSource& w) { return nf4_weight(w.dense()); });
  }
  Tensor export_backbone(const Tensor& w, const MethodOptions&) const override {
    return frozen_weight_f32(*nf4_weight(w));
  }
  bool quantized_backbone() const override { return true; }
};

}  // namespace

LOFT_DEFINE_METHOD_SPEC(qlora, QloraSpec)

}  // namespace loft
