// `loft bench step`: times LoRA-family training steps on a random-init Llama of a named shape (or
// a real checkpoint) for one or more methods, each on a fresh model, and reports tokens/s, step
// time, peak device memory, where a step's time goes (a profiled breakdown) and whether it fits
// the device, as a table or one JSON object. The numerics live in engine/train/bench and
// models/llama/bench_model. --gpus N|LIST times data-parallel steps instead
// (engine/train/bench_parallel): every GPU takes the same batch, so the scaling over one GPU is
// tokens/s(N) / tokens/s(the same bench without it).
#include "app/bench_step.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "app/data_parallel_setup.h"
#include "app/run_limits.h"
#include "app/run_plan.h"
#include "engine/core/error.h"
#include "engine/device/device_info.h"
#include "engine/device/memory.h"
#include "engine/io/safetensors_checkpoint.h"
#include "engine/ops/ops.h"
#include "engine/peft/method_spec.h"
#include "engine/train/bench.h"
#include "engine/train/bench_parallel.h"
#include "engine/train/rank_workers.h"
#include "models/llama/bench_model.h"
#include "models/llama/model.h"

namespace loft::app {

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

llama::LlamaConfig bench_config(const std::string& shape, const std::string& model) {
  if (shape.empty() == model.empty())
    throw UsageError("give exactly one of --shape NAME (" + joined(llama::bench_shape_names()) +
                     ") or --model DIR");
  if (!model.empty()) {
    if (!std::filesystem::is_directory(model))
      throw UsageError(cat("--model ", model, ": not a folder"));
    return llama::load_llama_config(model);
  }
  auto cfg = llama::bench_shape_config(shape);
  if (!cfg)
    throw UsageError(cat("--shape ", shape, ": unknown shape (known: ",
                         joined(llama::bench_shape_names()), ")"));
  return *cfg;
}

namespace {

constexpr const char* kTargets = "q,k,v,o,gate,up,down";

// A --method item is a method name with optional ':'-separated variants that override the
// method's options for that item alone, so one call can compare, e.g.,
// "halo,halo:int8,halo:nf4,halo:l1" (each method's variants: MethodSpec::apply_variant). The
// item, as given, names the run in the table and the JSON. Its plan is the one finetune makes
// (app/run_plan.h) at bench's rank and alpha: the same method options, the method's grad-norm
// clip unless --max-grad-norm says otherwise, the same memory estimate.
RunPlan plan_for(const StepBenchOptions& o, const std::string& item) {
  RunRequest r;
  r.method = item;
  r.variants = true;
  r.rank = o.rank;
  r.alpha = o.alpha;
  r.method_flags = o.method_flags;
  r.seed = o.seed;
  r.batch = r.micro_batch = o.batch;
  r.seq = o.seq;
  r.max_grad_norm = o.max_grad_norm;
  r.grad_checkpointing = o.grad_checkpointing;
  r.checkpoint_offload = !o.checkpoints_on_gpu;
  r.token_tile = o.token_tile;
  return plan_run(r, Device::cpu());  // the micro-batch is given: the device does not choose it
}

// ...and reported here, so a run's JSON and plan say exactly what was built.
nlohmann::ordered_json options_json(const MethodOptions& m) {
  nlohmann::ordered_json j{{"rank", m.lora.rank}, {"alpha", m.lora.alpha}};
  method_spec(m.method).bench_options(m, j);
  return j;
}

// --method: one name or a comma list, each benchmarked in turn.
std::vector<std::string> parse_methods(const std::string& spec) {
  std::vector<std::string> out;
  std::stringstream ss(spec);
  for (std::string item; std::getline(ss, item, ',');) {
    if (!find_method_spec(item.substr(0, item.find(':'))))
      throw UsageError(cat("--method ", item.empty() ? "''" : item, ": unknown method (known: ",
                           joined(method_names()), "; give one or a comma list)"));
    out.push_back(item);
  }
  if (out.empty() || spec.back() == ',')
    throw UsageError(cat("--method '", spec, "': give a method or a comma list of them"));
  return out;
}

// Checks every option before anything runs, so a bad value for the third method does not
// surface after the first two have been timed; returns the model's config.
llama::LlamaConfig check_options(const StepBenchOptions& o) {
  llama::LlamaConfig cfg = bench_config(o.shape, o.model);
  for (const std::string& m : parse_methods(o.methods)) (void)plan_for(o, m);  // validates each method's options
  return cfg;
}

llama::LlamaWeights weights_for(const StepBenchOptions& o, const llama::LlamaConfig& cfg, DType dtype,
                                Device device) {
  if (!o.model.empty())
    return llama::load_llama_weights(SafetensorsCheckpoint::open(o.model), cfg, dtype, device,
                                     llama::Fp8Load::dequantize, llama::Projections::as_stored);
  // Each dense projection is drawn just before its method re-encodes it (as a checkpoint loads
  // one at a time): a 13B model builds under --gpu-memory-limit 24GiB, a 70B one beside it.
  return llama::random_llama_weights(cfg, dtype, device, o.seed, /*projections_drawn=*/true);
}

int64_t masked_prompt(const StepBenchOptions& o) { return int64_t(std::llround(o.prompt_fraction * double(o.seq))); }

ModelBatch random_batch(const StepBenchOptions& o, int64_t vocab, Device device) {
  std::mt19937_64 rng(o.seed + 1);
  std::uniform_int_distribution<int32_t> token(0, int32_t(vocab - 1));
  std::vector<int32_t> ids(size_t(o.batch * o.seq));
  for (int32_t& t : ids) t = token(rng);
  // As a chat template masks the prompt: the first masked_prompt(o) labels of each row.
  std::vector<int32_t> labels = ids;
  for (int64_t r = 0; r < o.batch; ++r)
    std::fill_n(labels.begin() + r * o.seq, masked_prompt(o), ops::kIgnoreIndex);
  return make_batch(ids, labels, {}, o.batch, o.seq, device);
}

constexpr double kGiB = double(int64_t(1) << 30);

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

// "r=64 alpha=16 halo_level=1 halo_format=fp8"
std::string options_str(const nlohmann::ordered_json& j) {
  std::string s;
  for (const auto& [key, value] : j.items()) {
    const std::string v = value.is_string()         ? value.get<std::string>()
                          : value.is_number_float() ? fmt("%g", value.get<double>())
                                                    : value.dump();
    s += (s.empty() ? "" : " ") + (key == "rank" ? std::string("r") : key) + "=" + v;
  }
  return s;
}

struct Setup {
  std::string name;  // the shape, or the --model folder
  llama::LlamaConfig config;
  Device device;                // with --gpus: rank 0's GPU
  std::vector<Device> devices;  // --gpus: every rank's GPU, in rank order; else {device}
  std::string parallel;         // --gpus: how the ranks run (DataParallelSetup::how)
  DeviceInfo info;
  DType dtype;
  int64_t base_parameters = 0;
};

void print_plan(std::ostream& out, const StepBenchOptions& o, const Setup& s,
                const std::vector<std::string>& methods) {
  const llama::LlamaConfig& c = s.config;
  char line[600];
  std::snprintf(line, sizeof line,
                "bench    %s: %lld layers, hidden %lld, intermediate %lld, %lld heads / %lld KV "
                "heads, vocab %lld\n"
                "methods  %s, each on a fresh model (AdamW, lr 2e-4, finetune's step)\n"
                "batch    %lld x %lld = %lld tokens/step%s, grad checkpointing %s, %lld warm-up + "
                "%lld timed + %lld profiled steps\n"
                "device   %s (%s), %s weights: %lld parameters, %.3f GiB\n",
                s.name.c_str(), (long long)c.num_layers, (long long)c.hidden_size,
                (long long)c.intermediate_size, (long long)c.num_heads,
                (long long)c.num_kv_heads, (long long)c.vocab_size, joined(methods).c_str(),
                (long long)o.batch, (long long)o.seq, (long long)(o.batch * o.seq),
                s.parallel.empty() ? "" : " per GPU", o.grad_checkpointing ? "on" : "off",
                (long long)o.warmup, (long long)o.steps,
                (long long)o.profiled, s.device.str().c_str(), s.info.name.c_str(),
                std::string(dtype_name(s.dtype)).c_str(), (long long)s.base_parameters,
                double(s.base_parameters) * double(dtype_size(s.dtype)) / kGiB);
  out << line;
  if (masked_prompt(o) > 0)
    out << "prompt   the first " << masked_prompt(o) << " of each row's " << o.seq
        << " labels have no target (--prompt-fraction): the loss head skips them\n";
  if (!s.parallel.empty())
    out << "gpus     " << s.parallel << ": every GPU takes the batch, tokens/s counts all of them; "
        << "scaling = these tokens/s / those of the same bench without --gpus (one GPU); no "
           "profiled breakdown with --gpus\n";
  if (o.shard_backbone)
    out << "shards   --shard-backbone: each GPU keeps 1/" << s.devices.size()
        << " of every layer's frozen codes and gathers a layer's before it runs\n";
  out << std::flush;
}

// One method's result. A method that ran out of memory has `error` set and no times.
struct MethodRun {
  std::string method;
  nlohmann::ordered_json options;
  double max_grad_norm = 0;
  int64_t trainable = 0;
  std::pair<size_t, size_t> backbone{0, 0};  // --shard-backbone: a rank's shares and one slot, bytes
  int64_t estimated_peak = 0;  // models/llama/memory_estimate's total for this method and shape
  BenchTimes times;
  std::string error;
};

bool is_out_of_memory(const Error& e) {
  const std::string m = e.what();
  return m.rfind("out of GPU memory", 0) == 0 || m.rfind("out of host memory", 0) == 0;
}

// A fresh model for one method's plan on `device`: the shape's random weights (or the
// checkpoint) and the adapter from --seed, so every data-parallel replica starts identical.
// `attention_in_host`: the plan's estimate (MethodMemory::attention_in_host). `shard`
// (--shard-backbone): the rank's gather, the backbone sharded as it is built.
std::unique_ptr<llama::LlamaModel> build_model(const StepBenchOptions& o, const Setup& s,
                                               const RunPlan& plan, Device device, bool attention_in_host,
                                               ShardGather* shard = nullptr) {
  std::mt19937_64 adapter_rng(o.seed);
  auto model = std::make_unique<llama::LlamaModel>(
      s.config, weights_for(o, s.config, s.dtype, device), make_linear_factory(plan.method, adapter_rng),
      shard);
  model->set_grad_checkpointing(plan.grad_checkpointing);
  model->set_checkpoint_offload(plan.checkpoint_offload);
  model->set_token_tile(plan.token_tile);
  model->set_host_memory_share(int(s.devices.size()));
  model->set_attention_in_host(attention_in_host);
  return model;
}

// --gpus: one replica per GPU, built in parallel (one thread per GPU), each with its optimizer,
// its copy of the batch and its rank's GradReducer, timed together.
BenchTimes time_replicas(const StepBenchOptions& o, const Setup& s, const RunPlan& plan, bool attention_in_host,
                         DataParallelSetup& dp, const BenchSchedule& schedule, int64_t& trainable,
                         std::pair<size_t, size_t>& backbone) {
  const size_t n = s.devices.size();
  // --shard-backbone: each rank keeps its share of the codes from the first layer built (a
  // backbone larger than one GPU builds). Made before the models, which hold them.
  const auto gathers = shard_gathers(dp, o.shard_backbone);
  std::vector<std::unique_ptr<llama::LlamaModel>> models(n);
  std::vector<std::unique_ptr<AdamW>> optimizers(n);
  std::vector<ModelBatch> batches(n);
  RankWorkers(s.devices).run([&](size_t i) {
    models[i] = build_model(o, s, plan, s.devices[i], attention_in_host,
                            gathers.empty() ? nullptr : gathers[i].get());
    optimizers[i] = std::make_unique<AdamW>(models[i]->params(), AdamWConfig{.weight_decay = 0.01});
    batches[i] = random_batch(o, s.config.vocab_size, s.devices[i]);
  });
  for (const Param* p : models.front()->params()) trainable += p->value.numel();
  if (o.shard_backbone) {
    const ShardedBackbone& b = *models.front()->backbone_shards();
    backbone = {b.local_bytes(), b.slot_bytes()};
  }
  std::vector<BenchRank> ranks;
  for (size_t i = 0; i < n; ++i)
    ranks.push_back(
        {models[i].get(), optimizers[i].get(), &batches[i], dp.reducers[i].get(), s.devices[i]});
  return time_parallel_training_steps(ranks, schedule);
}

MethodRun run_method(const StepBenchOptions& o, const Setup& s, const std::string& method,
                     const ModelBatch& batch, DataParallelSetup& dp, std::ostream& plan_out) {
  MethodRun r;
  r.method = method;
  RunPlan plan = plan_for(o, method);
  if (o.shard_backbone) plan.shard_world = int(s.devices.size());
  plan.resolve_memory_choices(s.config, s.devices, int(s.devices.size()));
  r.options = options_json(plan.method);
  r.max_grad_norm = plan.max_grad_norm;
  const llama::MethodMemory estimate = plan.memory(s.config, s.device, int(s.devices.size()));
  r.estimated_peak = estimate.total();
  plan_out << "method   " << method << ' ' << options_str(r.options) << " on " << kTargets
           << ", grad-norm clip " << (r.max_grad_norm > 0 ? fmt("%g", r.max_grad_norm) : "off")
           << std::endl;
  const BenchSchedule schedule{.warmup = o.warmup,
                                .steps = o.steps,
                                .profiled = o.profiled,
                                .profile_ops = o.profile_ops,
                                .lr = 2e-4,
                                .max_grad_norm = r.max_grad_norm};
  const auto does_not_fit = [&](const std::string& why) {
    r.error = why;  // "will it fit" has its answer: no; the next method still runs
    plan_out << "         " << method << " does not fit: " << r.error << std::endl;
  };
  // The CPU has no out-of-memory error to catch: past its RAM the kernel kills the process.
  if (s.device.is_cpu()) {
    try {
      check_cpu_fits(estimate, device_memory_bytes(Device::cpu()));
    } catch (const UsageError& e) {
      does_not_fit(e.what());
      return r;
    }
  }
  try {
    if (dp.active()) {
      r.times = time_replicas(o, s, plan, estimate.attention_in_host, dp, schedule, r.trainable,
                              r.backbone);
    } else {
      auto model = build_model(o, s, plan, s.device, estimate.attention_in_host);
      const std::vector<Param*> params = model->params();
      for (const Param* p : params) r.trainable += p->value.numel();
      AdamW optimizer(params, AdamWConfig{.weight_decay = 0.01});  // torch.optim.AdamW's default
      r.times = time_training_steps(*model, optimizer, batch, s.device, schedule);
    }
  } catch (const UsageError&) {
    throw;
  } catch (const Error& e) {
    if (!is_out_of_memory(e)) throw;
    does_not_fit(e.what());
  }
  // The model and optimizer are gone: hand their blocks back so the next method starts clean.
  for (const Device& d : s.devices) release_cached_memory(d);
  return r;
}

nlohmann::ordered_json breakdown_json(const BenchTimes& t) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (int p = 0; p < prof::kParts; ++p) j[prof::part_name(prof::Part(p))] = t.breakdown_s[size_t(p)];
  return j;
}

// --profile-ops: "part/op" and its time, the longest first.
std::vector<std::pair<std::string, prof::OpTime>> ops_by_time(const BenchTimes& t) {
  std::vector<std::pair<std::string, prof::OpTime>> v(t.op_breakdown.begin(), t.op_breakdown.end());
  std::stable_sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.second.seconds > b.second.seconds; });
  return v;
}

nlohmann::ordered_json op_breakdown_json(const BenchTimes& t) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (const auto& [op, time] : ops_by_time(t)) j[op] = {{"s", time.seconds}, {"calls", time.calls}};
  return j;
}

void print_op_breakdown(std::ostream& out, const MethodRun& r) {
  constexpr size_t kShown = 30;
  const auto ops = ops_by_time(r.times);
  out << r.method << ": ms per profiled step by op within its part (part/- is the part's time "
      << "outside any op), the " << std::min(kShown, ops.size()) << " longest of " << ops.size() << '\n';
  for (size_t i = 0; i < ops.size() && i < kShown; ++i) {
    char line[200];
    std::snprintf(line, sizeof line, "  %-56s %10.3f ms %7lld calls\n", ops[i].first.c_str(),
                  ops[i].second.seconds * 1e3, (long long)ops[i].second.calls);
    out << line;
  }
}

nlohmann::ordered_json method_json(const StepBenchOptions& o, const Setup& s, const MethodRun& r) {
  nlohmann::ordered_json j{{"method", r.method},
                           {"options", r.options},
                           {"max_grad_norm", r.max_grad_norm},
                           {"fits", r.error.empty()}};
  j["estimated_peak_bytes"] = r.estimated_peak;
  if (!r.error.empty()) {
    j["error"] = r.error;
    return j;
  }
  const BenchTimes& t = r.times;
  j["tokens_per_s"] = t.tokens_per_s;
  j["tokens_per_step"] = t.tokens_per_step;
  j["step_s"] = t.median_s;
  j["step_s_mean"] = t.mean_s;
  j["step_times_s"] = t.step_seconds;
  j["peak_bytes"] = t.peak_bytes;
  j["allocator_returns"] = t.allocator_returns;
  j["trainable_parameters"] = r.trainable;
  j["parameters"] = s.base_parameters + r.trainable;
  j["last_loss"] = t.last_loss;
  if (o.shard_backbone) {
    j["backbone_share_bytes"] = r.backbone.first;
    j["backbone_slot_bytes"] = r.backbone.second;
  }
  if (o.profiled > 0) {
    j["profiled_step_s"] = t.profiled_step_s;
    j["breakdown_s"] = breakdown_json(t);
    if (o.profile_ops) j["op_breakdown"] = op_breakdown_json(t);
  }
  if (!t.ranks.empty()) {
    j["ranks"] = nlohmann::ordered_json::array();
    for (const RankTimes& r : t.ranks)
      j["ranks"].push_back({{"compute_s", r.compute_s},
                            {"exposed_sync_s", r.exposed_sync_s},
                            {"after_sync_s", r.after_sync_s},
                            {"gpu_step_s", r.gpu_step_s},
                            {"host_until_sum_s", r.host_until_sum_s},
                            {"host_step_s", r.host_step_s}});
  }
  return j;
}

nlohmann::ordered_json report_json(const StepBenchOptions& o, const Setup& s,
                                   const std::vector<MethodRun>& runs) {
  nlohmann::ordered_json j{
      {"shape", o.shape.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(o.shape)},
      {"model", o.model.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(o.model)},
      {"batch", o.batch},
      {"seq", o.seq},
      {"masked_prompt_tokens", masked_prompt(o)},
      {"steps", o.steps},
      {"warmup", o.warmup},
      {"profiled_steps", o.profiled},
      {"grad_checkpointing", o.grad_checkpointing},
      {"device", s.device.str()},
      {"gpus", nlohmann::ordered_json()},
      {"shard_backbone", o.shard_backbone},
      {"world_size", s.devices.size()},
      {"device_name", s.info.name},
      {"device_uuid", s.info.uuid.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(s.info.uuid)},
      {"device_memory_bytes", s.info.total_bytes > 0 ? nlohmann::ordered_json(s.info.total_bytes)
                                                     : nlohmann::ordered_json()},
      {"base_parameters", s.base_parameters},
      {"methods", nlohmann::ordered_json::array()}};
  if (!s.parallel.empty()) {
    j["gpus"] = nlohmann::ordered_json::array();
    for (const Device& d : s.devices) j["gpus"].push_back(d.index);
  }
  for (const MethodRun& r : runs) j["methods"].push_back(method_json(o, s, r));
  return j;
}

void print_table(std::ostream& out, const StepBenchOptions& o, const Setup& s,
                 const std::vector<MethodRun>& runs) {
  // Columns: name and width; the breakdown's parts are ms per profiled step.
  int name_width = 8;  // the widest method item, variants included ("halo:nf4:l1")
  for (const MethodRun& r : runs) name_width = std::max(name_width, int(r.method.size()));
  std::vector<std::pair<std::string, int>> cols = {
      {"method", name_width}, {"tokens/s", 10}, {"s/step", 9}, {"peak GiB", 9}, {"est. GiB", 9}, {"trainable", 11}, {"loss", 7}};
  if (o.profiled > 0) {
    for (int p = 0; p < prof::kParts; ++p) {
      const std::string name = prof::part_name(prof::Part(p));
      cols.emplace_back(name, std::max<int>(8, int(name.size())));
    }
    cols.emplace_back("profiled", 9);
  }
  auto row = [&](const std::vector<std::string>& cells) {
    std::string line;
    for (size_t i = 0; i < cells.size(); ++i) {
      const int w = cols[i].second;
      std::string c = cells[i];
      if (int(c.size()) < w) c.insert(i == 0 ? c.size() : 0, size_t(w - int(c.size())), ' ');
      line += (i ? " " : "") + c;
    }
    out << line << '\n';
  };
  out << '\n' << s.name << ", batch " << o.batch << " x seq " << o.seq << ", grad checkpointing "
      << (o.grad_checkpointing ? "on" : "off") << ", on "
      << (s.parallel.empty() ? s.device.str() : s.parallel + ", the batch on each")
      << " (" << s.info.name << ")";
  if (o.profiled > 0) out << "; parts in ms per profiled step";
  out << '\n';
  std::vector<std::string> head;
  for (const auto& c : cols) head.push_back(c.first);
  row(head);
  for (const MethodRun& r : runs) {
    if (!r.error.empty()) {
      out << r.method << "  does not fit: " << r.error << '\n';
      continue;
    }
    const BenchTimes& t = r.times;
    std::vector<std::string> cells = {r.method,
                                      fmt("%.0f", t.tokens_per_s),
                                      fmt("%.4f", t.median_s),
                                      fmt("%.2f", double(t.peak_bytes) / kGiB),
                                      fmt("%.2f", double(r.estimated_peak) / kGiB),
                                      std::to_string(r.trainable),
                                      fmt("%.3f", t.last_loss)};
    if (o.profiled > 0) {
      for (double v : t.breakdown_s) cells.push_back(fmt("%.2f", v * 1e3));
      cells.push_back(fmt("%.2f", t.profiled_step_s * 1e3));
    }
    row(cells);
  }
  out << "s/step = median of the timed steps; peak = device memory allocated by loft over the "
         "timed steps (weights included); est. = loft info's estimate of that peak\n";
  if (o.profile_ops && o.profiled > 0)
    for (const MethodRun& r : runs)
      if (r.error.empty()) print_op_breakdown(out, r);
  for (const MethodRun& r : runs)
    if (r.error.empty() && r.times.allocator_returns > 0)
      out << r.method << ": the GPU allocator handed " << r.times.allocator_returns
          << " cached blocks back to make room during the timed steps (at the memory limit; each "
             "waits for the GPU)\n";
  if (!s.parallel.empty()) {
    out << "with --gpus " << o.gpus << ": tokens/s = " << s.devices.size()
        << " x the batch's tokens / the median step, from its start until every GPU is done; "
           "peak = the largest GPU's; scaling = these tokens/s / those of the same bench without "
           "--gpus (one GPU)\n";
    for (const MethodRun& r : runs) {
      for (size_t k = 0; k < r.times.ranks.size() && k < s.devices.size(); ++k) {
        const RankTimes& p = r.times.ranks[k];
        char line[400];
        std::snprintf(line, sizeof line, "rank %zu   %s on %s: GPU %.2f ms a step = forward+backward %.2f + the sum's "
                   "exposed part %.2f + clip/optimizer %.2f; its thread queued the forward and "
                   "backward in %.2f ms, its step took %.2f ms\n",
                   k, r.method.c_str(), s.devices[k].str().c_str(), p.gpu_step_s * 1e3,
                   p.compute_s * 1e3, p.exposed_sync_s * 1e3, p.after_sync_s * 1e3,
                   p.host_until_sum_s * 1e3, p.host_step_s * 1e3);
        out << line;
      }
    }
  }
  if (s.info.total_bytes <= 0) return;  // the CPU: no fixed memory to fit into
  for (const MethodRun& r : runs) {
    if (!r.error.empty()) continue;
    const double peak = double(r.times.peak_bytes), total = double(s.info.total_bytes);
    char line[300];
    std::snprintf(line, sizeof line,
                  "fit      %s: peak %.2f GiB of the %.2f GiB on %s (%.0f%%), %.2f GiB to spare "
                  "(less the CUDA context and library workspaces)\n",
                  r.method.c_str(), peak / kGiB, total / kGiB, s.info.name.c_str(),
                  100 * peak / total, (total - peak) / kGiB);
    out << line;
  }
}

}  // namespace

void run_step_bench(const StepBenchOptions& in) {
  StepBenchOptions o = in;
  if (o.shard_backbone && o.gpus.empty())
    throw UsageError("--shard-backbone spreads the frozen codes over the GPUs of --gpus: give --gpus");
  if (o.profile_ops && o.profiled == 0)
    throw UsageError("--profile-ops times the ops of the profiled steps: give --profile-steps 1 or more");
  if (!o.gpus.empty()) {
    check_device_beside_ranks(o.device, "--gpus " + o.gpus);
    if (o.profile_ops) throw UsageError("--profile-ops: a data-parallel bench (--gpus) has no profiled steps");
    o.profiled = 0;  // the profiler is one per process: the ranks' parts would mix
  }
  const llama::LlamaConfig config = check_options(o);
  const std::vector<std::string> methods = parse_methods(o.methods);
  const auto timeout = kDefaultNcclTimeout;
  DataParallelSetup dp = setup_data_parallel(o.gpus, std::nullopt, timeout, {}, o.grad_bucket_mib);
  Setup s;
  if (dp.active()) {
    for (int g : dp.devices) s.devices.push_back(Device::cuda(g));
    s.device = s.devices.front();
    s.parallel = dp.how;
  } else {
    s.device = resolve_device(o.device, &std::cerr);
    s.devices = {s.device};
  }
  s.info = device_info(s.device);
  s.dtype = s.device.is_cpu() ? DType::F32 : DType::BF16;
  s.config = config;
  s.name = o.model.empty() ? o.shape : o.model;
  s.base_parameters = llama::llama_parameter_count(s.config);
  std::ostream& plan_out = o.json ? std::cerr : std::cout;  // --json: stdout holds the JSON only
  print_plan(plan_out, o, s, methods);

  // The one-device batch; data-parallel ranks make the same one on their own GPUs.
  const ModelBatch batch = dp.active() ? ModelBatch{} : random_batch(o, s.config.vocab_size, s.device);
  std::vector<MethodRun> runs;
  for (const std::string& m : methods) {
    runs.push_back(run_method(o, s, m, batch, dp, plan_out));
    // A rank that ran out of memory aborted the communicators: fresh ones for the next method.
    if (dp.active() && !runs.back().error.empty())
      dp = setup_data_parallel(o.gpus, std::nullopt, timeout, {}, o.grad_bucket_mib);
  }
  if (o.json)
    std::cout << report_json(o, s, runs).dump() << '\n';
  else
    print_table(std::cout, o, s, runs);
  std::cout.flush();
}

}  // namespace loft::app
