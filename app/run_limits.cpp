#include "app/run_limits.h"

#include <algorithm>
#include <cmath>

#include "app/gpu_memory_limit.h"
#include "engine/core/error.h"
#include "engine/device/device_info.h"

namespace loft::app {

namespace {

// GiB to one decimal, as the messages print them.
double gib(int64_t bytes) { return std::round(double(bytes) / double(int64_t(1) << 30) * 10.0) / 10.0; }

}  // namespace

void check_host_fits(const llama::MethodMemory& e, int64_t micro, int64_t seq, int64_t host_bytes,
                     int host_share) {
  const int64_t share = std::max(host_share, 1);
  if (!llama::pinned_fits_host(share * e.host_pinned(), host_bytes))
    throw UsageError(cat("--micro-batch ", micro, " x --seq ", seq, " with --grad-checkpointing keeps about ",
                         gib(e.host_checkpoints), " GiB of block inputs",
                         e.host_embeddings > 0 ? cat(" and the ", gib(e.host_embeddings), " GiB embedding table") : "",
                         share > 1 ? cat(" per GPU, for ", share, " GPUs on this host,") : "",
                         " in host memory, more than 3/4 of this machine's ", gib(host_bytes),
                         " GiB of RAM; lower --micro-batch or --seq, or add --checkpoints-on-gpu"));
}

void check_cpu_fits(const llama::MethodMemory& e, int64_t host_bytes) {
  if (host_bytes <= 0 || e.total() <= host_bytes) return;
  throw UsageError(cat("on the CPU this run needs about ", gib(e.total()), " GiB (", gib(e.frozen_weights),
                       " GiB of f32 weights, the adapter, its optimizer and the activations), more than "
                       "this machine's ", gib(host_bytes), " GiB of RAM; run it on a GPU (--device "
                       "cuda) or pick a smaller model"));
}

llama::MethodMemory method_estimate(const llama::LlamaConfig& cfg, const MethodOptions& m,
                                    int64_t micro, int64_t seq, bool grad_checkpointing,
                                    Device device, bool checkpoint_offload, int64_t token_tile,
                                    int host_share, int shard_world) {
  llama::MemoryEstimateOptions eo;
  eo.shard_world = shard_world;
  eo.batch = micro;
  eo.seq = seq;
  eo.lora_rank = m.lora.rank;
  eo.grad_checkpointing = grad_checkpointing;
  eo.checkpoint_offload = checkpoint_offload;
  eo.token_tile = token_tile;
  eo.host_bytes = device_memory_bytes(Device::cpu());
  eo.host_share = host_share;
  eo.gpu = device.is_cuda();
  // The card (or --gpu-memory-limit) less what the process holds there already (the CUDA
  // context, libraries): the attention tensors come back from host memory only within it. An
  // absent GPU without a cap: no bound.
  if (const GpuRoom room = gpu_room(device); room.known())
    eo.device_budget = std::max<int64_t>(room.card - room.held, 1);
  return llama::estimate_method_memory(cfg, eo, m);
}

void check_run_fits(const llama::LlamaConfig& cfg, const MethodOptions& m, int64_t micro,
                    int64_t seq, bool grad_checkpointing, Device device, bool checkpoint_offload,
                    int64_t token_tile, int host_share, int shard_world) {
  if (seq > cfg.max_position_embeddings)
    throw UsageError(cat("--seq ", seq, " is longer than the model's max_position_embeddings (",
                         cfg.max_position_embeddings, " in config.json)"));
  const llama::MethodMemory e =
      method_estimate(cfg, m, micro, seq, grad_checkpointing, device, checkpoint_offload, token_tile, host_share,
                      shard_world);
  check_fits_gpu_memory_limit(e, micro, seq, grad_checkpointing, device);
  check_host_fits(e, micro, seq, device_memory_bytes(Device::cpu()), host_share);
  const int64_t per_batch = e.activations + e.working;
  const int64_t machine = device.is_cuda() ? gpu_room(device).card : device_memory_bytes(device);
  if (machine > 0 && per_batch > machine)
    throw UsageError(cat("--micro-batch ", micro, " x --seq ", seq, " needs about ", gib(per_batch),
                         " GiB of activations, more than the ", gib(machine), " GiB of ",
                         device.str(), "; lower --micro-batch or --seq"));
  if (device.is_cpu()) check_cpu_fits(e, machine);
}

}  // namespace loft::app
