// loft bench: how fast loft runs, one subcommand per part of the work —
//   step     training steps per method (app/bench_step.cpp)
//   kernels  each kernel of one layer alone (app/bench_kernels.cpp)
//   eval     the evaluator: mmlu, gsm8k or decode (app/bench_eval.cpp)
//   data     the tokenizer and the data pipeline (app/bench_tokenizer.cpp)
// Each takes only its own options, so CLI11 refuses what does not go with it. The spellings of
// the one command bench was before (`loft bench --shape`, `--kernels`, `--eval X`, `--tokenizer`)
// are rewritten to these for one release (legacy_bench_args).
#include <CLI/CLI.hpp>
#include <iostream>

#include "app/bench_eval.h"
#include "app/bench_kernels.h"
#include "app/bench_step.h"
#include "app/bench_tokenizer.h"
#include "app/commands.h"
#include "app/method_flags.h"
#include "app/option_checks.h"
#include "datasets/data_config.h"
#include "engine/device/device_info.h"
#include "engine/peft/method_spec.h"
#include "models/llama/bench_model.h"

namespace loft::app {

namespace {

const std::vector<std::string> kBenchSubcommands = {"step", "kernels", "eval", "data"};

// --shape NAME | --model DIR: a named shape's random weights, or a checkpoint.
void add_model_choice(CLI::App& cmd, std::string& shape, std::string& model) {
  auto* s = cmd.add_option("--shape", shape, "model shape: " + joined(llama::bench_shape_names()));
  auto* m = cmd.add_option("--model", model, "Hugging Face Llama folder instead of a shape");
  s->excludes(m);
}

void add_step_bench(CLI::App& bench) {
  CLI::App* cmd = bench.add_subcommand(
      "step", "time training steps per method on a random-init Llama shape (or a checkpoint)");
  auto o = std::make_shared<StepBenchOptions>();
  add_model_choice(*cmd, o->shape, o->model);
  std::vector<std::string> examples;
  for (const MethodSpec* s : method_specs())
    for (const std::string& e : s->variant_examples()) examples.push_back(e);
  cmd->add_option("--method", o->methods,
                  "fine-tuning method, or a comma list run in turn: " + joined(method_names()) +
                      "; variants after ':' (" + joined(examples) + ")")
      ->capture_default_str();
  add_method_flags(*cmd, o->method_flags, MethodFlagUse::bench);
  cmd->add_option("--batch", o->batch, "sequences per step")->capture_default_str()->transform(rows_bound());
  cmd->add_option("--seq", o->seq, "tokens per sequence")->capture_default_str()->transform(seq_bound());
  cmd->add_option("--steps", o->steps, "timed steps")->capture_default_str()->transform(int_in(1, kMaxBenchSteps));
  cmd->add_option("--gpus", o->gpus,
                  "data-parallel steps on several GPUs in this process: N (the first N) or a list "
                  "(0,2); every GPU takes the batch (--batch x --seq per GPU), no profiled breakdown");
  cmd->add_flag("--shard-backbone", o->shard_backbone,
                "with --gpus: each GPU keeps 1/N of every layer's frozen codes and gathers a layer's "
                "before it runs (FSDP-style; the same results)");
  add_grad_bucket_option(*cmd, o->grad_bucket_mib);
  cmd->add_option("--warmup", o->warmup, "untimed steps first")->capture_default_str()->transform(int_in(0, kMaxBenchSteps));
  cmd->add_option("--profile-steps", o->profiled,
                  "profiled steps after the timed ones, for the per-part breakdown (0: none)")
      ->capture_default_str()->transform(int_in(0, kMaxBenchSteps));
  cmd->add_flag("--profile-ops", o->profile_ops,
                "the profiled steps also time each op (every op of the op table and the quantization "
                "kernels) within its part: where a part's time goes inside the real step (two more "
                "events an op on a GPU, so the profiled steps run a little slower)");
  auto* rank = cmd->add_option("--lora-rank", o->rank, "LoRA rank")->capture_default_str()->transform(rank_bound());
  auto* alpha =
      cmd->add_option("--lora-alpha", o->alpha, "LoRA alpha")->capture_default_str()->check(positive_finite());
  // bench's names before it took finetune's, kept (hidden from --help) for one release.
  auto* old_rank = hidden_alias(*cmd, "--rank", o->rank, rank_bound());
  auto* old_alpha = hidden_alias(*cmd, "--alpha", o->alpha, positive_finite());
  cmd->add_option("--max-grad-norm", o->max_grad_norm,
                  "clip the global grad norm as finetune does; 0 = off (default: per method)")
      ->check(non_negative_finite());
  cmd->add_option("--prompt-fraction", o->prompt_fraction,
                  "the fraction of each row's first tokens whose labels are masked, as a chat "
                  "template masks the prompt (0: every position but a row's last has a target)")
      ->capture_default_str()
      ->check(non_negative_finite())  // CLI::Range alone lets NaN through
      ->check(CLI::Range(0.0, 0.99));
  cmd->add_option("--seed", o->seed, "seed of the random weights, adapter and tokens")
      ->capture_default_str()->transform(seed_bound());
  cmd->add_flag("--grad-checkpointing", o->grad_checkpointing,
                "recompute each block's forward in backward");
  cmd->add_flag("--checkpoints-on-gpu", o->checkpoints_on_gpu,
                "with --grad-checkpointing on a GPU: keep the block inputs on the GPU instead of "
                "pinned host memory");
  cmd->add_option("--token-tile", o->token_tile,
                  "with --grad-checkpointing: tokens per tile of a block's norms, projections and MLP "
                  "(a multiple of 1024; 0: untiled)")
      ->capture_default_str()->transform(int_in(0));
  add_device_option(*cmd, o->device);
  cmd->add_flag("--json", o->json, "print one JSON object instead of the table");
  cmd->callback([o, rank, alpha, old_rank, old_alpha] {
    not_both(old_rank, rank);
    not_both(old_alpha, alpha);
    run_step_bench(*o);
  });
}

struct KernelBenchOptions {
  std::string shape, model, device;
  int64_t batch = 4, seq = 512, repeats = 20;
  std::vector<std::string> only;
};

void add_kernels_bench(CLI::App& bench) {
  CLI::App* cmd = bench.add_subcommand(
      "kernels", "time each kernel of one layer alone at a shape's sizes (tokens = batch x seq)");
  auto o = std::make_shared<KernelBenchOptions>();
  add_model_choice(*cmd, o->shape, o->model);
  cmd->add_option("--batch", o->batch, "sequences")->capture_default_str()->transform(rows_bound());
  cmd->add_option("--seq", o->seq, "tokens per sequence")->capture_default_str()->transform(seq_bound());
  cmd->add_option("--repeats", o->repeats, "timed calls of each kernel")->capture_default_str()->transform(int_in(1, 100000));
  cmd->add_option("--only", o->only, "time only these kernels (a row's first word: attention, attention_backward, gemm, ...)")
      ->delimiter(',');
  add_device_option(*cmd, o->device);
  cmd->callback([o] {
    const llama::LlamaConfig cfg = bench_config(o->shape, o->model);
    const Device device = resolve_device(o->device, &std::cerr);
    const std::string title = cat("kernels  ", o->model.empty() ? o->shape : o->model, " at ", o->batch, " x ", o->seq,
                                  " tokens on ", device.str(), " (", device_info(device).name, "), ", o->repeats,
                                  " calls each\n");
    run_kernel_bench(cfg, o->batch, o->seq, device, int(o->repeats), o->only, title, std::cout);
  });
}

void add_eval_bench(CLI::App& bench) {
  CLI::App* cmd = bench.add_subcommand(
      "eval", "time the evaluator (mmlu, gsm8k or decode) on a shape's random weights or a checkpoint");
  auto o = std::make_shared<EvalBenchOptions>();
  auto device = std::make_shared<std::string>();
  o->batch = 4;  // bench's batch before the subcommands: the decode bench's figures stay comparable
  cmd->add_option("--task", o->task, "mmlu, gsm8k or decode")->required()
      ->check(CLI::IsMember({"mmlu", "gsm8k", "decode"}));
  add_model_choice(*cmd, o->shape, o->model);
  cmd->add_option("--tokenizer", o->tokenizer, "tokenizer folder for a --shape (default: --model's)");
  cmd->add_option("--data", o->data, "mmlu: a folder with dev/ and test/; gsm8k: train.jsonl and a test JSONL");
  cmd->add_option("--limit", o->limit, "mmlu: questions per subject; gsm8k: questions (default 1319)")
      ->transform(int_in(1));
  cmd->add_option("--slots", o->slots, "KV-cache slots (sequences scored/decoded at once)")
      ->capture_default_str()->transform(int_in(1));
  cmd->add_option("--batch", o->batch, "decode: prompts")->capture_default_str()->transform(rows_bound());
  cmd->add_option("--seq", o->seq, "decode: tokens per prompt")->capture_default_str()->transform(seq_bound());
  cmd->add_option("--max-gen-toks", o->max_gen_toks, "gsm8k/decode: new tokens per sequence")
      ->capture_default_str()->transform(int_in(1, data::kMaxSeq));
  cmd->add_option("--seed", o->seed, "seed of the random weights and prompts")->capture_default_str()->transform(seed_bound());
  add_device_option(*cmd, *device);
  cmd->add_flag("--json", o->json, "print one JSON object instead of the text");
  cmd->callback([o, device] { run_eval_bench(*o, resolve_device(*device, &std::cerr), std::cout); });
}

struct DataBenchOptions {
  std::string tokenizer, data;
  int64_t batch = 4, seq = 512;
};

void add_data_bench(CLI::App& bench) {
  CLI::App* cmd = bench.add_subcommand(
      "data", "time a model's tokenizer and the data pipeline on records (CPU, one thread)");
  auto o = std::make_shared<DataBenchOptions>();
  cmd->add_option("--tokenizer", o->tokenizer, "model folder whose tokenizer to time")->required();
  cmd->add_option("--data", o->data, "JSONL records (e.g. GSM8K's train.jsonl)")->required();
  cmd->add_option("--batch", o->batch, "rows per packed batch")->capture_default_str()->transform(rows_bound());
  cmd->add_option("--seq", o->seq, "tokens per packed row")->capture_default_str()->transform(seq_bound());
  cmd->callback([o] { run_tokenizer_bench(o->tokenizer, o->data, o->seq, o->batch, std::cout); });
}

bool has(const std::vector<std::string>& args, const std::string& flag) {
  for (const std::string& a : args)
    if (a == flag || a.starts_with(flag + "=")) return true;
  return false;
}

}  // namespace

std::vector<std::string> legacy_bench_args(std::vector<std::string> args, std::ostream& note) {
  if (args.size() < 3 || args[1] != "bench" || args[2] == "-h" || args[2] == "--help") return args;
  for (const std::string& s : kBenchSubcommands)
    if (args[2] == s) return args;
  std::string sub = "step";
  if (has(args, "--kernels")) {
    sub = "kernels";
    std::erase(args, std::string("--kernels"));
  } else if (has(args, "--eval")) {
    sub = "eval";
    for (std::string& a : args)
      if (a == "--eval" || a.starts_with("--eval=")) a = "--task" + a.substr(6);
  } else if (has(args, "--tokenizer") && !has(args, "--shape") && !has(args, "--model")) {
    sub = "data";
  }
  note << "loft: note: 'loft bench' without a subcommand is 'loft bench " << sub
       << "' now; the old form goes in the next release\n";
  args.insert(args.begin() + 2, sub);
  return args;
}

void add_bench_command(CLI::App& root) {
  CLI::App* cmd = root.add_subcommand("bench", "time loft: training steps, kernels, the evaluator, the data pipeline");
  cmd->require_subcommand(1);
  add_step_bench(*cmd);
  add_kernels_bench(*cmd);
  add_eval_bench(*cmd);
  add_data_bench(*cmd);
}

}  // namespace loft::app
