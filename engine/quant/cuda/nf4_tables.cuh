// The NF4 levels, the dynamic map and their thresholds as one kernel parameter, so the CUDA
// kernels search and decode with the CPU's exact tables. Include only from .cu.
#pragma once
#include <algorithm>

#include "engine/quant/nf4.h"

namespace loft {

struct Nf4Tables {
  float levels[16];
  float level_thresholds[15];
  float map[256];
  float map_thresholds[255];
};

inline const Nf4Tables& nf4_device_tables() {
  static const Nf4Tables t = [] {
    Nf4Tables t{};
    std::copy(kNf4Levels.begin(), kNf4Levels.end(), t.levels);
    std::copy(nf4_thresholds().begin(), nf4_thresholds().end(), t.level_thresholds);
    std::copy(dynamic_map().begin(), dynamic_map().end(), t.map);
    std::copy(dynamic_map_thresholds().begin(), dynamic_map_thresholds().end(), t.map_thresholds);
    return t;
  }();
  return t;
}

}  // namespace loft
