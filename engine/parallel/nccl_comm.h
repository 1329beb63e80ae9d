// Data-parallel ranks talk through NCCL only (docs/multi-gpu.md): a Communicator is one rank's
// handle on an NCCL communicator bound to one GPU. Its collectives run on a stream of its own
// that first waits for everything queued so far on the device's compute stream (cuda::stream(dev),
// an event), so a bucket's all-reduce moves its gradients while the compute stream goes on with
// the backward of earlier layers; wait() makes the compute stream wait for the collectives in
// turn. NCCL's all-reduce gives every rank the same bytes, which keeps the replicas' updates
// bit-identical.
//
// Every wait is bounded: wait() polls the stream and NCCL's asynchronous error, and on an error or
// a timeout aborts the communicator and throws an Error naming the rank and the cause, so a rank
// whose peer died exits with a message instead of hanging in a kernel that never finishes.
//
// Builds without CUDA or NCCL compile this header; the factories then throw Error.
#pragma once
#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "engine/parallel/sharded_backbone.h"
#include "engine/tensor/tensor.h"

namespace loft {

// ncclUniqueId's bytes (NCCL_UNIQUE_ID_BYTES): made by rank 0, sent to every other rank.
using NcclUniqueId = std::array<uint8_t, 128>;

// How long a rank waits for its peers before it gives up (the design's --nccl-timeout default).
inline constexpr std::chrono::milliseconds kDefaultNcclTimeout{300'000};

class Communicator {
 public:
  virtual ~Communicator() = default;  // ncclCommDestroy, or ncclCommAbort after an error
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  virtual Device device() const = 0;

  // Sums each tensor in place over every rank (F32, contiguous, on device()). All the tensors go
  // in one ncclGroupStart/End, queued after everything queued so far on the device's compute
  // stream; this returns once they are queued. Until wait(), work queued later on the compute
  // stream may run beside the sum, so it must neither write nor read these tensors. Every rank
  // must pass the same number of tensors with the same sizes, in the same order.
  virtual void all_reduce_sum(std::span<Tensor* const> tensors) = 0;

  // Orders the compute stream after every collective queued so far and blocks until everything
  // queued on it (the collectives included) has finished. On an NCCL asynchronous error, or when
  // `timeout` passes first, aborts the communicator and throws Error: "rank 0 of 2: a peer
  // stopped answering within 60 s (...)".
  virtual void wait(std::chrono::milliseconds timeout) = 0;

  // Aborts the communicator now (a worker thread failed and its peers must not wait for it):
  // pending collectives end, later calls throw. Idempotent.
  virtual void abort() = 0;

  // --shard-backbone's gather (engine/parallel/sharded_backbone.h): full [world × local] bytes =
  // every rank's `local` in rank order, queued like all_reduce_sum (after the compute stream's
  // work so far, beside what follows); `mark` (0 or 1) names it for join(), after which the
  // compute stream waits for it without blocking the host (a peer that stops answering is caught
  // by the next wait()). Communicators that do not gather (test doubles) throw Error.
  virtual void all_gather(const Tensor& local, Tensor& full, int mark);
  virtual void join(int mark);
};

// A rank's ShardGather over its communicator (the NCCL one).
std::unique_ptr<ShardGather> communicator_shard_gather(Communicator& comm);

// True when this build can use NCCL (a CUDA build with nccl.h; libnccl.so.2 is loaded at first
// use, nccl_api.h).
bool nccl_compiled();

// A fresh NCCL unique id (rank 0 makes one per job and sends it to the others). Throws Error
// without NCCL.
NcclUniqueId new_unique_id();

// One communicator per device, all in this process; element i is rank i. Each is then driven by
// its own thread (ncclGroupStart/End are per thread). Non-blocking like make_communicator's: NCCL
// connects two ranks inside their first collective, so a blocking communicator whose peer never
// reaches it would wait there without a deadline; these give up after `timeout` (Error naming the
// rank) and abort.
std::vector<std::unique_ptr<Communicator>> make_communicators(
    const std::vector<int>& devices, std::chrono::milliseconds timeout = kDefaultNcclTimeout);

// Rank `rank` of a job of `world` ranks (one per process, or per thread) on `device`, joining the
// job named by `unique_id` (ncclCommInitRankConfig, non-blocking, so that a peer that never comes
// is noticed): waits at most `timeout` for every rank to join, else throws Error naming the rank.
std::unique_ptr<Communicator> make_communicator(int device, std::span<const uint8_t, 128> unique_id,
                                                int world, int rank,
                                                std::chrono::milliseconds timeout =
                                                    kDefaultNcclTimeout);

}  // namespace loft
