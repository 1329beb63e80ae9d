// How a finetune run spreads over GPUs (docs/multi-gpu.md): `--gpus N|LIST` (one process, one
// worker thread per GPU, communicators initialised together, non-blocking) or torchrun's environment variables
// (one process per GPU: rank 0's NCCL id reaches the others over TCP, then a non-blocking
// ncclCommInitRankConfig). Neither: the plain one-device run.
#pragma once
#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/parallel/grad_reducer.h"
#include "engine/parallel/launch_env.h"

namespace loft::app {

struct DataParallelSetup {
  int world = 1;
  std::vector<int> devices;  // this process's GPUs, in local-rank order
  std::vector<int> ranks;    // their ranks in the run
  std::vector<std::unique_ptr<Communicator>> comms;
  std::vector<std::unique_ptr<GradReducer>> reducers;  // one per local rank
  std::string how;  // for the plan: "2 GPUs (cuda:0, cuda:1) in this process", "rank 1 of 4 ..."

  bool active() const { return !devices.empty(); }
  bool writes() const;  // holds rank 0 (or is not data-parallel)
};

// --shard-backbone: each local rank's ShardGather over its communicator, in local-rank order (no
// entries where `on` is false). The models that hold them must go first.
std::vector<std::unique_ptr<ShardGather>> shard_gathers(const DataParallelSetup& dp, bool on);

// --gpus: "N" is the first N GPUs, "0,2" those GPUs. UsageError naming the value when it is not
// one of these, names a GPU twice, or asks for more than the `available` GPUs.
std::vector<int> parse_gpus(const std::string& spec, int available);

// --device beside data parallelism (`ranks`: "--gpus 2" or "torchrun's WORLD_SIZE"): the ranks
// pick their GPUs, so anything but "" or "auto" is a UsageError naming both.
void check_device_beside_ranks(const std::string& device, const std::string& ranks);

// Builds the communicators: from `gpus` (non-empty) or `env` (torchrun), not both (UsageError),
// and a GradReducer over each with buckets of `bucket_mib` MiB (0: all after the backward;
// --grad-bucket-mib). Every NCCL wait is bounded by `timeout`. Returns an inactive setup when neither is given. With
// torchrun's ranks and a `run_dir` (finetune's --out, claimed by rank 0), every other rank checks
// at the rendezvous that it sees that folder (engine/train/run_folder_token.h).
DataParallelSetup setup_data_parallel(const std::string& gpus,
                                      const std::optional<parallel::LaunchEnv>& env,
                                      std::chrono::milliseconds timeout,
                                      const std::filesystem::path& run_dir = {},
                                      int64_t bucket_mib = kDefaultBucketBytes >> 20);

}  // namespace loft::app
