#include "engine/parallel/nccl_comm.h"

#include "engine/core/error.h"

namespace loft {

#ifdef LOFT_WITH_NCCL
NcclUniqueId nccl_new_unique_id();
std::vector<std::unique_ptr<Communicator>> make_nccl_communicators(const std::vector<int>& devices,
                                                                  std::chrono::milliseconds timeout);
std::unique_ptr<Communicator> make_nccl_communicator(int device,
                                                     std::span<const uint8_t, 128> unique_id,
                                                     int world, int rank,
                                                     std::chrono::milliseconds timeout);
#else
namespace {
[[noreturn]] void no_nccl() {
  throw Error("several GPUs need NCCL: this loft was built without CUDA or without libnccl");
}
}  // namespace
#endif

bool nccl_compiled() {
#ifdef LOFT_WITH_NCCL
  return true;
#else
  return false;
#endif
}

NcclUniqueId new_unique_id() {
#ifdef LOFT_WITH_NCCL
  return nccl_new_unique_id();
#else
  no_nccl();
#endif
}

std::vector<std::unique_ptr<Communicator>> make_communicators(const std::vector<int>& devices,
                                                             std::chrono::milliseconds timeout) {
  LOFT_CHECK(!devices.empty(), "make_communicators: no devices");
#ifdef LOFT_WITH_NCCL
  return make_nccl_communicators(devices, timeout);
#else
  (void)timeout;
  no_nccl();
#endif
}

std::unique_ptr<Communicator> make_communicator(int device, std::span<const uint8_t, 128> unique_id,
                                                int world, int rank,
                                                std::chrono::milliseconds timeout) {
  LOFT_CHECK(world >= 1 && rank >= 0 && rank < world, "make_communicator: rank ", rank, " of ",
             world);
#ifdef LOFT_WITH_NCCL
  return make_nccl_communicator(device, unique_id, world, rank, timeout);
#else
  (void)device;
  (void)unique_id;
  (void)timeout;
  no_nccl();
#endif
}

}  // namespace loft
