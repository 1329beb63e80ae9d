// The bootstrap exchange of a multi-process run: rank 0 hands one small blob (the NCCL unique id,
// 128 opaque bytes) to every other rank over TCP, the way torchrun's TCPStore does. CPU only; it
// knows nothing of NCCL. Tensors never travel this way.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
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
//
// `check`, when given, runs on every peer with the blob before it acknowledges: an empty answer
// is success, anything else is what the peer cannot do (e.g. see rank 0's run folder). The peer
// then throws it and sends it back in place of the acknowledgement, so rank 0 throws it too,
// naming that rank: the whole run stops at start-up, with the cause on both sides.
using PeerCheck = std::function<std::string(std::span<const uint8_t> blob)>;
std::vector<uint8_t> exchange_blob(const LaunchEnv& env, std::span<const uint8_t> blob_from_rank0,
                                   std::chrono::milliseconds timeout, const PeerCheck& check = {});

}  // namespace loft::parallel
