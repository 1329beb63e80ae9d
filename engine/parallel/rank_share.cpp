#include "engine/parallel/rank_share.h"

#include "engine/core/error.h"

namespace loft::parallel {

std::vector<size_t> strided_share(size_t micro_batches, int world, int rank) {
  if (world < 1) throw Error(cat("data-parallel world size ", world, " must be at least 1"));
  if (rank < 0 || rank >= world)
    throw Error(cat("rank ", rank, " is out of range for a world of ", world, " ranks"));
  std::vector<size_t> mine;
  mine.reserve(micro_batches / size_t(world) + 1);
  for (size_t i = size_t(rank); i < micro_batches; i += size_t(world)) mine.push_back(i);
  return mine;
}

std::vector<size_t> micro_batches_of_rank(size_t micro_batches, int world, int rank) {
  std::vector<size_t> mine = strided_share(micro_batches, world, rank);  // checks world and rank
  if (micro_batches == 0 || micro_batches % size_t(world) != 0)
    throw Error(cat(micro_batches, " micro-batches per optimizer step cannot be split evenly over ",
                    world, " ranks: make the gradient accumulation a multiple of ", world));
  return mine;
}

}  // namespace loft::parallel
