// Every frozen projection of the model (q, k, v, o, gate, up, down) is an AdaptedLinear. Methods
// (LoRA, QLoRA, FALQON, HALO) differ only in how they store the frozen weight and multiply by it,
// and in what their adapter is; the model and the trainer see this interface alone.
#pragma once
#include <functional>
#include <map>
#include <optional>
#include <utility>
#include <memory>
#include <string>
#include <vector>

#include "engine/core/error.h"
#include "engine/peft/frozen_weight.h"
#include "engine/peft/weight_source.h"
#include "engine/tensor/param.h"
#include "engine/tensor/tensor.h"

namespace loft {
class SharedBackward;
class SharedInput;
}

namespace loft {

// What a projection's forward keeps for its backward. The method decides what goes in (LoRA: the
// input and X·Aᵀ; FALQON: only O_A), so it is a small bag of tensors, not a fixed struct.
struct LinearSaved {
  std::vector<Tensor> tensors;
  void clear() { tensors.clear(); }
};

class AdaptedLinear {
 public:
  virtual ~AdaptedLinear() = default;
  virtual int64_t in_features() const = 0;
  virtual int64_t out_features() const = 0;

  // y [T, out] = adapted(x [T, in]); y is overwritten. With `saved` (training) the method stores
  // what backward needs in it. `shared` (optional) holds x for a group of projections that read
  // it (engine/peft/shared_input.h).
  virtual void forward(const Tensor& x, Tensor& y, LinearSaved* saved,
                       SharedInput* shared = nullptr) = 0;
  // Records in `saved` what forward(x, y, &saved) would, without producing y: grad
  // checkpointing's recompute of a projection whose output no backward reads (the MLP's down
  // projection), where the frozen GEMM would be wasted. The default runs forward into a scratch
  // output; methods override it to skip their frozen product.
  virtual void save_for_backward(const Tensor& x, LinearSaved& saved,
                                 SharedInput* shared = nullptr) {
    Tensor y = Tensor::empty({x.size(0), out_features()}, x.dtype(), x.device());
    forward(x, y, &saved, shared);
  }
  // Given dy [T, out], accumulates the adapter's gradients and writes dx [T, in] (added to dx's
  // contents when accumulate_dx: projections that share an input sum their dx). dy_amax: null, or
  // F32 [1] holding max |dy| (see takes_amax). `shared` (optional, engine/peft/shared_backward.h):
  // the group of projections that read x; part of dx may then be added at its finish().
  virtual void backward(const Tensor& dy, const LinearSaved& saved, Tensor& dx, bool accumulate_dx,
                        const Tensor* dy_amax = nullptr, SharedBackward* shared = nullptr) = 0;
  // Told once, after the model built them, which projections read one input (q, k, v; gate, up),
  // each with the whole list: a method may then work on them as one (LoRA: one matrix of their
  // A, lora_linear.h). The default does nothing.
  virtual void group_with(const std::vector<AdaptedLinear*>& readers) { (void)readers; }
  // Whether the method quantizes its input and dy with one scale per tensor (FALQON): the model
  // then has the ops that write them fold their amax (ops.h's *_amax outputs) and hands it over
  // (SharedInput::amax, backward's dy_amax), saving the quantizer its own pass over each.
  virtual bool takes_amax() const { return false; }

  // Trainable tensors (empty for a frozen layer).
  virtual std::vector<Param*> params() = 0;
  // Recomputes what derives from the Params (their compute-dtype copies) and changes nothing
  // else: after Params were loaded (resume) or set.
  virtual void refresh_copies() {}
  // Once after every optimizer step, with the Params' new values: applies the optimizer's update
  // to the method's own state (FALQON folds rows of B into its FP8 backbone), then refreshes.
  virtual void after_step() { refresh_copies(); }
  // A method whose after_step is cheaper for many projections at once names the function that
  // runs it for a list of its own projections (FALQON: each phase of its row update one launch
  // for all of them); after_steps() hands such a function every projection that names it.
  using AfterStepAll = void (*)(const std::vector<AdaptedLinear*>& same_method);
  virtual AfterStepAll after_step_all() const { return nullptr; }
  // The effective weight W + ΔW as [out, in] F32 on the CPU (export, checks).
  virtual Tensor merged_weight() const = 0;

  // The adapter as a PEFT LoRA pair {A [r, in], B [out, r]} (F32, CPU), to be applied with the
  // method's recorded scaling; nullopt for a frozen projection. FALQON answers with Â and
  // ΣΔB_applied − B̂ (docs/methods.md), so its PEFT export is the trained model up to the part of the
  // FP8 rounding beyond rank r.
  virtual std::optional<std::pair<Tensor, Tensor>> peft_pair() const { return std::nullopt; }
  // Whether the adapter's PEFT pair is this projection's trained state, to be loaded with
  // import_peft_pair (LoRA family); otherwise it is rebuilt from its method state (FALQON).
  virtual bool imports_peft_pair() const { return false; }
  // Replaces the adapter with {A [r, in], B [out, r]} (host F32); Error on mis-shaped tensors.
  virtual void import_peft_pair(const Tensor& a, const Tensor& b) {
    (void)a;
    (void)b;
    throw Error("this projection does not take a PEFT pair");
  }
  // The trained weight as per-tensor E4M3 codes [out, in] (host) and its scale, when the method's
  // trained model is FP8 itself (FALQON); nullopt otherwise.
  virtual std::optional<std::pair<Tensor, float>> trained_fp8() const { return std::nullopt; }
  // Tensors beyond params() that an adapter or checkpoint must carry to rebuild this projection
  // exactly (FALQON: its changed backbone rows and applied-update sum). Keys are short names
  // ("falqon_rows"); the caller prefixes the module name. Empty for methods without such state.
  // The default is the frozen store's (frozen_store()), if the projection has one.
  virtual std::map<std::string, Tensor> method_state() const {
    if (const FrozenWeight* w = frozen_store()) return w->method_state();
    return {};
  }
  // Restores what method_state() returned (same keys, host tensors). Throws Error naming the key
  // when one is missing or mis-shaped.
  virtual void load_method_state(const std::map<std::string, Tensor>& state) {
    if (FrozenWeight* w = frozen_store()) w->load_method_state(state);
  }

  // A calibration pass the method asks for before step 0 (finetune and bench run it the same
  // way, run_calibration in engine/train/trainer.h): calibration_batches() micro-batches (0:
  // none) of forward + backward between start_calibration() and finish_calibration(); their
  // gradients are then discarded.
  // The defaults are the frozen store's (frozen_store()), if the projection has one.
  virtual int calibration_batches() const { return frozen_store() ? frozen_store()->calibration_batches() : 0; }
  virtual void start_calibration() {
    if (FrozenWeight* w = frozen_store()) w->start_calibration();
  }
  virtual void finish_calibration() {
    if (FrozenWeight* w = frozen_store()) w->finish_calibration();
  }

  // The frozen weight this projection multiplies by, where it has one as a FrozenWeight (the LoRA
  // family, frozen projections): its state and calibration hooks are the projection's.
  virtual FrozenWeight* frozen_store() const { return nullptr; }

  // What --shard-backbone spreads over the ranks (engine/parallel/sharded_backbone.h): the tensors
  // this projection multiplies by and keeps, read through these members at every use. The default
  // is the frozen store's (FrozenWeight::stored_tensors); empty: it cannot be sharded.
  virtual std::vector<Tensor*> sharded_tensors() {
    FrozenWeight* w = frozen_store();
    return w ? w->stored_tensors() : std::vector<Tensor*>{};
  }
  // True when after_step() and load_method_state() write those tensors and method_state() reads
  // them (FALQON's backbone rows): a sharded model then gathers a layer around those calls and
  // keeps what was written.
  virtual bool writes_sharded_tensors() const { return false; }
};

// Builds the AdaptedLinear for one frozen projection: `name` is its module name
// ("model.layers.0.self_attn.q_proj"), `target` the projection ("q_proj"), `weight` [out, in] as
// the checkpoint holds it: dense in the compute dtype on the compute device, or FP8 codes with
// scales (engine/peft/weight_source.h). Each method supplies one (engine/peft/method.h).
using LinearFactory = std::function<std::unique_ptr<AdaptedLinear>(
    const std::string& name, const std::string& target, WeightSource weight)>;

// after_step() of every projection, those naming an AfterStepAll grouped into one call of it.
void after_steps(const std::vector<AdaptedLinear*>& linears);

}  // namespace loft
