#include "engine/train/replica_digest.h"

#include <cstring>
#include <string_view>

namespace loft {

namespace {

// FNV-1a over 64-bit words (the tail byte-wise): fast enough for ~1 GB of adapter state at a
// checkpoint, and any flipped bit changes it.
class Digest {
 public:
  void add(const void* data, size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
      uint64_t w;
      std::memcpy(&w, p + i, 8);
      mix(w);
    }
    for (; i < n; ++i) mix(p[i]);
    mix(n);
  }
  void add(std::string_view s) { add(s.data(), s.size()); }
  void add(const Tensor& t) {
    const Tensor host = t.device().is_cpu() ? t : t.to(Device::cpu());
    add(host.data(), host.nbytes());
  }
  uint64_t value() const { return h_; }

 private:
  void mix(uint64_t w) {
    h_ ^= w;
    h_ *= 0x100000001b3ull;
  }
  uint64_t h_ = 0xcbf29ce484222325ull;
};

}  // namespace

uint64_t replica_digest(TrainableModel& model, const AdamW& optimizer) {
  Digest d;
  for (const Param* p : model.params()) {
    d.add(p->name);
    d.add(p->value);
  }
  for (const auto& [name, t] : optimizer.state()) {
    d.add(name);
    d.add(t);
  }
  const int64_t steps = optimizer.steps_taken();
  d.add(&steps, sizeof steps);
  for (const auto& [name, t] : model.method_state()) {
    d.add(name);
    d.add(t);
  }
  return d.value();
}

}  // namespace loft
