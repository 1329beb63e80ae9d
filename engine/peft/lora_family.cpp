// The LoRA family's factory (engine/peft/method_spec.h): lora, qlora, halo and hot each store the
// frozen weight their way and put a LoraLinear on the targets, so it is shared, not LoRA's own.
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

}  // namespace loft
