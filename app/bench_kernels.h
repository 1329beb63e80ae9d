// `loft bench kernels`: times the kernels a training step is made of, one at a time, at the
// sizes a model shape gives them (tokens = batch·seq), so a slow part of the step breakdown can be
// traced to one kernel and compared with what the memory system or tensor cores allow. `only`
// (empty: all) keeps the rows of the kernels it names (a row's first word: attention, gemm, ...).
#pragma once
#include <iosfwd>
#include <string>
#include <vector>

#include "engine/tensor/device.h"
#include "models/llama/config.h"

namespace loft::app {

void run_kernel_bench(const llama::LlamaConfig& cfg, int64_t batch, int64_t seq, Device device,
                      int repeats, const std::vector<std::string>& only, const std::string& title,
                      std::ostream& out);

}  // namespace loft::app
