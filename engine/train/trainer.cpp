#include "engine/train/trainer.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <iomanip>
#include <ostream>

#include "engine/io/atomic_file.h"
#include "engine/io/json_fields.h"
#include "engine/io/json_read.h"
#include "engine/io/safetensors_reader.h"
#include "engine/io/safetensors_writer.h"
#include "engine/peft/method_state.h"
#include "engine/tensor/finite.h"
#include "engine/device/memory.h"
#include "engine/parallel/rank_share.h"
#include "engine/train/replica_digest.h"
#include "engine/train/run_folder.h"
#include "engine/train/train_step.h"

namespace loft {

namespace fs = std::filesystem;

std::map<std::string, Tensor> param_tensors(const std::vector<Param*>& params) {
  std::map<std::string, Tensor> out;
  for (const Param* p : params) out.emplace(p->name, p->value);
  return out;
}

namespace {

std::string duration_str(double s) {
  const int64_t t = int64_t(s + 0.5);
  std::ostringstream os;
  if (t >= 3600) os << t / 3600 << 'h' << std::setw(2) << std::setfill('0') << t % 3600 / 60 << 'm';
  else if (t >= 60) os << t / 60 << 'm' << std::setw(2) << std::setfill('0') << t % 60 << 's';
  else os << t << 's';
  return os.str();
}

// Keeps metrics.jsonl consistent with a resumed run: drops lines for steps after `step`.
void truncate_metrics(const fs::path& path, int64_t step) {
  if (!fs::exists(path)) return;
  std::ifstream in(path);
  std::string line, kept;
  for (int64_t n = 1; std::getline(in, line); ++n) {
    const auto s = metrics_line_step(line, cat(path.string(), ":", n));
    if (s && *s <= step) kept += line + "\n";
  }
  write_file_atomic(path, kept);
}

int64_t checkpoint_step(const fs::path& dir) {
  const std::string name = dir.filename().string();
  if (name.rfind("step-", 0) != 0) return -1;
  try {
    return std::stoll(name.substr(5));
  } catch (...) {
    return -1;
  }
}

}  // namespace

int64_t run_calibration(TrainableModel& model, const std::function<std::optional<ModelBatch>()>& next) {
  const int64_t want = model.calibration_batches();
  if (want <= 0) return 0;
  model.start_calibration();
  int64_t used = 0;
  for (; used < want; ++used) {
    std::optional<ModelBatch> b = next();
    if (!b) break;
    const float scale = b->target_count > 0 ? 1.0f / float(b->target_count) : 0.0f;
    const LossSums s = model.forward_backward(*b, scale);
    if (!std::isfinite(s.loss_sum))
      throw Error(cat("calibration batch ", used + 1, ": loss is ", s.loss_sum));
  }
  model.finish_calibration();
  for (Param* p : model.params()) p->grad.zero_();
  return used;
}

Trainer::Trainer(TrainableModel& model, BatchSource& data, TrainerConfig config,
                 std::ostream* progress)
    : Trainer(DataParallelRanks{1, {LocalRank{&model, nullptr, 0}}}, data, std::move(config),
              progress) {}

namespace {
Device device_of(TrainableModel& m) {
  const std::vector<Param*> ps = m.params();
  return ps.empty() ? Device::cpu() : ps.front()->value.device();
}
// The rank's copy of a micro-batch (the batch itself when it is already on that device).
ModelBatch batch_on(const ModelBatch& b, Device d) {
  if (b.ids.device() == d) return b;
  ModelBatch c = b;
  for (Tensor* t : {&c.ids, &c.targets, &c.positions, &c.doc_start, &c.loss_rows, &c.loss_targets, &c.loss_scatter})
    if (t->defined()) *t = t->to(d);
  return c;
}
}  // namespace

Trainer::Trainer(DataParallelRanks ranks, BatchSource& data, TrainerConfig config,
                 std::ostream* progress)
    : local_(std::move(ranks.local)),
      world_(ranks.world),
      model_(*local_.at(0).model),
      data_(data),
      config_(std::move(config)),
      progress_(progress),
      params_(model_.params()) {
  LOFT_CHECK(config_.grad_accum >= 1, "gradient accumulation must be >= 1");
  LOFT_CHECK(world_ >= 1 && !local_.empty() && int(local_.size()) <= world_,
             "a data-parallel run of ", world_, " ranks cannot hold ", local_.size(), " of them here");
  if (world_ > 1 && config_.grad_accum % world_ != 0)
    throw Error(cat("a step of ", config_.grad_accum, " micro-batches cannot be shared evenly by ",
                    world_, " ranks"));
  std::vector<Device> devices;
  for (const LocalRank& r : local_) {
    LOFT_CHECK(r.model && (r.sync || world_ == 1), "rank ", r.rank, " has no model or no sync");
    devices.push_back(device_of(*r.model));
    optimizers_.push_back(std::make_unique<AdamW>(r.model->params(), config_.adamw));
  }
  writes_ = false;
  for (const LocalRank& r : local_) writes_ = writes_ || r.rank == 0;
  workers_ = std::make_unique<RankWorkers>(std::move(devices), ranks.serial);
  for (const LocalRank& r : local_) syncs_.push_back(workers_->serialized(r.sync));
  if (!config_.run_dir.empty() && writes_) fs::create_directories(config_.run_dir);
}

void Trainer::abort_peers() {
  for (const LocalRank& r : local_)
    if (r.sync) r.sync->abort();
}

void Trainer::check_replicas(size_t i, int64_t step) {
  if (!syncs_[i]) return;
  const uint64_t mine = replica_digest(*local_[i].model, *optimizers_[i]);
  const std::vector<uint64_t> all = syncs_[i]->gather(mine);
  for (size_t r = 1; r < all.size(); ++r)
    if (all[r] != all[0]) {
      std::ostringstream os;
      for (size_t k = 0; k < all.size(); ++k)
        os << (k ? ", " : "") << "rank " << k << " " << std::hex << all[k] << std::dec;
      throw Error(cat("after step ", step, " the data-parallel replicas differ (digests of "
                      "adapter, optimizer and method state: ", os.str(), "); nothing was saved"));
    }
}

std::optional<StepMetrics> Trainer::run_next_step() {
  const auto t0 = std::chrono::steady_clock::now();
  const size_t returns_before = params_.empty() ? 0 : memory_stats(device_of(model_)).pressure_returns;
  std::vector<ModelBatch> micro;
  for (int64_t k = 0; k < config_.grad_accum; ++k) {
    std::optional<ModelBatch> b = data_.next();
    if (!b) break;  // the data ran out: a last, smaller step with what is there
    micro.push_back(std::move(*b));
  }
  if (micro.empty()) return std::nullopt;
  int64_t targets = 0, tokens = 0;
  for (const ModelBatch& b : micro) {
    targets += b.target_count;
    tokens += b.ids.numel();
  }
  const double lr = config_.schedule.lr(step_);
  const int64_t step = step_ + 1;
  const bool check = config_.check_replicas_every > 0 && step % config_.check_replicas_every == 0;
  std::vector<StepResult> results(local_.size());
  workers_->run(
      [&](size_t i) {
        const LocalRank& me = local_[i];
        const Device dev = device_of(*me.model);
        std::vector<ModelBatch> mine;  // a short last step may leave this rank fewer, or none
        for (size_t k : parallel::strided_share(micro.size(), world_, me.rank))
          mine.push_back(batch_on(micro[k], dev));
        const RankStep rank{syncs_[i], targets};
        results[i] = loft::train_step(*me.model, *optimizers_[i], mine, config_.max_grad_norm, lr,
                                      step, syncs_[i] ? &rank : nullptr);
        synchronize(dev);
        if (check) {
          me.model->gather_method_state();
          check_replicas(i, step);
        }
      },
      [this] { abort_peers(); });
  ++step_;
  const StepResult& r = results.front();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  StepMetrics m;
  m.step = step_;
  m.loss = targets ? r.loss_sum / double(targets) : 0.0;
  m.lr = lr;
  m.grad_norm = r.grad_norm;
  m.tokens = targets;
  m.seconds = secs;
  m.tokens_per_s = secs > 0 ? double(tokens) / secs : 0.0;
  if (!params_.empty()) {
    const MemoryStats mem = memory_stats(device_of(model_));
    m.peak_memory = int64_t(mem.peak_allocated);
    m.allocator_returns = int64_t(mem.pressure_returns - returns_before);
  }
  return m;
}

void Trainer::log(const StepMetrics& m) {
  elapsed_ += m.seconds;
  if (!config_.run_dir.empty()) {
    nlohmann::json j = {{"step", m.step},         {"loss", m.loss},
                        {"lr", m.lr},             {"grad_norm", m.grad_norm},
                        {"tokens", m.tokens},     {"tokens_per_s", m.tokens_per_s},
                        {"step_seconds", m.seconds}, {"peak_memory", m.peak_memory}};
    if (m.val_loss) j["val_loss"] = *m.val_loss;
    std::ofstream f(config_.run_dir / "metrics.jsonl", std::ios::app);
    f << j.dump() << '\n';
    if (!f) throw Error(cat("cannot append to ", (config_.run_dir / "metrics.jsonl").string()));
  }
  if (progress_ && !config_.quiet &&
      (m.step % std::max<int64_t>(1, config_.log_every) == 0 || m.step == config_.steps ||
       m.step == first_logged_step_)) {
    const double per_step = elapsed_ / double(std::max<int64_t>(1, m.step - first_logged_step_ + 1));
    std::ostringstream os;
    os << "step " << m.step << '/' << config_.steps << " | loss " << std::fixed
       << std::setprecision(4) << m.loss << " | lr " << std::scientific << std::setprecision(2)
       << m.lr << " | grad " << std::fixed << std::setprecision(3) << m.grad_norm << " | "
       << std::setprecision(0) << m.tokens_per_s << " tok/s | ETA "
       << duration_str(per_step * double(config_.steps - m.step));
    if (m.val_loss) os << " | val " << std::setprecision(4) << *m.val_loss;
    if (!params_.empty()) os << " | peak " << std::setprecision(2) << double(m.peak_memory) / (1 << 30) << " GiB";
    *progress_ << os.str() << '\n' << std::flush;
  }
  // Past this process's first two steps (which allocate what the run keeps), a step that had to
  // hand cached blocks back runs at its memory limit and waits for the GPU each time: said once.
  if (progress_ && !config_.quiet && !told_allocator_returns_ && m.allocator_returns > 0 &&
      m.step >= first_logged_step_ + 2) {
    told_allocator_returns_ = true;
    *progress_ << "note: step " << m.step << ": the GPU allocator handed " << m.allocator_returns
               << " cached blocks back to make room (at the memory limit; each waits for the GPU). "
                  "A smaller --micro-batch or --token-tile leaves it room.\n" << std::flush;
  }
}

void Trainer::run(const std::function<void(const StepMetrics&)>& on_step) {
  first_logged_step_ = step_ + 1;
  if (step_ == 0 && !calibrated_) calibrate();
  const bool talk = progress_ && !config_.quiet && writes_;
  const int64_t first = step_;
  while (step_ < config_.steps) {
    if (config_.stop && config_.stop->load() != 0) {
      if (step_ > first && last_checkpoint_ != step_) save_checkpoint();
      stopped_ = true;
      break;
    }
    std::optional<StepMetrics> step = run_next_step();
    if (!step) {
      if (talk)
        *progress_ << "data exhausted after " << step_ << " steps\n";
      break;
    }
    StepMetrics& m = *step;
    if (evaluator_ && ((config_.eval_every > 0 && m.step % config_.eval_every == 0) ||
                       m.step == config_.steps)) {
      bind_thread(device_of(model_));  // on local rank 0's replica
      m.val_loss = evaluator_();
    }
    if (writes_) {
      log(m);
      if (on_step) on_step(m);
    }
    if (config_.save_every > 0 && step_ % config_.save_every == 0 && step_ < config_.steps)
      save_checkpoint();
  }
  // What the caller saves from the model next (the adapter's method state), on every rank.
  workers_->run([&](size_t i) { local_[i].model->gather_method_state(); }, [this] { abort_peers(); });
}

void Trainer::calibrate() {
  // On the first micro-batches of the data, which training then sees again from the start
  // (the position is restored); a resumed run restores the calibrated state instead. Every rank
  // calibrates on the same micro-batches, so their calibrated state is the same.
  const nlohmann::json position = data_.state();
  std::vector<ModelBatch> batches;
  const int64_t want = model_.calibration_batches();
  while (int64_t(batches.size()) < want)
    if (std::optional<ModelBatch> b = data_.next()) batches.push_back(std::move(*b));
    else break;
  data_.restore(position);
  std::vector<int64_t> used(local_.size(), 0);
  workers_->run([&](size_t i) {
    const Device dev = device_of(*local_[i].model);
    size_t k = 0;
    used[i] = run_calibration(*local_[i].model, [&]() -> std::optional<ModelBatch> {
      if (k == batches.size()) return std::nullopt;
      return batch_on(batches[k++], dev);
    });
  });
  calibrated_ = true;
  if (used[0] > 0 && progress_ && !config_.quiet && writes_)
    *progress_ << "calibrated on " << used[0] << " micro-batch" << (used[0] == 1 ? "" : "es") << "\n";
}

fs::path Trainer::save_checkpoint() {
  LOFT_CHECK(!config_.run_dir.empty(), "save_checkpoint: no run directory configured");
  const fs::path root = config_.run_dir / "checkpoints";
  const fs::path final_dir = root / ("step-" + std::to_string(step_));
  // Every rank: the method state (gathered where sharded codes hold it), the replica check.
  workers_->run(
      [&](size_t i) {
        local_[i].model->gather_method_state();
        if (world_ > 1) check_replicas(i, step_);
      },
      [this] { abort_peers(); });
  if (!writes_) return final_dir;
  const fs::path tmp = root / checkpoint_temporary_name(step_, getpid());
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  write_safetensors(tmp / "adapter.safetensors", param_tensors(params_));
  std::map<std::string, Tensor> opt;
  for (auto& [name, t] : optimizer().state()) opt.emplace(name, t);
  write_safetensors(tmp / "optimizer.safetensors", opt);
  if (auto method_state = model_.method_state(); !method_state.empty())
    write_method_state(tmp / kMethodStateFile, method_state);
  nlohmann::json state = {{"step", step_},
                          {"optimizer_steps", optimizer().steps_taken()},
                          {"data", data_.state()}};
  write_file_atomic(tmp / "trainer_state.json", state.dump(2));
  // The folder appears under its real name only once complete: a crash leaves a .tmp folder.
  fs::remove_all(final_dir);
  fs::rename(tmp, final_dir);
  last_checkpoint_ = step_;
  return final_dir;
}

int64_t Trainer::resume(const std::optional<fs::path>& dir) {
  fs::path ckpt;
  if (dir) {
    ckpt = *dir;
  } else {
    const fs::path root = config_.run_dir / "checkpoints";
    int64_t best = -1;
    if (fs::exists(root))
      for (const auto& e : fs::directory_iterator(root))
        if (e.is_directory() && checkpoint_step(e.path()) > best) {
          best = checkpoint_step(e.path());
          ckpt = e.path();
        }
    if (best < 0) throw Error(cat("--resume: no checkpoint under ", root.string()));
  }
  const fs::path state_path = ckpt / "trainer_state.json";
  if (!fs::exists(state_path)) throw Error(cat("--resume: cannot read ", state_path.string()));
  const TrainerState state = trainer_state_from(read_json_file(state_path), state_path.string(), config_.steps);

  const fs::path adapter_file = ckpt / "adapter.safetensors";
  const SafetensorsReader adapter = SafetensorsReader::open(adapter_file);
  std::map<std::string, Tensor> values;
  for (const Param* p : params_) {
    if (!adapter.contains(p->name))
      throw Error(cat("--resume: ", adapter_file.string(), " has no tensor ", p->name));
    Tensor t = adapter.tensor(p->name);
    if (t.shape() != p->value.shape() || t.dtype() != DType::F32)
      throw Error(cat("--resume: tensor ", p->name, " is ", t.str(), ", expected ", p->value.str()));
    require_finite(t, p->name, "--resume: " + adapter_file.string());
    values.emplace(p->name, std::move(t));
  }
  const SafetensorsReader opt = SafetensorsReader::open(ckpt / "optimizer.safetensors");
  std::vector<std::pair<std::string, Tensor>> moments;
  for (const std::string& name : opt.names()) moments.emplace_back(name, opt.tensor(name));
  const fs::path state_file = ckpt / kMethodStateFile;
  const std::map<std::string, Tensor> method_state =
      fs::exists(state_file) ? read_method_state(state_file) : std::map<std::string, Tensor>{};
  // Every local rank loads the same state (a checkpoint resumes on any number of ranks).
  workers_->run([&](size_t i) {
    TrainableModel& m = *local_[i].model;
    for (Param* p : m.params()) p->value.copy_from(values.at(p->name));
    optimizers_[i]->load_state(moments, state.optimizer_steps);
    // Only the copies: an after_step here would apply an update (FALQON's rows) the saved state
    // already holds. A model whose method keeps state rejects a checkpoint without the file
    // (restore_method_state).
    m.refresh_copies();
    m.load_method_state(method_state, "--resume: " + state_file.string());
  });
  data_.restore(state.data);
  step_ = state.step;
  last_checkpoint_ = step_;
  calibrated_ = true;  // the saved method state holds what calibration chose
  if (!config_.run_dir.empty() && writes_) truncate_metrics(config_.run_dir / "metrics.jsonl", step_);
  return step_;
}

}  // namespace loft
