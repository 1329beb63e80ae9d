// Sizes checked against the checkpoint and the machine before finetune allocates anything: a
// --seq beyond the model's positions, or a micro-batch whose activations alone exceed the
// device's memory, is a one-line usage error instead of an out-of-memory crash or a hang.
#pragma once
#include <cstdint>

#include "engine/peft/method.h"
#include "engine/tensor/device.h"
#include "models/llama/config.h"
#include "models/llama/memory_estimate.h"

namespace loft::app {

// The estimate_training_memory entry of method `m` (batch rows `micro`, `seq` tokens each) on
// `device` (a GPU's bf16, or the CPU's f32); `shard_world`: --shard-backbone's ranks.
llama::MethodMemory method_estimate(const llama::LlamaConfig& cfg, const MethodOptions& m,
                                    int64_t micro, int64_t seq, bool grad_checkpointing,
                                    Device device, bool checkpoint_offload = true,
                                    int64_t token_tile = llama::kDefaultTokenTile, int host_share = 1,
                                    int shard_world = 1);

// Throws UsageError when `seq` exceeds max_position_embeddings, the estimated activations of
// one micro-batch exceed the memory of `device` (the GPU's, or the host's RAM on the CPU), what
// waits in pinned host memory does not fit the host (check_host_fits), on the CPU the whole
// estimated peak does not fit the RAM (check_cpu_fits), or, under --gpu-memory-limit, the whole
// estimated peak does not fit the cap.
void check_run_fits(const llama::LlamaConfig& cfg, const MethodOptions& m, int64_t micro,
                    int64_t seq, bool grad_checkpointing, Device device, bool checkpoint_offload = true,
                    int64_t token_tile = llama::kDefaultTokenTile, int host_share = 1,
                    int shard_world = 1);

// UsageError when the offloaded block inputs and the host-side embedding table of `e`, times the
// `host_share` replicas on this host, take more than 3/4 of `host_bytes` (the machine's RAM; 0:
// unknown, no check).
void check_host_fits(const llama::MethodMemory& e, int64_t micro, int64_t seq, int64_t host_bytes,
                     int host_share = 1);

// UsageError when a run on the CPU (weights in f32) is estimated to need more than the machine's
// `host_bytes` of RAM in all (0: unknown, no check): the kernel would kill it part way, with no
// word of why (bench step --shape llama-70b on a workstation without a GPU).
void check_cpu_fits(const llama::MethodMemory& e, int64_t host_bytes);

}  // namespace loft::app
