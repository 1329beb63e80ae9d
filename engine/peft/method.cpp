#include "engine/peft/method.h"

#include <sstream>

#include "engine/peft/frozen_linear.h"
#include "engine/peft/nf4_weight.h"

namespace loft {

LinearFactory make_linear_factory(const MethodOptions& opt, std::mt19937_64& rng) {
  method_defaults(opt.method);  // UsageError for an unknown name
  if (opt.method == "falqon" && opt.falqon.topk < 0)
    throw UsageError(cat("--falqon-topk ", opt.falqon.topk, " must be >= 0 (0 = the rank)"));
  if (opt.method == "halo" && (opt.halo.level < 0 || opt.halo.level > 2))
    throw UsageError(cat("--halo-level ", opt.halo.level, " is not one of 0, 1, 2"));
  // An NF4 backbone under HALO's codes is HALO's option; QLoRA is NF4 by definition.
  if (opt.halo.backbone == HaloBackbone::Nf4 && opt.method != "halo")
    throw UsageError(cat("--backbone nf4 applies to --method halo only (got --method ", opt.method,
                         opt.method == "qlora" ? "; qlora already stores its backbone NF4" : "",
                         ")"));
  // Every frozen projection, adapted or not, is stored the method's way.
  // FALQON and HALO take the WeightSource itself (an FP8 checkpoint's codes or exact values);
  // the others store the weight dense in the compute dtype.
  return [opt, &rng](const std::string& name, const std::string& target,
                     WeightSource weight) -> std::unique_ptr<AdaptedLinear> {
    if (opt.method == "falqon") {
      if (!opt.targets.count(target)) return std::make_unique<FrozenLinear>(weight.dense());
      return std::make_unique<FalqonLinear>(name, weight, opt.lora.rank, opt.falqon);
    }
    auto frozen = opt.method == "qlora"  ? nf4_weight(weight.dense())
                  : opt.method == "halo" ? halo_weight(weight, opt.halo)
                                         : dense_weight(weight.dense());
    if (!opt.targets.count(target)) return std::make_unique<FrozenLinear>(std::move(frozen));
    return std::make_unique<LoraLinear>(name, std::move(frozen), opt.lora, rng);
  };
}

}  // namespace loft
