// loft evaluate: score a base model, or base + PEFT adapter: perplexity, MMLU, GSM8K
// (lm-evaluation-harness's protocols, docs/evaluation.md).
#include <chrono>
#include <CLI/CLI.hpp>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "app/commands.h"
#include "app/option_checks.h"
#include "app/run_outputs.h"
#include "app/model_loading.h"
#include "app/owned_outputs.h"
#include "engine/io/atomic_file.h"
#include "engine/io/output_paths.h"
#include "engine/peft/method.h"
#include "eval/gsm8k.h"
#include "eval/harness.h"
#include "eval/mmlu.h"
#include "eval/perplexity.h"

namespace loft::app {

namespace {
using nlohmann::json;

struct EvaluateOptions {
  std::string model, adapter, task = "ppl", data, device, method;
  std::string report, log_samples, subjects, train, test;
  bool json = false, overwrite = false;
  int64_t batch_tokens = 8192;
  int64_t shots = -1, limit = -1, offset = 0, slots = 0, seed = 1234, max_gen_toks = 256;
};

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  size_t b = 0;
  while (b <= s.size()) {
    const size_t e = std::min(s.find(',', b), s.size());
    if (e > b) out.push_back(s.substr(b, e - b));
    b = e + 1;
  }
  return out;
}

void evaluate_ppl(const EvaluateOptions& o, llama::LlamaModel& model, const Tokenizer& tok, Device device) {
  if (o.data.empty()) throw UsageError("--task ppl needs --data FILE");
  eval::PerplexityOptions po;
  po.max_tokens = model.config().max_position_embeddings;
  po.batch_tokens = std::max(o.batch_tokens, po.max_tokens);
  const eval::PerplexityResult r = eval::perplexity(model, tok, o.data, device, po);
  if (o.json) {
    std::cout << json{{"task", "ppl"},   {"documents", r.documents}, {"tokens", r.tokens},
                      {"nll", r.nll},    {"ppl", r.ppl},             {"model", o.model},
                      {"adapter", o.adapter}, {"data", o.data}}
                     .dump()
              << "\n";
  } else {
    // Formatted in its own stream: std::cout's flags stay as the caller left them.
    std::ostringstream line;
    line << "perplexity of " << o.data << ": " << std::fixed << std::setprecision(4) << r.ppl
         << " (nll " << r.nll << " over " << r.tokens << " predicted tokens in " << r.documents
         << " documents)\n";
    std::cout << line.str();
  }
}

json group_json(const eval::GroupScore& g) {
  return json{{"acc", g.acc()}, {"correct", g.correct}, {"questions", g.questions}};
}

// The report's common part: what was run and how.
json report_head(const EvaluateOptions& o, const std::string& method, int64_t shots, int64_t max_length) {
  return json{{"task", o.task},
              {"protocol",
               {{"lm_eval_commit", eval::kLmEvalCommit},
                {"shots", shots},
                {"chat_template", false},
                {"max_length", max_length},
                {"offset", o.offset},
                {"limit", o.limit < 0 ? json(nullptr) : json(o.limit)}}},
              {"model", o.model},
              {"adapter", o.adapter.empty() ? json(nullptr) : json(o.adapter)},
              {"method", method},
              {"data", o.data}};
}

void emit_report(const EvaluateOptions& o, const json& report, const std::string& text) {
  if (!o.report.empty()) write_file_atomic(o.report, report.dump(2) + "\n");
  if (const auto saved = save_eval_in_run(o.adapter, o.task, report))
    std::cerr << "report saved to " << saved->string() << " (loft report shows it)\n";
  if (o.json)
    std::cout << report.dump() << "\n";
  else
    std::cout << text;
}

std::ofstream open_log(const std::string& path) {
  std::ofstream f;
  if (path.empty()) return f;
  f.open(path, std::ios::binary);
  if (!f) throw Error(cat("cannot write --log-samples ", path));
  return f;
}

// --slots, or for 0 what suits the device: the GPU's throughput grows with the batch up to ~64
// sequences (the KV cache is capped to its free memory by eval/), the CPU's does not.
int64_t slots_for(const EvaluateOptions& o, Device device) { return o.slots > 0 ? o.slots : device.is_cpu() ? 16 : 64; }

void evaluate_mmlu(const EvaluateOptions& o, llama::LlamaModel& model, const Tokenizer& tok,
                   const std::string& method, Device device) {
  if (o.data.empty()) throw UsageError("--task mmlu needs --data DIR (a folder with dev/ and test/)");
  eval::MmluOptions mo;
  mo.data = o.data;
  mo.subjects = split_list(o.subjects);
  mo.shots = o.shots < 0 ? 5 : o.shots;
  mo.offset = o.offset;
  mo.limit = o.limit;
  mo.max_length = model.config().max_position_embeddings;
  mo.slots = slots_for(o, device);
  mo.per_question_prefix = device.is_cpu();  // least compute on the CPU; batches of questions on a GPU
  mo.progress = &std::cerr;
  std::ofstream log = open_log(o.log_samples);
  if (log.is_open())
    mo.on_sample = [&log](const eval::MmluSample& s) {
      log << json{{"task", "mmlu"},
                  {"subject", s.subject},
                  {"index", s.index},
                  {"context", s.context},
                  {"context_ids", s.context_ids},
                  {"loglikelihoods", s.loglikelihoods},
                  {"gold", s.gold},
                  {"pred", s.pred},
                  {"acc", s.pred == s.gold ? 1 : 0}}
                 .dump()
          << "\n";
    };
  const auto t0 = std::chrono::steady_clock::now();
  const eval::MmluResult r = eval::run_mmlu(model, tok, mo);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  json report = report_head(o, method, mo.shots, mo.max_length);
  json subjects = json::object(), categories = json::object();
  for (const auto& s : r.subjects) subjects[s.name] = group_json(s);
  for (const auto& c : r.categories) categories[c.name] = group_json(c);
  double subject_mean = 0;  // lm-eval's number is the micro average; the mean of subjects for comparison
  for (const auto& sc : r.subjects) subject_mean += sc.acc() / double(std::max<size_t>(1, r.subjects.size()));
  report["metrics"] = {{"acc", r.overall.acc()},
                       {"acc_subject_mean", subject_mean},
                       {"correct", r.overall.correct},
                       {"questions", r.overall.questions},
                       {"categories", categories},
                       {"subjects", subjects}};
  report["timing"] = {{"seconds", seconds},
                      {"questions_per_s", seconds > 0 ? double(r.overall.questions) / seconds : 0.0},
                      {"requests", r.requests},
                      {"shared_prefix_tokens", r.shared_prefix_tokens}};
  std::ostringstream text;
  text << std::fixed << std::setprecision(4);
  text << "mmlu " << mo.shots << "-shot: acc " << r.overall.acc() << " (" << r.overall.correct << "/"
       << r.overall.questions << ") in " << std::setprecision(1) << seconds << " s\n"
       << std::setprecision(4);
  for (const auto& c : r.categories)
    text << "  " << c.name << ": " << c.acc() << " (" << c.correct << "/" << c.questions << ")\n";
  for (const auto& s : r.subjects)
    text << "    " << s.name << ": " << s.acc() << " (" << s.correct << "/" << s.questions << ")\n";
  emit_report(o, report, text.str());
}

void evaluate_gsm8k(const EvaluateOptions& o, llama::LlamaModel& model, const Tokenizer& tok,
                    const std::string& method) {
  eval::Gsm8kOptions go;
  go.cot = o.task == "gsm8k-cot";
  if (!o.train.empty() || !o.test.empty()) {
    if (!o.data.empty()) throw UsageError("give --data DIR or --train FILE --test FILE, not both");
    if (o.test.empty() || (o.train.empty() && !go.cot)) throw UsageError("--train FILE and --test FILE go together");
    go.train = o.train;
    go.test = o.test;
  } else {
    if (o.data.empty())
      throw UsageError(cat("--task ", o.task, " needs --data DIR (train.jsonl + a test JSONL) or --train/--test"));
    const eval::Gsm8kFiles f = eval::gsm8k_files(o.data);
    go.train = f.train;
    go.test = f.test;
  }
  go.shots = o.shots;
  go.seed = o.seed;
  go.offset = o.offset;
  go.limit = o.limit;
  go.max_gen_toks = o.max_gen_toks;
  go.max_length = model.config().max_position_embeddings;
  go.slots = slots_for(o, model.device());
  for (int64_t id : model.config().eos_token_ids) go.eos_ids.push_back(int32_t(id));
  go.progress = &std::cerr;
  std::ofstream log = open_log(o.log_samples);
  const std::string task_name = go.cot ? "gsm8k_cot" : "gsm8k";
  if (log.is_open())
    go.on_sample = [&log, &task_name](const eval::Gsm8kSample& s) {
      log << json{{"task", task_name},
                  {"index", s.index},
                  {"context", s.context},
                  {"context_ids", s.context_ids},
                  {"fewshot_indices", s.fewshot_indices},
                  {"generation", s.generation},
                  {"extracted", {{"strict-match", s.strict}, {"flexible-extract", s.flexible}}},
                  {"exact_match", {{"strict-match", s.strict_correct ? 1 : 0},
                                   {"flexible-extract", s.flexible_correct ? 1 : 0}}},
                  {"target", s.target},
                  {"generated_tokens", s.generated_tokens},
                  {"stop_reason", s.stop_reason}}
                 .dump()
          << "\n";
    };
  const auto t0 = std::chrono::steady_clock::now();
  const eval::Gsm8kResult r = eval::run_gsm8k(model, tok, go);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  json report = report_head(o, method, r.shots, go.max_length);
  report["task"] = task_name;
  report["protocol"]["seed"] = go.cot ? json(nullptr) : json(go.seed);
  report["protocol"]["max_gen_toks"] = go.max_gen_toks;
  report["protocol"]["until"] = r.until;
  report["protocol"]["decoding"] = "greedy";
  report["data"] = {{"train", go.train.string()}, {"test", go.test.string()}};
  const double n = double(std::max<int64_t>(1, r.questions));
  report["metrics"] = {{"exact_match", {{"strict-match", double(r.strict_correct) / n},
                                        {"flexible-extract", double(r.flexible_correct) / n}}},
                       {"correct", {{"strict-match", r.strict_correct}, {"flexible-extract", r.flexible_correct}}},
                       {"questions", r.questions}};
  report["timing"] = {{"seconds", seconds},
                      {"questions_per_s", seconds > 0 ? double(r.questions) / seconds : 0.0},
                      {"generated_tokens", r.generated_tokens},
                      {"tokens_per_s", seconds > 0 ? double(r.generated_tokens) / seconds : 0.0}};
  std::ostringstream text;
  text << std::fixed << std::setprecision(4) << task_name << " " << r.shots << "-shot over " << r.questions
       << " questions: exact_match strict-match " << double(r.strict_correct) / n << ", flexible-extract "
       << double(r.flexible_correct) / n << " (" << std::setprecision(1) << seconds << " s, "
       << r.generated_tokens << " tokens generated)\n";
  emit_report(o, report, text.str());
}

void run_evaluate(const EvaluateOptions& o) {
  if (o.task != "ppl" && o.task != "mmlu" && o.task != "gsm8k" && o.task != "gsm8k-cot")
    throw UsageError(cat("--task ", o.task, " is not one of ppl, mmlu, gsm8k, gsm8k-cot"));
  // Perplexity prints its one result (--json for JSON); the report and samples files are
  // lm-eval's, for the benchmarks: refused rather than silently not written.
  if (o.task == "ppl")
    for (const auto& [option, value] : {std::pair{"--report", &o.report}, std::pair{"--log-samples", &o.log_samples}})
      if (!value->empty())
        throw UsageError(cat(option, " is for mmlu, gsm8k and gsm8k-cot; --task ppl prints its result (--json: as JSON)"));
  // Checked before the model is loaded: an evaluation must not run for hours to a file it may not write.
  if (!o.report.empty())
    check_output_file(o.report, "--report", o.overwrite, is_loft_eval_report, "a loft evaluate report");
  if (!o.log_samples.empty())
    check_output_file(o.log_samples, "--log-samples", o.overwrite, is_loft_sample_log, "a loft samples log");
  const Device device = resolve_device(o.device, &std::cerr);
  const auto tok = load_tokenizer(o.model);
  check_tokenizer_fits(*tok, llama::load_llama_config(o.model), o.model);
  LoadedModel m = load_model_with_adapter(o.model, o.adapter, o.method, device, std::cerr);
  if (o.task == "ppl") return evaluate_ppl(o, *m.model, *tok, device);
  if (o.task == "mmlu") return evaluate_mmlu(o, *m.model, *tok, m.method, device);
  evaluate_gsm8k(o, *m.model, *tok, m.method);
}
}  // namespace

void add_evaluate_command(CLI::App& root) {
  auto o = std::make_shared<EvaluateOptions>();
  CLI::App* cmd = root.add_subcommand("evaluate", "score a model (+adapter): perplexity, MMLU, GSM8K");
  cmd->add_option("--model", o->model, "Hugging Face Llama folder")->required();
  cmd->add_option("--adapter", o->adapter, "PEFT adapter folder to apply");
  cmd->add_option("--method", o->method,
                  cat("build the model for this method instead of the adapter's recorded one (default: "
                      "the record; ", default_method(), " for PEFT-made adapters and no adapter)"));
  cmd->add_option("--task", o->task, "ppl, mmlu, gsm8k or gsm8k-cot")->capture_default_str();
  cmd->add_option("--data", o->data,
                  "ppl: a text file, one document per non-empty line; mmlu: a folder with dev/ and test/; "
                  "gsm8k: a folder with train.jsonl and test.jsonl (or one other *.jsonl)");
  cmd->add_option("--train", o->train, "gsm8k: the few-shot pool (instead of --data)");
  cmd->add_option("--test", o->test, "gsm8k: the questions (instead of --data)");
  cmd->add_option("--seed", o->seed, "gsm8k: the few-shot sampler's seed (lm-eval's)")
      ->capture_default_str()->transform(seed_bound());
  cmd->add_option("--max-gen-toks", o->max_gen_toks, "gsm8k: most tokens generated per question")
      ->capture_default_str()->transform(int_in(1));
  cmd->add_option("--shots", o->shots, "few-shot examples (default: mmlu 5, the first dev rows; gsm8k 5, drawn from train; "
                  "gsm8k-cot 8 fixed exemplars)")
      ->transform(int_in(0));
  cmd->add_option("--subjects", o->subjects, "mmlu: comma-separated subjects, each a test/<subject>_test.csv of --data "
                  "(default: every test/ file)");
  cmd->add_option("--limit", o->limit, "questions per subject (mmlu) / in all (gsm8k); default all")
      ->transform(int_in(1));
  cmd->add_option("--offset", o->offset, "skip this many questions first (each keeps its full-run prompt)")
      ->capture_default_str()->transform(int_in(0));
  cmd->add_option("--slots", o->slots,
                  "sequences scored/decoded at once (KV-cache slots); 0: 64 on a GPU (fewer if its free memory "
                  "holds fewer), 16 on the CPU")
      ->capture_default_str()->transform(int_in(0));
  cmd->add_option("--batch-tokens", o->batch_tokens, "ppl: tokens per forward pass")->capture_default_str()->transform(int_in(1));
  cmd->add_option("--report", o->report, "write the JSON report to this file");
  cmd->add_option("--log-samples", o->log_samples, "write one JSON line per question to this file");
  cmd->add_flag("--overwrite", o->overwrite,
                "replace an existing --report or --log-samples file that evaluate did not write");
  cmd->add_flag("--json", o->json, "print one JSON object (the report)");
  add_device_option(*cmd, o->device);
  cmd->callback([o] { run_evaluate(*o); });
}

}  // namespace loft::app
