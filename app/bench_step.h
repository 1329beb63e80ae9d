// `loft bench step`: training steps timed per method (app/bench_step.cpp).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "app/method_flags.h"
#include "engine/peft/method.h"
#include "models/llama/config.h"
#include "models/llama/memory_estimate.h"

namespace loft::app {

struct StepBenchOptions {
  std::string shape, model, methods = default_method(), device;
  std::string gpus;               // --gpus N|LIST: data-parallel steps, the batch on every GPU
  bool shard_backbone = false;    // --shard-backbone: each GPU keeps 1/N of the frozen codes
  int64_t grad_bucket_mib = 25;   // --grad-bucket-mib: the gradient sum's buckets (0: after the backward)
  MethodFlagValues method_flags;  // the methods' own options, as given
  int64_t batch = 4, seq = 512, steps = 8, warmup = 3, profiled = 2;
  bool profile_ops = false;  // --profile-ops: the profiled steps also time each op in its part
  int rank = 64;
  float alpha = 16.0f;
  double max_grad_norm = -1;  // -1: the method's default, as finetune
  bool grad_checkpointing = false, json = false;
  int64_t token_tile = llama::kDefaultTokenTile;  // --token-tile
  bool checkpoints_on_gpu = false;  // --checkpoints-on-gpu: no CheckpointOffload
  uint64_t seed = 0;
  double prompt_fraction = 0;  // --prompt-fraction: each row's first tokens without a target
};

// Steps a bench may take (timed, untimed, profiled): far more than any timing needs, so a typo
// such as --warmup 1e18 is refused instead of running for ever.
constexpr int64_t kMaxBenchSteps = 100000;

void run_step_bench(const StepBenchOptions& o);

// The config of --shape NAME or --model DIR (exactly one given); UsageError naming the option.
llama::LlamaConfig bench_config(const std::string& shape, const std::string& model);

// "a, b, c": the names a bench option's help and errors list.
std::string joined(const std::vector<std::string>& v);

}  // namespace loft::app
