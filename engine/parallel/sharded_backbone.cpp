#include "engine/parallel/sharded_backbone.h"

#include <algorithm>

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

ShardedBackbone::ShardedBackbone(std::vector<std::vector<Tensor*>> layers, ShardGather& gather)
    : gather_(gather) {
  const int world = gather.world_size(), rank = gather.rank();
  LOFT_CHECK(world >= 1 && rank >= 0 && rank < world, "ShardedBackbone: rank ", rank, " of ", world);
  LOFT_CHECK(!layers.empty(), "ShardedBackbone: no layers");
  Device device;
  bool first = true;
  size_t largest = 0;
  for (size_t l = 0; l < layers.size(); ++l) {
    Layer L;
    for (Tensor* t : layers[l]) {
      LOFT_CHECK(t && t->defined(), "ShardedBackbone: layer ", l, " has an undefined stored tensor");
      if (first) device = t->device(), first = false;
      LOFT_CHECK(t->device() == device, "ShardedBackbone: layer ", l, "'s ", t->str(), " is not on ",
                 device.str());
      L.bytes = round_up(L.bytes, kAlign);
      L.pieces.push_back({t, t->shape(), t->dtype(), L.bytes});
      L.bytes += t->nbytes();
    }
    L.bytes = round_up(std::max<size_t>(L.bytes, 1), size_t(world) * kAlign);
    largest = std::max(largest, L.bytes);
    layers_.push_back(std::move(L));
  }
  for (Tensor& s : slots_) s = Tensor::zeros({int64_t(largest)}, DType::U8, device);
  // Each layer's share: its bytes laid out in slot 0, this rank's range copied out. Then every
  // stored tensor points into slot 1, so the stores' own tensors are released.
  for (size_t l = 0; l < layers_.size(); ++l) {
    Layer& L = layers_[l];
    for (const Piece& p : L.pieces) bytes_as(slots_[0], p.offset, p.shape, p.dtype).copy_from(*p.tensor);
    const int64_t share = int64_t(L.bytes) / world;
    L.local = slots_[0].slice(int64_t(rank) * share, share).clone();
    gather_.share(int(l), L.local);
    point(int(l), 1);
  }
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
  int slot = holds_[0] == layer ? 0 : holds_[1] == layer ? 1 : -1;
  if (slot < 0) {
    // Not gathered: into the slot that does not hold the layer expected next.
    slot = holds_[0] == next && next >= 0 ? 1 : 0;
    fetch(layer, slot);
  }
  gather_.join(slot);
  point(layer, slot);
  if (next >= 0 && next != layer && holds_[1 - slot] != next) fetch(next, 1 - slot);
}

size_t ShardedBackbone::local_bytes() const {
  size_t b = 0;
  for (const Layer& L : layers_) b += L.local.nbytes();
  return b;
}

size_t ShardedBackbone::slot_bytes() const { return slots_[0].nbytes(); }

}  // namespace loft
