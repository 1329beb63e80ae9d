// --gpu-memory-limit SIZE at the command line: registered beside --device on every command that
// computes (add_device_option), applied to the device layer (engine/device/memory_limit.h), and
// the refusal before training of a run whose estimated peak does not fit under it.
#pragma once
#include <cstdint>
#include <string>

#include "app/cli_fwd.h"
#include "engine/tensor/device.h"
#include "models/llama/memory_estimate.h"

namespace loft::app {

// Adds --gpu-memory-limit to `cmd`. Parsing the command clears the cap; the option (command
// line or --config) sets it, a bad SIZE being a usage error naming the option. `device` is the
// command's --device value: a run that lands on the CPU is told the cap applies to GPUs only.
void add_gpu_memory_limit_option(CLI::App& cmd, const std::string& device);

// What this process already holds on GPU `device` beside the estimate's parts: the CUDA context,
// libraries and loft's allocated blocks.
int64_t held_on_gpu(Device device);

// The room GPU `device` gives a run: its memory (or the cap, when smaller) and what this process
// holds there already. A GPU this machine lacks (a plan made for another machine: `finetune --plan
// --gpus 2` on a laptop) is a card of --gpu-memory-limit holding kRuntimeAllowance, or, without a
// cap, nothing known (card 0): then nothing is checked against it.
struct GpuRoom {
  int64_t card = 0, held = 0;
  bool absent = false;  // a GPU this machine lacks: card and held stand for a capped card's
  bool known() const { return card > 0; }
};
GpuRoom gpu_room(Device device);

// Under a cap, on a GPU: UsageError when the estimate `e` of one micro-batch of `micro` x `seq`
// plus what the process already holds there (the CUDA context, libraries, loft's blocks) is more
// than the cap, naming the cap, the estimate and its parts.
void check_fits_gpu_memory_limit(const llama::MethodMemory& e, int64_t micro, int64_t seq,
                                 bool grad_checkpointing, Device device);

}  // namespace loft::app
