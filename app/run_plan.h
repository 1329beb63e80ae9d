// A training run resolved once from what its command line gave: the method (an --init-adapter's
// record, the methods' own flags, bench's ":variant" items), the method's defaults for every
// hyper-parameter left out, and the memory it needs against the device. finetune trains it,
// bench times it, and `finetune --plan` prints it as JSON (the studio's Train page shows that
// before a run starts), so the three cannot disagree about what a command line means.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "app/method_flags.h"
#include "engine/peft/method.h"
#include "engine/peft/peft_adapter.h"
#include "engine/tensor/device.h"
#include "models/llama/config.h"
#include "models/llama/memory_estimate.h"

namespace loft::app {

// As given: 0, -1 or "" where the command line left a value out.
struct RunRequest {
  std::string method;        // "": the default method, or the --init-adapter's record
  std::string init_adapter;  // a PEFT adapter folder to start from
  int rank = 0;              // 0: the method's default (or the adapter's r)
  float alpha = 0;
  std::string targets = "all";
  MethodFlagValues method_flags;  // the methods' own options, as given
  uint64_t seed = 0;
  int64_t batch = 0, micro_batch = 0, warmup = -1, steps = 0, seq = 512;
  double lr = 0, max_grad_norm = -1;
  std::string schedule;
  bool grad_checkpointing = false, checkpoint_offload = true;
  int64_t token_tile = llama::kDefaultTokenTile;  // LlamaModel::set_token_tile; 0: no tiling
  bool variants = false;  // bench: --method items may carry ":variant"s (halo:nf4)
};

// The share of a GPU's memory a memory-for-speed choice may fill by loft's estimate: the rest is
// the estimate's error and the allocator's fragmentation, so a choice never turns a run that fits
// into one that runs out.
inline constexpr double kMemoryRoom = 0.85;

struct RunPlan {
  MethodOptions method;
  std::string init_adapter;         // its folder, "" for none
  std::optional<PeftAdapter> init;  // the --init-adapter, loaded
  int64_t batch = 0, micro_batch = 0, warmup = 0, steps = 0, seq = 0;  // steps 0: one pass, counted at start
  double lr = 0, max_grad_norm = 0;
  std::string schedule;
  bool grad_checkpointing = false, checkpoint_offload = true;
  int64_t token_tile = llama::kDefaultTokenTile;
  int shard_world = 1;  // --shard-backbone: the ranks the frozen codes are spread over (memory)

  int64_t grad_accum() const { return batch / micro_batch; }
  // models/llama/memory_estimate's peak of one micro-batch's step on `device`, one of
  // `host_share` replicas on this host (they share its RAM for the offloaded attention tensors).
  llama::MethodMemory memory(const llama::LlamaConfig& cfg, Device device, int host_share = 1) const;
  // The same estimate for the method options `m` in place of `method` (a choice being weighed).
  llama::MethodMemory memory_with(const MethodOptions& m, const llama::LlamaConfig& cfg, Device device,
                                  int host_share = 1) const;
  // UsageError when it cannot fit `device` (app/run_limits.h: check_run_fits); `host_share`
  // replicas on this host each pin their own checkpointed inputs.
  void check_fits(const llama::LlamaConfig& cfg, Device device, int host_share = 1) const;
  // Settles what the method leaves to the memory at hand (MethodSpec::resolve_memory_choices:
  // FALQON's kept transposed codes), each of `devices` holding one replica: a choice is taken
  // where the estimate with it, plus what the GPU already holds, stays within kMemoryRoom of the
  // card (or of --gpu-memory-limit) on every device. On the CPU the lean choice stays.
  void resolve_memory_choices(const llama::LlamaConfig& cfg, const std::vector<Device>& devices,
                              int host_share = 1);
  // Every resolved value, the estimate and whether it fits `device` (fit_error says why not;
  // fits is null, and fit_error says so, for a GPU this machine lacks and no cap stands for).
  nlohmann::ordered_json to_json(const llama::LlamaConfig& cfg, Device device) const;
};

// UsageError for an unknown method, a bad option of one, a batch that is not a multiple of the
// micro-batch, or --lora-rank/--lora-alpha contradicting the --init-adapter. `device` decides the
// default micro-batch (the whole batch on the CPU, at most 4 rows on a GPU).
RunPlan plan_run(const RunRequest& r, Device device);

}  // namespace loft::app
