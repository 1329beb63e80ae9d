// Where a training step's time goes, for `loft bench`'s per-part breakdown. Code brackets its work
// with `prof::Scope s(prof::Part::X);`. Scopes nest and the time is exclusive: while an inner scope
// runs, its part is charged, not the outer one's. Off by default; then a Scope costs one branch.
// On CUDA each scope boundary records an event on loft's stream, so the breakdown measures GPU
// time without synchronising inside the step; on the CPU it reads the clock.
#pragma once
#include <array>
#include <string>

#include "engine/tensor/device.h"

namespace loft::prof {

enum class Part : int {
  FrozenGemm,     // products with the frozen backbone (bf16, NF4-decoded, FP8/INT8)
  AdapterMath,    // LoRA/FALQON adapter GEMMs and their gradients
  QuantHadamard,  // amax, casts to FP8/INT8, NF4 decodes, Hadamard rotations
  Attention,      // scores, softmax, weighted sums and their backward
  Elementwise,    // norms, RoPE, SwiGLU, residual adds, embedding, converts
  LossHead,       // lm_head GEMMs and the chunked cross-entropy
  Optimizer,      // AdamW, grad-norm, zeroing grads
  FalqonUpdate,   // FALQON's top-k row update of the FP8 backbone
  Other,          // anything not inside a scope
  kCount
};
constexpr int kParts = int(Part::kCount);
const char* part_name(Part p);  // "frozen_gemm", "adapter", ...

// Starts collecting on `device`; everything until stop() not inside a Scope counts as Other.
void start(Device device);
// Synchronises, stops collecting and returns the seconds charged to each part since start().
std::array<double, kParts> stop();
bool active();

class Scope {
 public:
  explicit Scope(Part p) : on_(active()) {
    if (on_) enter(p);
  }
  ~Scope() {
    if (on_) leave();
  }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  static void enter(Part p);
  static void leave();
  bool on_;
};

}  // namespace loft::prof
