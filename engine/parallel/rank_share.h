// Which micro-batches of one optimizer step a rank runs in a data-parallel run.
#pragma once
#include <cstddef>
#include <vector>

namespace loft::parallel {

// The micro-batch indices (0 .. micro_batches-1) of `rank` out of `world` ranks: rank, rank+world,
// rank+2·world, ... Every index goes to exactly one rank, and every rank gets micro_batches/world
// of them, so N ranks with per-rank accumulation A run exactly the samples one GPU runs with
// accumulation N·A, and the all-reduced gradient is the same sum. Strided rather than contiguous
// blocks so the share is interleaved in step order: with a length-sorted or curriculum order the
// ranks see similar micro-batches and finish their backward together.
// Error (naming both numbers) unless micro_batches is a positive multiple of world: an uneven
// split would make the ranks' step sizes differ and one rank wait on the others each step.
std::vector<size_t> micro_batches_of_rank(size_t micro_batches, int world, int rank);

// The same strided share for a step of any size, the last one of the data included, which may
// hold fewer micro-batches than the world has ranks (a rank may get none and then adds only its
// zero gradients to the sum). Error for a world below 1 or a rank outside it.
std::vector<size_t> strided_share(size_t micro_batches, int world, int rank);

}  // namespace loft::parallel
