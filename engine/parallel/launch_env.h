// Where this process sits in a multi-process run, read from the environment variables torchrun
// sets (MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK, LOCAL_RANK), so loft launches the way people
// already launch PyTorch jobs, on one node or many.
#pragma once
#include <functional>
#include <optional>
#include <string>

namespace loft::parallel {

struct LaunchEnv {
  std::string master_addr;  // host name or address of rank 0
  int port = 0;             // TCP port rank 0 listens on for the bootstrap exchange
  int world_size = 1;       // number of processes in the run
  int rank = 0;             // this process, 0 .. world_size-1
  int local_rank = 0;       // this process on its node: picks the GPU
  int local_world_size = 1; // processes on this node (LOCAL_WORLD_SIZE, optional): they share its RAM
};

// nullopt when WORLD_SIZE is unset (not launched by torchrun). Otherwise every variable must be
// present and well formed; UsageError (a config error: exit code 2) names the variable and its
// value when one is not. `getenv` is a parameter so tests need not touch the process environment.
std::optional<LaunchEnv> launch_env_from(const std::function<const char*(const char*)>& getenv);

// launch_env_from(::getenv).
std::optional<LaunchEnv> launch_env();

}  // namespace loft::parallel
