#include "app/data_parallel_setup.h"

#include <algorithm>
#include <sstream>

#include "engine/core/error.h"
#include "engine/train/run_folder_token.h"
#include "engine/tensor/device.h"

namespace loft::app {

bool DataParallelSetup::writes() const {
  return !active() || std::find(ranks.begin(), ranks.end(), 0) != ranks.end();
}

namespace {
int parse_index(const std::string& s, const std::string& spec) {
  if (s.empty() || s.size() > 4 || !std::all_of(s.begin(), s.end(), ::isdigit))
    throw UsageError(cat("--gpus ", spec, ": expected a GPU count (2) or a list of GPUs (0,2)"));
  return std::stoi(s);
}

std::string device_list(const std::vector<int>& devices) {
  std::ostringstream os;
  for (size_t i = 0; i < devices.size(); ++i) os << (i ? ", " : "") << "cuda:" << devices[i];
  return os.str();
}
}  // namespace

std::vector<std::unique_ptr<ShardGather>> shard_gathers(const DataParallelSetup& dp, bool on) {
  std::vector<std::unique_ptr<ShardGather>> out;
  if (on)
    for (const auto& c : dp.comms) out.push_back(communicator_shard_gather(*c));
  return out;
}

std::vector<int> parse_gpus(const std::string& spec, int available) {
  std::vector<int> out;
  if (spec.find(',') == std::string::npos) {
    const int n = parse_index(spec, spec);
    if (n < 1) throw UsageError(cat("--gpus ", spec, ": at least one GPU"));
    if (n > available)
      throw UsageError(cat("--gpus ", spec, ": this machine has ", available, " GPU",
                           available == 1 ? "" : "s"));
    for (int i = 0; i < n; ++i) out.push_back(i);
    return out;
  }
  std::stringstream in(spec);
  for (std::string item; std::getline(in, item, ',');) {
    const int d = parse_index(item, spec);
    if (d >= available)
      throw UsageError(cat("--gpus ", spec, ": there is no cuda:", d, " (this machine has ",
                           available, " GPU", available == 1 ? "" : "s", ")"));
    if (std::find(out.begin(), out.end(), d) != out.end())
      throw UsageError(cat("--gpus ", spec, ": cuda:", d, " is named twice"));
    out.push_back(d);
  }
  return out;
}

void check_device_beside_ranks(const std::string& device, const std::string& ranks) {
  if (!device.empty() && device != "auto")
    throw UsageError(cat("--device ", device, " with ", ranks, ": the data-parallel ranks pick their GPUs"));
}

DataParallelSetup setup_data_parallel(const std::string& gpus,
                                      const std::optional<parallel::LaunchEnv>& env,
                                      std::chrono::milliseconds timeout,
                                      const std::filesystem::path& run_dir, int64_t bucket_mib) {
  DataParallelSetup s;
  if (gpus.empty() && !env) return s;
  if (!gpus.empty() && env)
    throw UsageError(cat("--gpus ", gpus, " and torchrun's WORLD_SIZE=", env->world_size,
                         " both ask for data parallelism: use one (a torchrun process drives the GPU "
                         "of its LOCAL_RANK)"));
  if (!nccl_compiled())
    throw UsageError("data-parallel training needs NCCL, and this loft was built without it");
  const int available = cuda_device_count();
  if (!gpus.empty()) {
    s.devices = parse_gpus(gpus, available);
    s.world = int(s.devices.size());
    for (int r = 0; r < s.world; ++r) s.ranks.push_back(r);
    s.comms = make_communicators(s.devices, timeout);
    s.how = cat(s.world, " GPU", s.world == 1 ? "" : "s", " in this process (", device_list(s.devices),
                "), one thread each");
  } else {
    if (env->local_rank >= available)
      throw UsageError(cat("LOCAL_RANK=", env->local_rank, ", but this machine has ", available,
                           " GPU", available == 1 ? "" : "s"));
    s.world = env->world_size;
    s.devices = {env->local_rank};
    s.ranks = {env->rank};
    // Rank 0 makes the job's NCCL id; the rendezvous hands it to every other rank, which checks
    // on the way that it sees rank 0's run folder.
    const NcclUniqueId mine = env->rank == 0 ? new_unique_id() : NcclUniqueId{};
    const std::vector<uint8_t> id = exchange_id_checking_run_folder(*env, mine, run_dir, timeout);
    if (id.size() != mine.size())
      throw Error(cat("rank ", env->rank, ": the NCCL id from ", env->master_addr, ":", env->port,
                      " has ", id.size(), " bytes, not ", mine.size()));
    s.comms.push_back(make_communicator(env->local_rank, std::span<const uint8_t, 128>(id.data(), 128),
                                        env->world_size, env->rank, timeout));
    s.how = cat("rank ", env->rank, " of ", env->world_size, " (torchrun variables; cuda:",
                env->local_rank, ", rendezvous at ", env->master_addr, ":", env->port, ")");
  }
  for (auto& c : s.comms)
    s.reducers.push_back(std::make_unique<GradReducer>(*c, size_t(bucket_mib) << 20, timeout));
  return s;
}

}  // namespace loft::app
