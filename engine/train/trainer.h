// The training loop: micro-batches with gradient accumulation, each step taken by train_step
// (train_step.h: loss normalised by the target tokens of the whole accumulated batch, global
// grad-norm clipping, AdamW, non-finite detection before anything is written), an LR schedule,
// metrics.jsonl, progress, atomic checkpoints and exact resume.
#pragma once
#include <atomic>
#include <filesystem>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <nlohmann/json.hpp>
#include <optional>

#include "engine/optim/adamw.h"
#include "engine/train/batch.h"
#include "engine/train/rank_workers.h"
#include "engine/train/schedule.h"

namespace loft {

// Where micro-batches come from. state()/restore() make the position exact across a resume.
class BatchSource {
 public:
  virtual ~BatchSource() = default;
  // The next micro-batch, or nullopt when the data is exhausted (training then stops).
  virtual std::optional<ModelBatch> next() = 0;
  virtual nlohmann::json state() const = 0;
  virtual void restore(const nlohmann::json& state) = 0;
};

struct TrainerConfig {
  int64_t steps = 100;           // optimizer steps
  int64_t grad_accum = 1;        // micro-batches per optimizer step
  LrSchedule schedule;
  double max_grad_norm = 0.0;    // <= 0: no clipping
  AdamWConfig adamw;
  int64_t save_every = 0;        // 0: only the final adapter
  int64_t log_every = 1;         // terminal progress line every N steps
  std::filesystem::path run_dir; // metrics.jsonl and checkpoints/ go here (empty: nowhere)
  int64_t eval_every = 0;        // validation every N steps (and at the end) when an evaluator is set
  bool quiet = false;
  // Data-parallel runs: compare the ranks' replica digests every N steps (0: before each
  // checkpoint only).
  int64_t check_replicas_every = 0;
  // Set (nonzero) by a signal handler to stop the run between steps: run() then writes a
  // checkpoint of the last step taken and returns with stopped() true (finetune's Ctrl-C).
  const std::atomic<int>* stop = nullptr;
};

// One data-parallel rank run by this process: its model replica and the GradientSync to its peers.
struct LocalRank {
  TrainableModel* model = nullptr;
  GradientSync* sync = nullptr;  // null only in the plain one-device run (no data parallelism)
  int rank = 0;                  // in the whole run
};

// The ranks of a data-parallel run that this process holds (docs/multi-gpu.md): every rank of a
// one-process run (--gpus), or the one of this process in a torchrun-style run. Global rank 0
// writes metrics and checkpoints; every rank reads the whole data stream and takes its share of
// each step's micro-batches (rank_share), so the step is the same rows as on one device.
struct DataParallelRanks {
  int world = 1;
  std::vector<LocalRank> local;
  bool serial = false;  // the local ranks share one device (CPU tests): see RankWorkers
};

struct StepMetrics {
  int64_t step = 0;  // 1-based optimizer step just taken
  double loss = 0, lr = 0, grad_norm = 0, tokens_per_s = 0, seconds = 0;
  int64_t tokens = 0;  // target tokens in this step
  int64_t peak_memory = 0;  // device bytes allocated at the high-water mark so far (the report's memory curve)
  int64_t allocator_returns = 0;  // cached blocks the allocator handed back to make room in this step
  std::optional<double> val_loss;  // on evaluation steps
};

// What a checkpoint's trainer_state.json holds, read with typed fields (errors name `source`).
// A step beyond `max_steps` (the run's --steps) is an error: resuming there would write an
// adapter without training.
struct TrainerState {
  int64_t step = 0, optimizer_steps = 0;
  nlohmann::json data;  // the BatchSource's position
};
TrainerState trainer_state_from(const nlohmann::json& state, const std::string& source,
                                int64_t max_steps = INT64_MAX);

// The step of one metrics.jsonl line; nullopt for a line that is not JSON (the torn last line
// of a killed run). Throws Error naming `where` when the line is JSON without a valid "step".
std::optional<int64_t> metrics_line_step(std::string_view line, const std::string& where);

class Trainer {
 public:
  Trainer(TrainableModel& model, BatchSource& data, TrainerConfig config,
          std::ostream* progress = nullptr);
  // Data-parallel: the micro-batches of `data` may be on any device (they are copied to each
  // rank's); with `ranks.world` > 1, config.grad_accum (micro-batches per step over every rank)
  // must be a multiple of the world size.
  Trainer(DataParallelRanks ranks, BatchSource& data, TrainerConfig config,
          std::ostream* progress = nullptr);

  // Loads the newest checkpoint under run_dir/checkpoints (or `dir` when given): adapter,
  // optimizer moments, step, data position and the method's state (loft_state.safetensors, written
  // when the model's method_state() is not empty). Returns the step resumed from.
  int64_t resume(const std::optional<std::filesystem::path>& dir = std::nullopt);
  // Validation loss of the current model (set before run() to evaluate every eval_every steps).
  void set_evaluator(std::function<double()> evaluator) { evaluator_ = std::move(evaluator); }
  // Runs until config.steps optimizer steps have been taken, the data runs out or config.stop is set
  // (see stopped()). `on_step` (optional) sees every
  // step's metrics after it is logged (on global rank 0's process only).
  void run(const std::function<void(const StepMetrics&)>& on_step = {});
  // Writes a checkpoint for the current step now (atomic: temp folder + rename): adapter.safetensors,
  // optimizer.safetensors, trainer_state.json and, for a method with state, loft_state.safetensors.
  // Data-parallel: every process calls it at the same step; the replicas are compared first, and
  // only global rank 0 writes (the others return the folder it writes).
  std::filesystem::path save_checkpoint();

  int64_t step() const { return step_; }
  // run() returned because config.stop was set; the last step taken has a checkpoint (unless no
  // step was taken).
  bool stopped() const { return stopped_; }
  AdamW& optimizer() { return *optimizers_.front(); }
  // Whether this process holds global rank 0 (writes metrics, checkpoints and progress).
  bool writes() const { return writes_; }

 private:
  // Draws the next step's micro-batches from the data and runs train_step on every local rank;
  // nullopt when the data has run out.
  std::optional<StepMetrics> run_next_step();
  void log(const StepMetrics& m);
  void calibrate();
  // Every rank's digest is compared (a collective: every rank must call it at the same step).
  void check_replicas(size_t local_rank, int64_t step);
  void abort_peers();

  std::vector<LocalRank> local_;
  int world_ = 1;
  std::unique_ptr<RankWorkers> workers_;
  std::vector<GradientSync*> syncs_;  // local_[i].sync as the workers hand it out
  TrainableModel& model_;             // local rank 0's: checkpoints, evaluation, logging
  BatchSource& data_;
  TrainerConfig config_;
  std::ostream* progress_;
  std::vector<Param*> params_;        // model_'s
  std::vector<std::unique_ptr<AdamW>> optimizers_;  // one per local rank
  bool writes_ = true;
  std::function<double()> evaluator_;
  int64_t step_ = 0;
  bool calibrated_ = false;       // the method's calibration pass ran (or a resume made it moot)
  double elapsed_ = 0;            // seconds spent in steps since run() started
  int64_t first_logged_step_ = 1; // first step of this process (for the ETA)
  bool stopped_ = false;
  bool told_allocator_returns_ = false;  // the note about an allocator at its limit was printed
  int64_t last_checkpoint_ = -1;  // the step of the newest checkpoint written or resumed from
};

// The method's calibration pass before step 0, if it asks for one (model.calibration_batches() >
// 0): that many micro-batches from `next` (fewer if it runs out), each a forward + backward between
// start_calibration() and finish_calibration(), then every Param's gradient is zeroed. Finetune
// (Trainer::run, on a fresh run) and bench (time_training_steps) both calibrate through this.
// Returns the micro-batches used.
int64_t run_calibration(TrainableModel& model, const std::function<std::optional<ModelBatch>()>& next);

// Named tensors of a model's adapter params (F32, device as stored).
std::map<std::string, Tensor> param_tensors(const std::vector<Param*>& params);

}  // namespace loft
