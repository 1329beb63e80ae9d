// RoPE inverse frequencies as Hugging Face computes them (default and llama3 scaling), so that
// positions map to exactly the angles transformers uses.
#pragma once
#include <string>
#include <vector>

namespace loft {

struct RopeScaling {
  std::string type = "default";  // "default" | "llama3" | "linear"
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int original_max_position_embeddings = 8192;
};

// inv_freq[i] = 1 / theta^(2i/head_dim), i < head_dim/2, then rescaled per `scaling`.
std::vector<float> rope_inv_freq(int head_dim, double theta, const RopeScaling& scaling);

}  // namespace loft
