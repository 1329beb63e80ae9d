// Where a training step's time goes, for `loft bench`'s per-part breakdown. Code brackets its work
// with `prof::Scope s(prof::Part::X);`. Scopes nest and the time is exclusive: while an inner scope
// runs, its part is charged, not the outer one's. Off by default; then a Scope costs one branch.
// On CUDA each scope boundary records an event on loft's stream, so the breakdown measures GPU
// time without synchronising inside the step; on the CPU it reads the clock.
// Started with ops, it also charges each op (every op of op_list.def, through its dispatch, and
// the quantization kernels: prof::OpScope) within its part: the kernels' own times inside the
// real step, where `bench kernels` times each alone.
#pragma once
#include <array>
#include <cstdint>
#include <map>
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
// `ops`: OpScopes mark their ops too (two more events an op on CUDA).
void start(Device device, bool ops = false);
// Synchronises, stops collecting and returns the seconds charged to each part since start().
std::array<double, kParts> stop();
bool active();
bool active_ops();

// An op's time and calls within a part.
struct OpTime {
  double seconds = 0;
  int64_t calls = 0;
};
// After a stop() of a start(device, true): "part/op" (e.g. "elementwise/swiglu_backward") for
// every op that ran, and "part/-" for the part's time outside any op (other kernels, host gaps);
// they sum to stop()'s parts. Empty after a start without ops.
const std::map<std::string, OpTime>& op_times();

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

// Brackets one op inside the current part, when the profiler runs with ops. `op` is a static
// name, or an interned label (below); null brackets nothing. Inside a label that refines an op's
// name ("gemm 8192x4096x4096 tb" around the dispatch's "gemm"), that op's own scope is the label's.
class OpScope {
 public:
  explicit OpScope(const char* op) : on_(op && active_ops() && !refined(op)) {
    if (on_) enter(op);
  }
  ~OpScope() {
    if (on_) leave();
  }
  OpScope(const OpScope&) = delete;
  OpScope& operator=(const OpScope&) = delete;

 private:
  static bool refined(const char* op);
  static void enter(const char* op);
  static void leave();
  bool on_;
};

// A label's stable copy for an OpScope (e.g. a GEMM's name and shape), kept until the next start.
// Call it only while active_ops(): a label costs a string.
const char* intern(const std::string& label);
// OpScope's argument for a label: `make()` interned while ops are profiled, else null (then no
// string is built and the scope brackets nothing).
template <typename Make>
const char* label(Make&& make) {
  return active_ops() ? intern(make()) : nullptr;
}

}  // namespace loft::prof
