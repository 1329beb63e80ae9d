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

void Communicator::all_gather(const Tensor& local, Tensor& full, int mark) {
  (void)local;
  (void)full;
  (void)mark;
  throw Error("this communicator cannot gather a sharded backbone");
}

void Communicator::join(int mark) {
  (void)mark;
  throw Error("this communicator cannot gather a sharded backbone");
}

namespace {
class CommunicatorShardGather final : public ShardGather {
 public:
  explicit CommunicatorShardGather(Communicator& comm) : comm_(comm) {}
  int rank() const override { return comm_.rank(); }
  int world_size() const override { return comm_.world_size(); }
  void gather(int layer, const Tensor& local, Tensor& full, int slot) override {
    (void)layer;  // every rank gathers the same layers in the same order
    comm_.all_gather(local, full, slot);
  }
  void join(int slot) override { comm_.join(slot); }

 private:
  Communicator& comm_;
};
}  // namespace

std::unique_ptr<ShardGather> communicator_shard_gather(Communicator& comm) {
  return std::make_unique<CommunicatorShardGather>(comm);
}

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
