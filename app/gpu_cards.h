// The cards `loft info --card` plans for: named GPUs with their memory, or any SIZE, and
// whether a method's estimated training peak fits one.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace loft::app {

struct GpuCard {
  std::string id;     // what --card takes: "rtx4090" ("" for a SIZE)
  std::string label;  // "RTX 4090 (24 GiB)"
  int64_t bytes = 0;
};

// Every named card, in the order `loft info --help` lists them.
const std::vector<GpuCard>& gpu_cards();
// Their ids, comma-separated, for help and errors.
std::string gpu_card_ids();

// A card id (any case) or a SIZE (engine/core/byte_size.h); UsageError naming --card.
GpuCard parse_gpu_card(const std::string& text);

// What the estimate leaves out but a run holds on any card: the CUDA context, cuBLAS/cuBLASLt
// handles and loft's 32 MiB GEMM workspace (docs/memory.md; a --gpu-memory-limit run measures
// the real figure and counts it). 768 MiB: an H200 under CUDA 13 measured 623 MiB after a
// long-context llama3-8b step, over the 512 MiB this was, which made a README cell fail its run.
constexpr int64_t kRuntimeAllowance = int64_t(768) << 20;

struct CardFit {
  bool fits = false;
  int64_t headroom = 0;  // card - estimate - kRuntimeAllowance; negative: short by that much
};
CardFit card_fit(int64_t estimated_peak, const GpuCard& card);

}  // namespace loft::app
