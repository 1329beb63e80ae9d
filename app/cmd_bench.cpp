// loft bench: times LoRA-family training steps on a random-init Llama of a named shape (or a real
// checkpoint) and reports step time, tokens/s and peak device memory, as a table or one JSON
// object. The numerics live in engine/train/bench and models/llama/bench_model.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>

#include "app/commands.h"
#include "engine/peft/method.h"
#include "engine/core/error.h"
#include "engine/io/safetensors_checkpoint.h"
#include "engine/peft/lora_linear.h"
#include "engine/train/bench.h"
#include "models/llama/bench_model.h"
#include "models/llama/model.h"

namespace loft::app {

namespace {

struct BenchOptions {
  std::string shape, model, method = "lora", device, halo_format = "fp8";
  int halo_level = 1, falqon_topk = 0;
  std::string falqon_buffer = "reset";
  int64_t batch = 4, seq = 512, steps = 8, warmup = 3;
  int rank = 64;
  float alpha = 16.0f;
  bool grad_checkpointing = false, json = false;
  uint64_t seed = 0;
};

// The methods bench can build; the low-precision ones join here as they land.
const std::vector<std::string> kMethods = {"lora", "qlora", "falqon", "halo"};
constexpr const char* kTargets = "q,k,v,o,gate,up,down";

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

void check_options(const BenchOptions& o) {
  if (o.shape.empty() == o.model.empty())
    throw UsageError("give exactly one of --shape NAME (" + joined(llama::bench_shape_names()) +
                     ") or --model DIR");
  if (std::find(kMethods.begin(), kMethods.end(), o.method) == kMethods.end())
    throw UsageError(cat("--method ", o.method, ": unknown method (known: ", joined(kMethods), ")"));
  for (auto [name, v] : {std::pair{"--batch", o.batch}, std::pair{"--seq", o.seq},
                         std::pair{"--steps", o.steps}, std::pair{"--rank", int64_t(o.rank)}})
    if (v < 1) throw UsageError(cat(name, " must be a positive integer, got ", v));
  if (o.warmup < 0) throw UsageError(cat("--warmup must be >= 0, got ", o.warmup));
  if (!std::isfinite(o.alpha) || o.alpha <= 0)
    throw UsageError(cat("--alpha must be a positive number, got ", o.alpha));
}

llama::LlamaConfig config_for(const BenchOptions& o) {
  if (!o.model.empty()) {
    if (!std::filesystem::is_directory(o.model))
      throw UsageError(cat("--model ", o.model, ": not a folder"));
    return llama::load_llama_config(o.model);
  }
  auto cfg = llama::bench_shape_config(o.shape);
  if (!cfg)
    throw UsageError(cat("--shape ", o.shape, ": unknown shape (known: ",
                         joined(llama::bench_shape_names()), ")"));
  return *cfg;
}

llama::LlamaWeights weights_for(const BenchOptions& o, const llama::LlamaConfig& cfg, DType dtype,
                                Device device) {
  if (!o.model.empty())
    return llama::load_llama_weights(SafetensorsCheckpoint::open(o.model), cfg, dtype, device);
  return llama::random_llama_weights(cfg, dtype, device, o.seed);
}

Batch random_batch(const BenchOptions& o, int64_t vocab, Device device) {
  std::mt19937_64 rng(o.seed + 1);
  std::uniform_int_distribution<int32_t> token(0, int32_t(vocab - 1));
  std::vector<int32_t> ids(size_t(o.batch * o.seq));
  for (int32_t& t : ids) t = token(rng);
  return make_batch(ids, ids, {}, o.batch, o.seq, device);
}

constexpr double kGiB = double(int64_t(1) << 30);

void print_plan(std::ostream& out, const BenchOptions& o, const llama::LlamaConfig& c,
                const std::string& name, Device device, DType dtype, int64_t params) {
  char line[400];
  std::snprintf(line, sizeof line,
                "bench    %s: %lld layers, hidden %lld, intermediate %lld, %lld heads / %lld KV "
                "heads, vocab %lld\n"
                "method   %s r=%d alpha=%g on %s (AdamW, lr 2e-4)\n"
                "batch    %lld x %lld = %lld tokens/step, grad checkpointing %s, %lld warm-up + "
                "%lld timed steps\n"
                "device   %s, %s weights: %lld parameters, %.3f GiB\n",
                name.c_str(), (long long)c.num_layers, (long long)c.hidden_size,
                (long long)c.intermediate_size, (long long)c.num_heads,
                (long long)c.num_kv_heads, (long long)c.vocab_size, o.method.c_str(), o.rank,
                double(o.alpha), kTargets, (long long)o.batch, (long long)o.seq,
                (long long)(o.batch * o.seq), o.grad_checkpointing ? "on" : "off",
                (long long)o.warmup, (long long)o.steps, device.str().c_str(),
                std::string(dtype_name(dtype)).c_str(), (long long)params,
                double(params) * double(dtype_size(dtype)) / kGiB);
  out << line << std::flush;
}

struct Report {
  std::string name;
  Device device;
  int64_t parameters = 0, trainable = 0;
  BenchTimes times;
};

nlohmann::ordered_json to_json(const BenchOptions& o, const Report& r) {
  return {{"shape", r.name},
          {"method", o.method},
          {"batch", o.batch},
          {"seq", o.seq},
          {"steps", o.steps},
          {"warmup", o.warmup},
          {"rank", o.rank},
          {"alpha", o.alpha},
          {"grad_checkpointing", o.grad_checkpointing},
          {"step_time_s_median", r.times.median_s},
          {"step_time_s_mean", r.times.mean_s},
          {"step_times_s", r.times.step_seconds},
          {"tokens_per_s", r.times.tokens_per_s},
          {"peak_memory_gib", double(r.times.peak_bytes) / kGiB},
          {"parameters", r.parameters},
          {"trainable_parameters", r.trainable},
          {"last_loss", r.times.last_loss},
          {"device", r.device.str()}};
}

void print_table(std::ostream& out, const BenchOptions& o, const Report& r) {
  char line[300];
  const char* fmt = "%-16s %-6s %5s %5s %3s %12s %12s %10s %9s %14s\n";
  std::snprintf(line, sizeof line, fmt, "shape", "method", "batch", "seq", "gc", "s/step (med)",
                "s/step (mean)", "tokens/s", "peak GiB", "trainable");
  out << '\n' << line;
  std::snprintf(line, sizeof line, "%-16s %-6s %5lld %5lld %3s %12.4f %12.4f %10.0f %9.2f %14lld\n",
                r.name.c_str(), o.method.c_str(), (long long)o.batch, (long long)o.seq,
                o.grad_checkpointing ? "yes" : "no", r.times.median_s, r.times.mean_s,
                r.times.tokens_per_s, double(r.times.peak_bytes) / kGiB,
                (long long)r.trainable);
  out << line << "parameters " << r.parameters << " (base + adapter); last loss "
      << r.times.last_loss << "; peak = allocated device memory over the timed steps\n";
}

void run_bench(const BenchOptions& o) {
  check_options(o);
  const Device device = resolve_device(o.device, &std::cerr);
  const DType dtype = device.is_cpu() ? DType::F32 : DType::BF16;
  const llama::LlamaConfig cfg = config_for(o);
  std::ostream& plan_out = o.json ? std::cerr : std::cout;  // --json: stdout holds the JSON only
  Report r;
  r.name = o.model.empty() ? o.shape : o.model;
  r.device = device;
  const int64_t base = llama::llama_parameter_count(cfg);
  print_plan(plan_out, o, cfg, r.name, device, dtype, base);

  std::mt19937_64 adapter_rng(o.seed);
  const MethodOptions method{o.method, {o.rank, o.alpha}, parse_lora_targets("all"),
                             {o.halo_level, parse_halo_format(o.halo_format)},
                             {o.falqon_topk, parse_falqon_buffer(o.falqon_buffer), o.seed}};
  llama::LlamaModel model(cfg, weights_for(o, cfg, dtype, device),
                          make_linear_factory(method, adapter_rng));
  model.set_grad_checkpointing(o.grad_checkpointing);
  const std::vector<Param*> params = model.params();
  for (const Param* p : params) r.trainable += p->value.numel();
  r.parameters = base + r.trainable;
  AdamW optimizer(params, AdamWConfig{.weight_decay = 0.01});  // torch.optim.AdamW's default
  const Batch batch = random_batch(o, cfg.vocab_size, device);
  r.times = time_training_steps(model, optimizer, batch, device,
                                {.warmup = o.warmup, .steps = o.steps, .lr = 2e-4});
  if (o.json)
    std::cout << to_json(o, r).dump() << '\n';
  else
    print_table(std::cout, o, r);
  std::cout.flush();
}

}  // namespace

void add_bench_command(CLI::App& root) {
  CLI::App* cmd = root.add_subcommand(
      "bench", "time training steps on a random-init Llama shape (or a checkpoint)");
  auto o = std::make_shared<BenchOptions>();
  auto* shape = cmd->add_option("--shape", o->shape,
                                "model shape: " + joined(llama::bench_shape_names()));
  auto* model = cmd->add_option("--model", o->model, "Hugging Face Llama folder instead of a shape");
  shape->excludes(model);
  cmd->add_option("--halo-level", o->halo_level, "HALO rotation level 0 or 1")->capture_default_str();
  cmd->add_option("--halo-format", o->halo_format, "HALO format: fp8 or int8")->capture_default_str();
  cmd->add_option("--falqon-topk", o->falqon_topk, "FALQON rows updated per step (0: the rank)")->capture_default_str();
  cmd->add_option("--falqon-buffer", o->falqon_buffer, "FALQON buffer: reset or accumulate")->capture_default_str();
  cmd->add_option("--method", o->method, "fine-tuning method: " + joined(kMethods))
      ->capture_default_str();
  cmd->add_option("--batch", o->batch, "sequences per step")->capture_default_str();
  cmd->add_option("--seq", o->seq, "tokens per sequence")->capture_default_str();
  cmd->add_option("--steps", o->steps, "timed steps")->capture_default_str();
  cmd->add_option("--warmup", o->warmup, "untimed steps first")->capture_default_str();
  cmd->add_option("--rank", o->rank, "LoRA rank")->capture_default_str();
  cmd->add_option("--alpha", o->alpha, "LoRA alpha")->capture_default_str();
  cmd->add_option("--seed", o->seed, "seed of the random weights, adapter and tokens")
      ->capture_default_str();
  cmd->add_flag("--grad-checkpointing", o->grad_checkpointing,
                "recompute each block's forward in backward");
  add_device_option(*cmd, o->device);
  cmd->add_flag("--json", o->json, "print one JSON object instead of the table");
  cmd->callback([o] { run_bench(*o); });
}

}  // namespace loft::app
