// One micro-batch of token rows as the model consumes it, and the interface the trainer drives.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "engine/core/error.h"
#include "engine/tensor/param.h"

namespace loft {

// B rows of S tokens, flattened to T = B·S, all I32 on the model's device.
struct ModelBatch {
  int64_t rows = 0, seq = 0;
  Tensor ids;        // [T] input token ids
  Tensor targets;    // [T] the token to predict AT this position (already shifted), -100 = none
  Tensor positions;  // [T] RoPE positions (restart at 0 for each packed document)
  Tensor doc_start;  // [T] row-local index of the first token of this token's document
  int64_t target_count = 0;  // targets != -100, known on the host when the batch is built
  // Set when at least 1/64 of the positions have no target (prompt tokens under a chat template):
  // the loss head then takes only the rows with one. loss_rows [T'] those positions, ascending;
  // loss_targets [T'] their targets; loss_scatter [T] each position's index in loss_rows, or T'
  // for a position without a target. Undefined otherwise (every row goes through the head).
  Tensor loss_rows, loss_targets, loss_scatter;
};

// Builds a ModelBatch from host rows. `labels` follow Hugging Face's convention (labels[t] is the token
// at t, -100 = not trained; the model predicts labels[t+1] at t); they are shifted here, and a
// document's last token never predicts the next document's first. doc_ids[t] (any values, equal
// within a document) mark packed documents; empty = one document per row.
ModelBatch make_batch(const std::vector<int32_t>& ids, const std::vector<int32_t>& labels,
                      const std::vector<int32_t>& doc_ids, int64_t rows, int64_t seq, Device device);
// Same, from targets that are already shifted (targets[t] = the token to predict at t, as the
// data loader produces them); positions restart and doc_start moves at each change of doc_ids.
ModelBatch make_batch_shifted(const std::vector<int32_t>& ids, const std::vector<int32_t>& targets,
                              const std::vector<int32_t>& doc_ids, int64_t rows, int64_t seq,
                              Device device);

struct LossSums {
  double loss_sum = 0;  // Σ −log p(target) over target tokens
  int64_t tokens = 0;   // target tokens
};

// Told, during a backward, that these params' gradients are final for this micro-batch: nothing
// later in the backward adds to them (a data-parallel sync may start summing them).
using GradReadyHook = std::function<void(std::span<Param* const> ready)>;

// What the trainer needs from a model.
class TrainableModel {
 public:
  virtual ~TrainableModel() = default;
  // Forward + backward: adds grad_scale · ∂(Σ losses)/∂θ into every Param's grad; returns the
  // unscaled loss sum.
  virtual LossSums forward_backward(const ModelBatch& batch, float grad_scale) = 0;
  virtual LossSums evaluate(const ModelBatch& batch) = 0;
  virtual std::vector<Param*> params() = 0;
  // While set (empty: none), forward_backward calls `hook` as groups of params' gradients become
  // final, in grad_order()'s order, each param once. A model that never calls it is correct too
  // (the sync then sums everything after the backward); the default ignores it.
  virtual void set_grad_ready_hook(GradReadyHook hook) { (void)hook; }
  // params() in the order the backward finishes their gradients (the hook's order): a
  // data-parallel sync plans its buckets from it, identically on every rank.
  virtual std::vector<Param*> grad_order() { return params(); }
  // After every optimizer step: the methods apply the update to their own state and refresh
  // their derived copies (AdaptedLinear::after_step).
  virtual void after_step() = 0;
  // Refreshes derived copies only, after params were loaded (resume).
  virtual void refresh_copies() = 0;
  // State beyond params() that a checkpoint must carry to resume exactly (AdaptedLinear's
  // method_state, named "<module>.<key>"); empty for models whose method keeps none.
  virtual std::map<std::string, Tensor> method_state() const { return {}; }
  // The method's calibration pass before step 0 (AdaptedLinear::calibration_batches): the most
  // micro-batches any projection asks for (0: none), and the hooks around them.
  virtual int64_t calibration_batches() const { return 0; }
  virtual void start_calibration() {}
  virtual void finish_calibration() {}
  // A model that shards what its method state reads (--shard-backbone with FALQON) collects that
  // state here, on every rank at the same point, before method_state() (Trainer does, before each
  // replica check, checkpoint and at the end of run()); the default has nothing to gather.
  virtual void gather_method_state() {}
  // Restores what method_state() returned; `source` (the file) names errors.
  virtual void load_method_state(const std::map<std::string, Tensor>& state,
                                 const std::string& source) {
    if (!state.empty()) throw Error(cat(source, ": method state for a model that keeps none"));
  }
};

}  // namespace loft
