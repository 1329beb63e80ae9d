#include "engine/peft/adapted_linear.h"

#include <algorithm>

namespace loft {

void after_steps(const std::vector<AdaptedLinear*>& linears) {
  // Projections' after-steps are independent of each other, so grouping may reorder them.
  std::vector<std::pair<AdaptedLinear::AfterStepAll, std::vector<AdaptedLinear*>>> groups;
  for (AdaptedLinear* lin : linears) {
    const AdaptedLinear::AfterStepAll all = lin->after_step_all();
    if (!all) {
      lin->after_step();
      continue;
    }
    auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == all; });
    if (it == groups.end()) it = groups.insert(groups.end(), {all, {}});
    it->second.push_back(lin);
  }
  for (const auto& [all, same_method] : groups) all(same_method);
}

}  // namespace loft
