// The data-parallel replica check (docs/multi-gpu.md, step 3): every rank takes the same update
// from the same summed gradients, so every rank's training state must stay the same bytes. A
// 64-bit digest of it is cheap to exchange; the trainer compares the ranks' digests before each
// checkpoint (and every --check-replicas-every steps).
#pragma once
#include <cstdint>

#include "engine/optim/adamw.h"
#include "engine/train/batch.h"

namespace loft {

// Digest of every param's value, the optimizer's moments and step count, and the method's state
// (FALQON's melded rows, HOT's counters), with their names. Copies them to the host.
uint64_t replica_digest(TrainableModel& model, const AdamW& optimizer);

}  // namespace loft
