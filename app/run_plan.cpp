#include "app/run_plan.h"

#include <iostream>

#include "app/gpu_memory_limit.h"
#include "app/run_limits.h"
#include "engine/device/device_info.h"
#include "engine/core/error.h"
#include "engine/ops/ops.h"
#include "engine/peft/method_record.h"
#include "engine/peft/method_spec.h"
#include "models/llama/loading.h"

namespace loft::app {

namespace {

// The method: an --init-adapter's record (or LoRA for a PEFT-made one) unless --method names
// another; the methods' options given explicitly override the recorded ones.
MethodOptions resolve_method(const RunRequest& r, std::optional<PeftAdapter>& init) {
  MethodOptions m;
  if (!r.init_adapter.empty()) {
    init = load_peft_adapter(r.init_adapter);
    m = llama::method_options_for(*init, r.method, r.init_adapter, std::cerr);
    if ((r.rank && r.rank != m.lora.rank) || (r.alpha && r.alpha != m.lora.alpha))
      throw UsageError(cat("--init-adapter ", r.init_adapter, " has r=", m.lora.rank,
                           " alpha=", m.lora.alpha, ", which --lora-rank/--lora-alpha contradict"));
  } else {
    const std::string name = r.variants ? r.method.substr(0, r.method.find(':')) : r.method;
    if (!name.empty()) m.method = name;  // else the default method
    const MethodDefaults d = method_defaults(m.method);
    m.lora = {r.rank ? r.rank : d.rank, r.alpha ? r.alpha : d.alpha};
    m.targets = parse_lora_targets(r.targets);
  }
  apply_method_flags(r.method_flags, m);
  if (r.variants) apply_method_variants(r.method, m);
  m.seed = r.seed;
  apply_method_invariants(m);
  validate_method_options(m);
  return m;
}

}  // namespace

RunPlan plan_run(const RunRequest& r, Device device) {
  RunPlan p;
  p.method = resolve_method(r, p.init);
  p.init_adapter = r.init_adapter;
  const MethodDefaults d = method_defaults(p.method.method);
  p.batch = r.batch ? r.batch : d.batch;
  p.micro_batch = r.micro_batch ? r.micro_batch : std::min<int64_t>(p.batch, device.is_cpu() ? p.batch : 4);
  if (p.batch % p.micro_batch != 0)
    throw UsageError(cat("--batch ", p.batch, " is not a multiple of --micro-batch ", p.micro_batch));
  p.lr = r.lr ? r.lr : d.lr;
  p.schedule = r.schedule.empty() ? d.schedule : r.schedule;
  p.warmup = r.warmup >= 0 ? r.warmup : d.warmup;
  p.max_grad_norm = r.max_grad_norm >= 0 ? r.max_grad_norm : d.max_grad_norm;
  p.steps = r.steps;
  p.seq = r.seq;
  p.grad_checkpointing = r.grad_checkpointing;
  p.checkpoint_offload = r.checkpoint_offload;
  if (r.token_tile < 0 || r.token_tile % ops::kGemmRowBlock != 0)
    throw UsageError(cat("--token-tile ", r.token_tile, " must be 0 (no tiling) or a positive multiple of ",
                         ops::kGemmRowBlock));
  p.token_tile = r.token_tile;
  return p;
}

llama::MethodMemory RunPlan::memory(const llama::LlamaConfig& cfg, Device device, int host_share) const {
  return memory_with(method, cfg, device, host_share);
}

llama::MethodMemory RunPlan::memory_with(const MethodOptions& m, const llama::LlamaConfig& cfg, Device device,
                                         int host_share) const {
  return method_estimate(cfg, m, micro_batch, seq, grad_checkpointing, device, checkpoint_offload, token_tile,
                         host_share, shard_world);
}

void RunPlan::resolve_memory_choices(const llama::LlamaConfig& cfg, const std::vector<Device>& devices,
                                     int host_share) {
  auto fits = [&](const MethodOptions& m) {
    for (const Device& d : devices) {
      const GpuRoom room = gpu_room(d);
      if (!room.known()) return false;
      const int64_t need = memory_with(m, cfg, d, host_share).total() + room.held;
      if (double(need) > kMemoryRoom * double(room.card)) return false;
    }
    return !devices.empty();
  };
  method_spec(method.method).resolve_memory_choices(method, fits);
}

void RunPlan::check_fits(const llama::LlamaConfig& cfg, Device device, int host_share) const {
  check_run_fits(cfg, method, micro_batch, seq, grad_checkpointing, device, checkpoint_offload,
                 token_tile, host_share, shard_world);
}

nlohmann::ordered_json RunPlan::to_json(const llama::LlamaConfig& cfg, Device device) const {
  const llama::MethodMemory e = memory(cfg, device);
  std::string fit_error;
  try {
    check_fits(cfg, device);
  } catch (const UsageError& err) {
    fit_error = err.what();
  }
  // A GPU this machine lacks, with no --gpu-memory-limit to stand for it: fits is null.
  const bool unchecked = fit_error.empty() && device.is_cuda() && !gpu_room(device).known();
  if (unchecked)
    fit_error = cat("not checked: this machine has no ", device.str(),
                    "; give --gpu-memory-limit SIZE to check the plan against a card of that size");
  return {{"method", method.method},
          {"method_record", method_options_to_json(method)},
          {"lora_rank", method.lora.rank},
          {"lora_alpha", method.lora.alpha},
          {"targets", method.targets},
          {"init_adapter", init_adapter.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(init_adapter)},
          {"lr", lr},
          {"schedule", schedule},
          {"warmup", warmup},
          {"max_grad_norm", max_grad_norm},
          {"batch", batch},
          {"micro_batch", micro_batch},
          {"grad_accum", grad_accum()},
          {"seq", seq},
          {"steps", steps > 0 ? nlohmann::ordered_json(steps) : nlohmann::ordered_json()},
          {"grad_checkpointing", grad_checkpointing},
          {"checkpoint_offload", checkpoint_offload},
          {"token_tile", token_tile},
          {"device", device.str()},
          {"trainable_parameters", e.adapter_params},
          {"memory_estimate",
           {{"frozen_form", e.description},
            {"total_bytes", e.total()},
            {"frozen_weights_bytes", e.frozen_weights},
            {"embeddings_bytes", e.embeddings},
            {"host_embeddings_bytes", e.host_embeddings},
            {"host_checkpoints_bytes", e.host_checkpoints},
            {"adapter_bytes", e.adapter},
            {"activations_bytes", e.activations},
            {"working_bytes", e.working}}},
          {"fits", unchecked ? nlohmann::ordered_json() : nlohmann::ordered_json(fit_error.empty())},
          {"fit_error", fit_error.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(fit_error)}};
}

}  // namespace loft::app
