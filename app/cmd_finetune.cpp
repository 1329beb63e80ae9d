// loft finetune: train an adapter on a dataset. Resolves options (method defaults from
// docs/methods.md, overridable), prints the plan with its memory budget, then hands over to the
// Trainer; the final adapter is written in PEFT's layout to RUN/adapter, with a
// generation_config.json holding every stop id (the model's and the trained end-of-turn token).
#include <CLI/CLI.hpp>
#include <fstream>
#include <iostream>
#include <limits>

#include "app/commands.h"
#include "app/data_options.h"
#include "app/data_parallel_setup.h"
#include "app/interrupt.h"
#include "app/method_flags.h"
#include "app/model_loading.h"
#include "app/option_checks.h"
#include "app/run_outputs.h"
#include "datasets/data_loader.h"
#include "app/run_limits.h"
#include "app/run_plan.h"
#include "engine/io/atomic_file.h"
#include "engine/io/json_read.h"
#include "engine/peft/method_record.h"
#include "engine/peft/method_spec.h"
#include "engine/train/rank_workers.h"
#include "engine/train/run_folder.h"
#include "engine/train/trainer.h"
#include "models/llama/generation_config.h"
#include "models/llama/loading.h"
#include "models/llama/memory_estimate.h"
#include "tokenizer/tokenizer.h"

namespace loft::app {

namespace fs = std::filesystem;

namespace {

struct FinetuneOptions {
  std::string model, out = "runs/latest", device;
  DataOptions data;
  RunRequest run;  // method, hyper-parameters and sizes as given (app/run_plan.h resolves them)
  int64_t save_every = 0, log_every = 1;
  double weight_decay = 0;
  bool resume = false, overwrite = false;
  bool checkpoints_on_gpu = false;  // --checkpoints-on-gpu: no CheckpointOffload
  bool plan_only = false;           // --plan: print the resolved plan as JSON and stop
  std::string gpus;                 // --gpus N|LIST: data-parallel in this process
  int64_t nccl_timeout = 300;       // seconds a rank waits for its peers
  int64_t check_replicas_every = 0;
  bool shard_backbone = false;      // --shard-backbone: each rank keeps 1/N of the frozen codes
  int64_t grad_bucket_mib = 25;     // --grad-bucket-mib: the gradient sum's buckets (0: after the backward)
};

// Streams the data loader's batches onto the device as the model's micro-batches.
class LoaderSource : public BatchSource {
 public:
  LoaderSource(data::DataLoader loader, Device device) : loader_(std::move(loader)), device_(device) {}
  std::optional<ModelBatch> next() override {
    std::optional<data::PackedBatch> b = loader_.next();
    if (!b) return std::nullopt;
    return data::to_model_batch(*b, device_);
  }
  nlohmann::json state() const override { return loader_.state(); }
  void restore(const nlohmann::json& s) override { loader_.restore(s); }
  const data::DataLoader& loader() const { return loader_; }

 private:
  data::DataLoader loader_;
  Device device_;
};

std::string gib(int64_t bytes) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(2) << double(bytes) / double(1 << 30) << " GiB";
  return os.str();
}

void print_plan(std::ostream& os, const FinetuneOptions& o, const llama::LlamaConfig& cfg,
                const RunPlan& plan, const TrainerConfig& tc, Device device, int64_t trainable,
                const DataParallelSetup& dp, int host_share) {
  const MethodOptions& m = plan.method;
  os << "loft finetune plan\n"
     << "  model      " << o.model << " (" << cfg.num_layers << " layers, hidden " << cfg.hidden_size
     << ", vocab " << cfg.vocab_size << ")\n"
     << "  method     " << m.method;
  if (const std::string detail = method_spec(m.method).plan_detail(m); !detail.empty())
    os << " (" << detail << ")";
  os << " r=" << m.lora.rank << " alpha=" << m.lora.alpha
     << " on " << m.targets.size() << " projection kinds, " << trainable << " trainable parameters\n"
     << "  device     " << device.str() << (device.is_cpu() ? " (float32)" : " (bf16 activations)") << "\n";
  if (dp.active())
    os << "  ranks      " << dp.how << "; each takes " << tc.grad_accum / dp.world << " of the "
       << tc.grad_accum << " micro-batches of a step\n";
  os << "  batch      " << plan.batch << " rows = " << plan.micro_batch << " x " << tc.grad_accum
     << " accumulation, seq " << plan.seq << (o.data.packing ? ", packed" : ", padded") << "\n"
     << "  schedule   " << plan.schedule << " lr " << tc.schedule.base_lr << ", warmup "
     << tc.schedule.warmup_steps << ", " << tc.steps << " steps, clip ";
  if (tc.max_grad_norm > 0)
    os << tc.max_grad_norm;
  else
    os << "off";
  os << "\n"
     << "  run        " << tc.run_dir.string() << "\n";
  const llama::MethodMemory e = plan.memory(cfg, device, host_share);
  os << "  memory     ~" << gib(e.total()) << " estimated peak on " << (dp.active() ? "each GPU" : device.str()) << ": frozen weights "
     << gib(e.frozen_weights) << ", lm_head/embeddings " << gib(e.embeddings) << ", adapter+AdamW "
     << gib(e.adapter) << ", activations " << gib(e.activations)
     << (plan.grad_checkpointing ? " (checkpointed block inputs)" : "") << ", step working set "
     << gib(e.working);
  if (e.host_embeddings > 0) os << "; embedding table in host memory " << gib(e.host_embeddings);
  if (e.host_checkpoints > 0) os << "; block inputs in pinned host memory " << gib(e.host_checkpoints);
  os << "\n";
}

// A model trained with a template learns to end its turns with that template's end-of-turn token,
// so generation must stop there too, even where the model's own files do not list it.
void add_trained_stops(llama::GenerationSettings& gen, const data::DataLoader& loader, const Tokenizer& tok) {
  for (const auto& src : loader.sources())
    gen.add_stop(end_of_turn_id(src->chat_template(), tok), cat("chat template ", chat_template_name(src->chat_template())));
}

// Each file's format and template (and where the template came from), and the stop ids.
void print_data_plan(std::ostream& os, const data::DataLoader& loader, const llama::GenerationSettings& gen) {
  for (const auto& src : loader.sources())
    os << "  data       " << src->path().string() << ": " << data::record_format_name(src->format()) << ", template "
       << chat_template_name(src->chat_template()) << " (" << data::template_origin_text(src->template_origin())
       << ")\n";
  os << "  stop ids  ";
  for (int32_t id : gen.stop_ids()) os << ' ' << id;
  os << (gen.stops.empty() ? " none\n" : "\n");
}

// --resume rebuilds the model from this command line; it must be the method the run was trained
// with (run_config.json records it), or the checkpoint's tensors would land on another model.
void check_resume_method(const fs::path& run_dir, const MethodOptions& m) {
  const fs::path file = run_dir / "run_config.json";
  if (!fs::exists(file)) return;
  const nlohmann::json j = read_json_file(file);
  if (!j.is_object() || !j.contains("method_record")) return;  // older runs: nothing to compare
  if (j["method_record"] != method_options_to_json(m))
    throw UsageError(cat("--resume: ", file.string(), " records method ", brief(j["method_record"]),
                         "; this command line builds ", brief(method_options_to_json(m))));
}

// Each local rank's model: loaded on its GPU (in parallel, one thread per GPU), the same init
// on every rank (each with its own generator from --seed).
// `host_share`: the replicas on this host (threads and processes), which share its pinned memory.
// `gathers` (--shard-backbone, one per local rank): each backbone sharded as it is loaded.
std::vector<std::unique_ptr<llama::LlamaModel>> load_replicas(const FinetuneOptions& o, const RunPlan& plan,
                                                              const llama::LlamaConfig& cfg,
                                                              const std::vector<Device>& devices,
                                                              int host_share,
                                                              const std::vector<std::unique_ptr<ShardGather>>& gathers) {
  // Decided before anything is loaded, from what the device holds then (as check_fits saw it).
  const bool attention_in_host = plan.memory(cfg, devices.front(), host_share).attention_in_host;
  std::vector<std::unique_ptr<llama::LlamaModel>> models(devices.size());
  RankWorkers(devices).run([&](size_t i) {
    std::mt19937_64 rng(o.run.seed);
    models[i] = llama::load_model(o.model, devices[i], make_linear_factory(plan.method, rng),
                                  gathers.empty() ? nullptr : gathers[i].get());
    models[i]->set_grad_checkpointing(plan.grad_checkpointing);
    models[i]->set_checkpoint_offload(plan.checkpoint_offload);
    models[i]->set_token_tile(plan.token_tile);
    models[i]->set_host_memory_share(host_share);
    models[i]->set_attention_in_host(attention_in_host);
    if (plan.init) llama::apply_adapter(*models[i], *plan.init, plan.init_adapter);
  });
  return models;
}

// --shard-backbone needs data-parallel ranks to spread the codes over.
void check_shard_has_ranks(bool shard_backbone, bool parallel) {
  if (shard_backbone && !parallel)
    throw UsageError("--shard-backbone spreads the frozen codes over data-parallel ranks: give --gpus N "
                     "or launch one process per GPU with torchrun's variables");
}

// --plan: what this command line would run, as JSON on stdout; nothing is loaded but the
// config (and an --init-adapter), the run folder is not touched and no data is read.
// With --gpus, the plan is each GPU's (every rank holds a replica and its share of the micro-batches);
// with --shard-backbone too, each GPU's share of the frozen codes (the GPUs counted from --gpus or
// torchrun's WORLD_SIZE, not claimed: a plan may be made for another machine).
void print_plan_json(const FinetuneOptions& o) {
  const std::optional<parallel::LaunchEnv> env = parallel::launch_env();
  const int world = env ? env->world_size
                        : o.gpus.empty() ? 1 : int(parse_gpus(o.gpus, std::numeric_limits<int>::max()).size());
  check_shard_has_ranks(o.shard_backbone, !o.gpus.empty() || env.has_value());
  // A data-parallel plan is the first rank's GPU's; it may be one this machine lacks (gpu_room).
  const Device device = env                ? Device::cuda(env->local_rank)
                        : !o.gpus.empty() ? Device::cuda(parse_gpus(o.gpus, std::numeric_limits<int>::max())[0])
                                          : resolve_device(o.device, &std::cerr);
  RunPlan plan = plan_run(o.run, device);
  if (o.shard_backbone) plan.shard_world = world;
  const llama::LlamaConfig cfg = llama::load_llama_config(o.model);
  plan.resolve_memory_choices(cfg, {device});
  nlohmann::ordered_json j = plan.to_json(cfg, device);
  j["model"] = o.model;
  j["out"] = o.out;
  j["gpus"] = o.gpus.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(o.gpus);
  std::cout << j.dump() << std::endl;
}

void run_finetune(const FinetuneOptions& in, const RunOutputOptions& run_outputs) {
  FinetuneOptions o = in;
  o.run.seq = o.data.seq;
  o.run.checkpoint_offload = !o.checkpoints_on_gpu;
  if (o.plan_only) return print_plan_json(o);
  if (o.resume && o.overwrite) throw UsageError("--resume and --overwrite contradict each other");
  const std::optional<parallel::LaunchEnv> env = parallel::launch_env();
  const bool parallel = !o.gpus.empty() || env.has_value();
  check_shard_has_ranks(o.shard_backbone, parallel);
  if (parallel) check_device_beside_ranks(o.device, o.gpus.empty() ? "torchrun's WORLD_SIZE" : "--gpus " + o.gpus);
  const Device first_device = parallel ? Device::cuda(0) : resolve_device(o.device, &std::cerr);
  const bool rank0 = !env || env->rank == 0;
  std::optional<FolderLock> lock;  // rank 0 holds the run folder until the run ends
  if (rank0)
    lock.emplace(claim_run_folder(o.out, o.resume      ? RunFolderUse::resume
                                         : o.overwrite ? RunFolderUse::overwrite
                                                       : RunFolderUse::fresh));
  RunPlan plan = plan_run(o.run, first_device);
  const MethodOptions& m = plan.method;

  auto tok = load_tokenizer(o.model);
  data::DataConfig dc = resolve_data_config(o.data, plan.micro_batch, o.run.seed, plan.steps > 0);
  use_model_chat_template(dc, o.model);
  llama::GenerationSettings gen = llama::load_generation_settings(o.model, *tok);
  const llama::LlamaConfig cfg = llama::load_llama_config(o.model);
  check_tokenizer_fits(*tok, cfg, o.model);

  // The ranks meet here, once every option is checked (a rank that fails before would leave the
  // others waiting for it until --nccl-timeout).
  const DataParallelSetup dp =
      setup_data_parallel(o.gpus, env, std::chrono::seconds(o.nccl_timeout), o.out, o.grad_bucket_mib);
  std::vector<Device> devices{first_device};
  if (dp.active()) {
    devices.clear();
    for (int g : dp.devices) devices.push_back(Device::cuda(g));
    const int64_t micro_batches = plan.grad_accum();
    if (micro_batches % dp.world != 0)
      throw UsageError(cat("--batch ", plan.batch, " / --micro-batch ", plan.micro_batch, " = ", micro_batches,
                           " micro-batches a step cannot be shared evenly by ", dp.world, " GPUs"));
  }
  const Device device = devices.front();  // local rank 0's: evaluation, checkpoints, the plan
  const int host_share = env ? env->local_world_size : int(devices.size());  // replicas pinning this host's RAM
  if (o.shard_backbone) plan.shard_world = dp.world;
  plan.resolve_memory_choices(cfg, devices, host_share);
  for (const Device& dev : devices)
    plan.check_fits(cfg, dev, host_share);
  std::ostream* out = dp.writes() ? &std::cout : nullptr;  // the other ranks stay quiet

  TrainerConfig tc;
  tc.grad_accum = plan.grad_accum();
  tc.steps = plan.steps;
  if (tc.steps == 0) {  // one pass over the data decides the length (and the schedule's end)
    if (out) std::cerr << "counting batches for " << dc.epochs << " epoch(s)...\n";
    auto counter = data::DataLoader::training(dc, *tok);
    int64_t n = 0;
    while (counter.next()) ++n;
    tc.steps = (n + tc.grad_accum - 1) / tc.grad_accum;
    if (tc.steps == 0) throw Error("--data holds no trainable example");
  }
  if (o.run.warmup > tc.steps)  // given (a method's default may exceed a short run: the schedule copes)
    throw UsageError(cat("--warmup ", o.run.warmup, " is more than the run's ", tc.steps,
                         " steps: the learning rate would never reach --lr"));
  tc.schedule = {parse_schedule(plan.schedule), plan.lr, plan.warmup, tc.steps};
  tc.max_grad_norm = plan.max_grad_norm;
  tc.adamw.weight_decay = o.weight_decay;
  tc.save_every = o.save_every;
  tc.log_every = o.log_every;
  tc.eval_every = o.data.eval_every;
  tc.run_dir = o.out;
  tc.check_replicas_every = o.check_replicas_every;
  // Ctrl-C/SIGTERM checkpoint and stop (app/interrupt.h); a torchrun rank keeps the default, as
  // its peers would wait for it in the next collective.
  std::optional<StopSignals> stop;
  if (!env) tc.stop = &stop.emplace().flag();

  const auto gathers = shard_gathers(dp, o.shard_backbone);  // before the models that hold them
  std::vector<std::unique_ptr<llama::LlamaModel>> models =
      load_replicas(o, plan, cfg, devices, host_share, gathers);
  llama::LlamaModel& model = *models.front();
  int64_t trainable = 0;
  for (const Param* p : model.params()) trainable += p->value.numel();
  if (out) print_plan(*out, o, cfg, plan, tc, device, trainable, dp, host_share);

  // Several local ranks take their micro-batches from the host; one takes them on its device.
  LoaderSource source(data::DataLoader::training(dc, *tok), devices.size() > 1 ? Device::cpu() : device);
  add_trained_stops(gen, source.loader(), *tok);
  if (out) print_data_plan(*out, source.loader(), gen);
  DataParallelRanks ranks{dp.world, {}};
  for (size_t i = 0; i < models.size(); ++i)
    ranks.local.push_back({models[i].get(), dp.active() ? dp.reducers[i].get() : nullptr,
                           dp.active() ? dp.ranks[i] : 0});
  Trainer trainer(std::move(ranks), source, tc, out);
  if (data::DataLoader::has_validation(dc)) {
    // Local rank 0's replica scores the validation data; with --shard-backbone every local rank
    // runs the same batches beside it, since each layer's codes are gathered from all of them
    // (torchrun's processes each run this evaluator already).
    const auto mean = [](const LossSums& t) { return t.tokens ? t.loss_sum / double(t.tokens) : 0.0; };
    trainer.set_evaluator([&] {
      auto val = data::DataLoader::validation(dc, *tok);
      std::vector<LossSums> totals(o.shard_backbone ? models.size() : 1);
      const auto score = [&](size_t i, const data::PackedBatch& b) {
        const LossSums s = models[i]->evaluate(data::to_model_batch(b, devices[i]));
        totals[i].loss_sum += s.loss_sum;
        totals[i].tokens += s.tokens;
      };
      if (totals.size() == 1) {
        while (auto b = val.next()) score(0, *b);
        return mean(totals[0]);
      }
      std::vector<data::PackedBatch> batches;
      while (auto b = val.next()) batches.push_back(std::move(*b));
      RankWorkers(devices).run([&](size_t i) {
        for (const data::PackedBatch& b : batches) score(i, b);
      });
      return mean(totals[0]);
    });
  }
  if (o.resume) {
    check_resume_method(tc.run_dir, m);
    const int64_t at = trainer.resume();
    if (out) *out << "resumed at step " << at << "\n";
  }
  if (!dp.writes()) {  // rank 0 writes the run folder; this rank only trains
    trainer.run();
    return;
  }
  write_file_atomic(
      tc.run_dir / "run_config.json",
      nlohmann::json{{"model", o.model},       {"method", m.method},   {"rank", m.lora.rank},
                     {"alpha", m.lora.alpha},  {"targets", m.targets}, {"lr", plan.lr},
                     {"schedule", plan.schedule}, {"warmup", plan.warmup}, {"steps", tc.steps},
                     {"batch", plan.batch},       {"micro_batch", plan.micro_batch},
                     {"seq", plan.seq},           {"seed", o.run.seed},       {"device", device.str()},
                     {"data_parallel_ranks", dp.world},
                     {"stop_ids", gen.stop_ids()}, {"method_record", method_options_to_json(m)},
                     // what `generate --chat` renders prompts with for this run's adapter
                     {"chat_template", std::string(chat_template_name(source.loader().sources().front()->chat_template()))}}
              .dump(2) + "\n");
  RunOutputs outputs(run_outputs, tc.run_dir);
  outputs.write_config({{"lr", plan.lr}, {"schedule", plan.schedule}, {"warmup", plan.warmup}, {"batch", plan.batch},
                        {"max-grad-norm", plan.max_grad_norm}, {"lora-rank", m.lora.rank}, {"lora-alpha", m.lora.alpha},
                        {"method", plan.init_adapter.empty() ? nlohmann::json(m.method) : nlohmann::json()}});
  trainer.run([&](const StepMetrics& s) { outputs.on_step(s); });
  if (trainer.stopped() && trainer.step() == 0)
    throw Interrupted("stopped before the first step; nothing was trained", stop->flag());
  const fs::path adapter_dir = tc.run_dir / "adapter";
  save_peft_adapter(adapter_dir, llama::extract_adapter(model, m, o.model));
  write_file_atomic(adapter_dir / "generation_config.json", gen.to_generation_config_json().dump(2) + "\n");
  std::cout << "adapter written to " << adapter_dir.string() << " after " << trainer.step()
            << " steps\n";
  if (trainer.stopped())
    throw Interrupted(cat("stopped at step ", trainer.step(), "; continue with --resume"), stop->flag());
  const auto stats = source.loader().stats();
  if (stats.skipped_bad) std::cout << stats.summary() << "\n";
  outputs.finish(stats);
}

}  // namespace

void add_finetune_command(CLI::App& root) {
  auto o = std::make_shared<FinetuneOptions>();
  CLI::App* cmd = root.add_subcommand("finetune", "train an adapter on a dataset");
  cmd->add_option("--model", o->model, "Hugging Face Llama folder (config.json, *.safetensors, tokenizer.json or tokenizer.model)")
      ->required();
  add_data_options(*cmd, o->data, DataUse::training);
  cmd->add_option("--out", o->out, "run folder: metrics.jsonl, checkpoints/, adapter/")->capture_default_str();
  cmd->add_option("--method", o->run.method,
                  cat(method_name_list(" or "), "; default ", default_method(),
                      ", or the --init-adapter's recorded method"));
  add_method_flags(*cmd, o->run.method_flags, MethodFlagUse::finetune);
  cmd->add_option("--steps", o->run.steps, "optimizer steps (default: one pass of --epochs over the data)")->transform(int_in(1));
  cmd->add_option("--batch", o->run.batch, "rows per optimizer step (default: per method)")->transform(rows_bound());
  cmd->add_option("--micro-batch", o->run.micro_batch, "rows per forward/backward; --batch/--micro-batch accumulate")->transform(rows_bound());
  cmd->add_option("--lr", o->run.lr, "peak learning rate (default: per method)")->check(positive_finite());
  cmd->add_option("--schedule", o->run.schedule, "constant, linear or cosine (default: per method)");
  cmd->add_option("--warmup", o->run.warmup, "linear warm-up steps (default: per method)")->transform(int_in(0));
  cmd->add_option("--max-grad-norm", o->run.max_grad_norm, "clip the global grad norm; 0 = off (default: per method)")->check(non_negative_finite());
  cmd->add_option("--weight-decay", o->weight_decay, "AdamW decoupled weight decay")->capture_default_str()->check(non_negative_finite());
  cmd->add_option("--lora-rank", o->run.rank, "adapter rank r (default: per method)")->transform(rank_bound());
  cmd->add_option("--lora-alpha", o->run.alpha, "adapter alpha (scale alpha/r; default: per method)")->check(positive_finite());
  cmd->add_option("--lora-targets", o->run.targets, "projections to adapt: all or a comma list of q_proj,...")
      ->capture_default_str();
  cmd->add_option("--init-adapter", o->run.init_adapter,
                  "start from a PEFT adapter folder (and, unless --method says otherwise, its recorded method)");
  cmd->add_option("--seed", o->run.seed, "seed for adapter init and data order")->capture_default_str()->transform(seed_bound());
  cmd->add_option("--save-every", o->save_every, "checkpoint every N steps (0: only the final adapter)")->transform(int_in(0));
  cmd->add_flag("--resume", o->resume, "continue from the newest checkpoint in --out");
  cmd->add_flag("--overwrite", o->overwrite,
                "replace the run already in --out (its metrics, checkpoints and adapter)");
  cmd->add_flag("--grad-checkpointing", o->run.grad_checkpointing, "keep only block inputs; recompute in backward");
  cmd->add_flag("--checkpoints-on-gpu", o->checkpoints_on_gpu,
                "with --grad-checkpointing on a GPU: keep the block inputs on the GPU instead of "
                "pinned host memory");
  cmd->add_option("--token-tile", o->run.token_tile,
                  "with --grad-checkpointing: tokens per tile of a block's norms, projections and MLP "
                  "(a multiple of 1024; 0: untiled)")
      ->capture_default_str()->transform(int_in(0));
  cmd->add_flag("--plan", o->plan_only,
                "print what this command line would run as one JSON object (the method, every "
                "default filled in, the memory estimate and whether it fits the device) and stop; "
                "touches no run folder and reads no data");
  cmd->add_option("--log-every", o->log_every, "progress line every N steps")->capture_default_str()->transform(int_in(1));
  add_device_option(*cmd, o->device);
  cmd->add_option("--gpus", o->gpus,
                  "data-parallel on several GPUs in this process: N (the first N) or a list (0,2); "
                  "each GPU takes an equal share of every step's micro-batches");
  cmd->add_option("--nccl-timeout", o->nccl_timeout,
                  "seconds a data-parallel rank waits for its peers before it stops with an error")
      ->capture_default_str()->transform(int_in(1, 86400));
  add_grad_bucket_option(*cmd, o->grad_bucket_mib);
  cmd->add_flag("--shard-backbone", o->shard_backbone,
                "data-parallel: each GPU keeps 1/N of every layer's frozen codes and gathers a layer's "
                "before it runs (FSDP-style; the same results)");
  cmd->add_option("--check-replicas-every", o->check_replicas_every,
                  "data-parallel: compare the ranks' adapter, optimizer and method state every N steps "
                  "(0: before each checkpoint only)")
      ->capture_default_str()->transform(int_in(0));
  auto run_outputs = add_run_output_options(*cmd);
  cmd->callback([o, run_outputs] { run_finetune(*o, *run_outputs); });
}

}  // namespace loft::app
