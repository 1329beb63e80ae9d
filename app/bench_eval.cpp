#include "app/bench_eval.h"

#include <chrono>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>

#include "app/model_loading.h"
#include "engine/core/error.h"
#include "engine/device/device_info.h"
#include "engine/device/memory.h"
#include "engine/peft/method.h"
#include "eval/gsm8k.h"
#include "eval/mmlu.h"
#include "models/llama/bench_model.h"
#include "models/llama/generate.h"
#include "tokenizer/tokenizer.h"

namespace loft::app {

namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// The model to time: random weights of a named shape (every projection frozen, bf16 on a GPU), or
// a checkpoint folder's base model.
std::unique_ptr<llama::LlamaModel> bench_model(const EvalBenchOptions& o, const Tokenizer* tok,
                                               Device device) {
  if (!o.model.empty()) return load_model_with_adapter(o.model, "", "", device, std::cerr).model;
  std::optional<llama::LlamaConfig> cfg = llama::bench_shape_config(o.shape);
  if (!cfg) throw UsageError(cat("--shape ", o.shape, " is not one of the bench shapes"));
  if (tok && tok->vocab_size() > cfg->vocab_size)
    throw UsageError(cat("the tokenizer's ", tok->vocab_size(), " ids do not fit --shape ", o.shape,
                         "'s vocabulary of ", cfg->vocab_size));
  if (tok && tok->eos_id() >= 0) cfg->eos_token_ids = {tok->eos_id()};
  std::mt19937_64 rng(o.seed);
  MethodOptions m;  // the default method, no targets: every projection frozen
  const DType dtype = device.is_cpu() ? DType::F32 : DType::BF16;
  return std::make_unique<llama::LlamaModel>(
      *cfg, llama::random_llama_weights(*cfg, dtype, device, o.seed), make_linear_factory(m, rng));
}

json bench_mmlu(const EvalBenchOptions& o, llama::LlamaModel& model, const Tokenizer& tok, Device device) {
  if (o.data.empty()) throw UsageError("bench eval --task mmlu needs --data DIR (a folder with dev/ and test/)");
  eval::MmluOptions mo;
  mo.data = o.data;
  mo.limit = o.limit;
  mo.max_length = model.config().max_position_embeddings;
  mo.slots = o.slots;
  mo.per_question_prefix = device.is_cpu();
  mo.progress = &std::cerr;
  int64_t context_tokens = 0;
  mo.on_sample = [&](const eval::MmluSample& s) { context_tokens += int64_t(s.context_ids.size()); };
  const auto t0 = Clock::now();
  const eval::MmluResult r = eval::run_mmlu(model, tok, mo);
  const double s = since(t0);
  return {{"questions", r.overall.questions}, {"requests", r.requests},
          {"context_tokens", context_tokens}, {"shared_prefix_tokens", r.shared_prefix_tokens},
          {"seconds", s}, {"questions_per_s", double(r.overall.questions) / s}};
}

json bench_gsm8k(const EvalBenchOptions& o, llama::LlamaModel& model, const Tokenizer& tok) {
  if (o.data.empty()) throw UsageError("bench eval --task gsm8k needs --data DIR (train.jsonl and a test JSONL)");
  eval::Gsm8kOptions go;
  const eval::Gsm8kFiles f = eval::gsm8k_files(o.data);
  go.train = f.train;
  go.test = f.test;
  go.limit = o.limit < 0 ? 1319 : o.limit;
  if (int64_t(eval::read_gsm8k_jsonl(go.test).size()) < go.limit) {
    std::cerr << "note: " << go.test.string() << " has fewer than " << go.limit
              << " questions; the bench takes them from " << go.train.string() << "\n";
    go.test = go.train;
  }
  go.max_gen_toks = o.max_gen_toks;
  go.max_length = model.config().max_position_embeddings;
  go.slots = o.slots;
  for (int64_t id : model.config().eos_token_ids) go.eos_ids.push_back(int32_t(id));
  go.progress = &std::cerr;
  int64_t context_tokens = 0;
  go.on_sample = [&](const eval::Gsm8kSample& s) { context_tokens += int64_t(s.context_ids.size()); };
  const auto t0 = Clock::now();
  const eval::Gsm8kResult r = eval::run_gsm8k(model, tok, go);
  const double s = since(t0);
  return {{"questions", r.questions}, {"context_tokens", context_tokens},
          {"generated_tokens", r.generated_tokens}, {"seconds", s},
          {"questions_per_s", double(r.questions) / s},
          {"generated_tokens_per_s", double(r.generated_tokens) / s}};
}

json bench_decode(const EvalBenchOptions& o, llama::LlamaModel& model, Device device) {
  std::mt19937_64 rng(o.seed + 1);
  const int64_t vocab = model.config().vocab_size;
  std::vector<std::vector<int32_t>> prompts(size_t(o.batch), std::vector<int32_t>(size_t(o.seq)));
  for (auto& p : prompts)
    for (auto& t : p) t = int32_t(rng() % uint64_t(vocab));
  llama::KvCache cache = llama::KvCache::for_model(model, o.batch, o.seq + o.max_gen_toks);
  llama::GenerateOptions go;
  go.max_new_tokens = o.max_gen_toks;  // no EOS ids: every sequence runs to the end
  int64_t tokens = 0;
  Clock::time_point first{};
  const auto run = [&] {
    tokens = 0;
    const auto t0 = Clock::now();
    llama::generate(model, cache, prompts, go, [&](size_t, int32_t) {
      if (++tokens == o.batch) first = Clock::now();  // every prompt prefilled, first tokens out
      return true;
    });
    synchronize(device);
    return std::pair<double, double>{std::chrono::duration<double>(first - t0).count(), since(first)};
  };
  run();  // warm-up: library handles, kernels, the allocator's pool
  const auto [prefill_s, decode_s] = run();
  const int64_t decoded = tokens - o.batch;  // tokens chosen after the prefill's first ones
  return {{"batch", o.batch}, {"prompt_tokens", o.seq}, {"new_tokens", o.max_gen_toks},
          {"prefill_s", prefill_s}, {"prefill_tokens_per_s", double(o.batch * o.seq) / prefill_s},
          {"decode_s", decode_s}, {"decode_steps", o.max_gen_toks - 1},
          {"step_ms", 1e3 * decode_s / double(o.max_gen_toks - 1)},
          {"decode_tokens_per_s", double(decoded) / decode_s},
          {"cache_bytes", cache.bytes()}};
}

}  // namespace

void run_eval_bench(const EvalBenchOptions& o, Device device, std::ostream& out) {
  if (o.task != "mmlu" && o.task != "gsm8k" && o.task != "decode")
    throw UsageError(cat("--task ", o.task, " is not one of mmlu, gsm8k, decode"));
  if (o.shape.empty() == o.model.empty()) throw UsageError("bench eval needs --shape NAME or --model DIR");
  if (o.slots < 1) throw UsageError(cat("--slots must be >= 1, not ", o.slots));
  if (o.max_gen_toks < 1) throw UsageError(cat("--max-gen-toks must be >= 1, not ", o.max_gen_toks));
  // decode times the steps after the prefill's first token: one token leaves none to time.
  if (o.task == "decode" && o.max_gen_toks < 2)
    throw UsageError(cat("--max-gen-toks must be >= 2 for --eval decode (it times the tokens after the first), not ",
                         o.max_gen_toks));
  if (o.limit < -1 || o.limit == 0) throw UsageError(cat("--limit must be >= 1, not ", o.limit));
  if (o.task == "decode" && (o.batch < 1 || o.seq < 1))
    throw UsageError(cat("--batch and --seq must be >= 1, not ", o.batch, " and ", o.seq));
  const std::string tok_dir = o.tokenizer.empty() ? o.model : o.tokenizer;
  if (tok_dir.empty() && o.task != "decode")
    throw UsageError(cat("--task ", o.task, " with --shape needs --tokenizer DIR"));
  std::unique_ptr<Tokenizer> tok;
  if (!tok_dir.empty()) tok = load_tokenizer(tok_dir);
  const auto t0 = Clock::now();
  const std::unique_ptr<llama::LlamaModel> model = bench_model(o, tok.get(), device);  // decode: no text
  synchronize(device);
  const double load_s = since(t0);
  reset_peak_memory(device);
  json r = o.task == "mmlu"    ? bench_mmlu(o, *model, *tok, device)
           : o.task == "gsm8k" ? bench_gsm8k(o, *model, *tok)
                               : bench_decode(o, *model, device);
  r["task"] = o.task;
  r["model"] = o.model.empty() ? o.shape : o.model;
  r["device"] = device_info(device).name;
  r["slots"] = o.slots;
  r["load_s"] = load_s;
  r["peak_device_bytes"] = memory_stats(device).peak_allocated;
  if (o.json) {
    out << r.dump() << "\n";
    return;
  }
  out << "eval bench " << o.task << " on " << r["model"].get<std::string>() << " (" << r["device"].get<std::string>()
      << "):\n";
  for (const auto& [k, v] : r.items())
    if (k != "task" && k != "model" && k != "device") out << "  " << k << ": " << v.dump() << "\n";
}

}  // namespace loft::app
