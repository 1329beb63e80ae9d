// The bootstrap exchange of a multi-process run: rank 0 hands one small blob (the NCCL unique id,
// 128 opaque bytes) to every other rank over TCP, the way torchrun's TCPStore does. CPU only; it
// knows nothing of NCCL. Tensors never travel this way.
#pragma once
#include <chrono>
#include <cstdint>
#include <span>
#include <vector>

#include "engine/parallel/launch_env.h"

namespace loft::parallel {

// Rank 0 listens on MASTER_PORT, waits for the world_size-1 other ranks, then sends each the blob
// and waits for each one's acknowledgement; it returns its own blob. Every other rank connects to
// MASTER_ADDR:MASTER_PORT (retrying, since rank 0 may start later), receives the blob and returns
// it (blob_from_rank0 is ignored there). Rank 0 sends only once all ranks have arrived, so either
// every rank gets the blob or none does.
//
// Each wait (rank 0 for all peers to connect; a peer to reach rank 0; a peer for the blob once
// connected; rank 0 for the acknowledgements) is bounded by `timeout`. Error names the rank, the
// address and port, and what did not happen in time.
std::vector<uint8_t> exchange_blob(const LaunchEnv& env, std::span<const uint8_t> blob_from_rank0,
                                   std::chrono::milliseconds timeout);

}  // namespace loft::parallel
