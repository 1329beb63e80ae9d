#include "engine/parallel/sharded_backbone.h"

#include "engine/core/error.h"

namespace loft {

namespace {

size_t round_up(size_t n, size_t m) { return (n + m - 1) / m * m; }

// `bytes` of `owner`'s storage from byte `offset`, seen as `shape` of `dtype` (a view: it keeps
// the owner alive).
Tensor bytes_as(const Tensor& owner, size_t offset, Shape shape, DType dtype) {
  auto keep = std::make_shared<Tensor>(owner);
  return Tensor::wrap(static_cast<const uint8_t*>(owner.data()) + offset, std::move(shape), dtype,
                      owner.device(), std::shared_ptr<const void>(keep, keep->data()));
}

}  // namespace

ShardedBackbone::ShardedBackbone(ShardGather& gather) : gather_(gather) {
  LOFT_CHECK(gather.world_size() >= 1 && gather.rank() >= 0 && gather.rank() < gather.world_size(),
             "ShardedBackbone: rank ", gather.rank(), " of ", gather.world_size());
}

void ShardedBackbone::add_layer(const std::vector<Tensor*>& stored) {
  const int world = gather_.world_size(), rank = gather_.rank();
  const size_t l = layers_.size();
  LOFT_CHECK(holds_[0] < 0 && holds_[1] < 0, "ShardedBackbone: layer ", l, " added after use()");
  Layer L;
  for (Tensor* t : stored) {
    LOFT_CHECK(t && t->defined(), "ShardedBackbone: layer ", l, " has an undefined stored tensor");
    LOFT_CHECK(!slots_[0].defined() || t->device() == slots_[0].device(), "ShardedBackbone: layer ",
               l, "'s ", t->str(), " is not on ", slots_[0].device().str());
    L.bytes = round_up(L.bytes, kAlign);
    L.pieces.push_back({t, t->shape(), t->dtype(), L.bytes});
    L.bytes += t->nbytes();
  }
  LOFT_CHECK(!L.pieces.empty(), "ShardedBackbone: layer ", l, " stores nothing");
  L.bytes = round_up(L.bytes, size_t(world) * kAlign);
  const Device device = L.pieces.front().tensor->device();
  if (!slots_[0].defined() || slots_[0].nbytes() < L.bytes) {
    // Slots of the largest layer so far; the earlier layers' tensors move to the new ones.
    for (Tensor& s : slots_) s = Tensor::zeros({int64_t(L.bytes)}, DType::U8, device);
    for (size_t k = 0; k < l; ++k) point(int(k), 1);
  }
  // The layer's bytes laid out in slot 0, this rank's range copied out; then its tensors point
  // into slot 1, so the stores' own tensors are released.
  for (const Piece& p : L.pieces) bytes_as(slots_[0], p.offset, p.shape, p.dtype).copy_from(*p.tensor);
  const int64_t share = int64_t(L.bytes) / world;
  L.local = slots_[0].slice(int64_t(rank) * share, share).clone();
  gather_.share(int(l), L.local);
  layers_.push_back(std::move(L));
  point(int(l), 1);
}

void ShardedBackbone::point(int layer, int slot) {
  for (const Piece& p : layers_[size_t(layer)].pieces)
    *p.tensor = bytes_as(slots_[slot], p.offset, p.shape, p.dtype);
}

void ShardedBackbone::fetch(int layer, int slot) {
  const Layer& L = layers_[size_t(layer)];
  Tensor full = slots_[slot].slice(0, int64_t(L.bytes));
  gather_.gather(layer, L.local, full, slot);
  holds_[slot] = layer;
}

void ShardedBackbone::use(int layer, int next) {
  const int n = int(layers_.size());
  LOFT_CHECK(layer >= 0 && layer < n && next >= -1 && next < n, "ShardedBackbone: layer ", layer,
             " then ", next, " of ", n);
  int slot = slot_of(layer);
  if (slot < 0) {
    // Not gathered: into the slot that does not hold the layer expected next.
    slot = holds_[0] == next && next >= 0 ? 1 : 0;
    fetch(layer, slot);
  }
  gather_.join(slot);
  point(layer, slot);
  if (next >= 0 && next != layer && holds_[1 - slot] != next) fetch(next, 1 - slot);
}

void ShardedBackbone::keep_written(int layer) {
  const int slot = slot_of(layer);
  LOFT_CHECK(slot >= 0 && layer >= 0 && layer < int(layers_.size()), "ShardedBackbone: layer ", layer,
             " was written but no slot holds it");
  Layer& L = layers_[size_t(layer)];
  const int64_t share = L.local.numel();
  L.local.copy_from(slots_[slot].slice(int64_t(gather_.rank()) * share, share));
}

size_t ShardedBackbone::local_bytes() const {
  size_t b = 0;
  for (const Layer& L : layers_) b += L.local.nbytes();
  return b;
}

size_t ShardedBackbone::slot_bytes() const { return slots_[0].nbytes(); }

}  // namespace loft
