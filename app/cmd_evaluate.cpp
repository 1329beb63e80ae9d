// loft evaluate: score a base model, or base + PEFT adapter. Perplexity is built; the MMLU-style
// and GSM8K-style benchmarks come with the evaluation work.
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>

#include "app/commands.h"
#include "eval/perplexity.h"
#include "models/llama/loading.h"

namespace loft::app {

namespace {
struct EvaluateOptions {
  std::string model, adapter, task = "ppl", data, device, method;
  bool json = false;
  int64_t batch_tokens = 8192;
};

void run_evaluate(const EvaluateOptions& o) {
  if (o.task != "ppl")
    throw Error(cat("--task ", o.task, " is not built yet (the MMLU/GSM8K benchmarks are pending); ",
                    "--task ppl works"));
  const Device device = resolve_device(o.device, &std::cerr);
  const auto tok = load_tokenizer(o.model);
  std::mt19937_64 rng(0);
  std::unique_ptr<llama::LlamaModel> model;
  if (o.adapter.empty()) {
    MethodOptions m;  // no targets: every projection frozen, stored the method's way
    m.method = o.method.empty() ? "lora" : o.method;
    model = llama::load_model(o.model, device, make_linear_factory(m, rng));
  } else {
    // The model the adapter was trained on (its loft record), unless --method overrides it.
    PeftAdapter a = load_peft_adapter(o.adapter);
    const MethodOptions m = llama::method_options_for(a, o.method, o.adapter, std::cerr);
    model = llama::load_model(o.model, device, make_linear_factory(m, rng));
    llama::apply_adapter(*model, a, o.adapter);
  }
  eval::PerplexityOptions po;
  po.max_tokens = model->config().max_position_embeddings;
  po.batch_tokens = std::max(o.batch_tokens, po.max_tokens);
  const eval::PerplexityResult r = eval::perplexity(*model, *tok, o.data, device, po);
  if (o.json) {
    std::cout << nlohmann::json{{"task", "ppl"},   {"documents", r.documents}, {"tokens", r.tokens},
                                {"nll", r.nll},    {"ppl", r.ppl},             {"model", o.model},
                                {"adapter", o.adapter}, {"data", o.data}}
                     .dump()
              << "\n";
  } else {
    std::cout << "perplexity of " << o.data << ": " << std::fixed << std::setprecision(4) << r.ppl
              << " (nll " << r.nll << " over " << r.tokens << " predicted tokens in "
              << r.documents << " documents)\n";
  }
}
}  // namespace

void add_evaluate_command(CLI::App& root) {
  auto o = std::make_shared<EvaluateOptions>();
  CLI::App* cmd = root.add_subcommand("evaluate", "score a model (+adapter): perplexity; MMLU/GSM8K pending");
  cmd->add_option("--model", o->model, "Hugging Face Llama folder")->required();
  cmd->add_option("--adapter", o->adapter, "PEFT adapter folder to apply");
  cmd->add_option("--method", o->method,
                  "build the model for this method instead of the adapter's recorded one (default: "
                  "the record; lora for PEFT-made adapters and no adapter)");
  cmd->add_option("--task", o->task, "ppl (mmlu, gsm8k: pending)")->capture_default_str();
  cmd->add_option("--data", o->data, "ppl: a text file, one document per non-empty line")->required();
  cmd->add_option("--batch-tokens", o->batch_tokens, "tokens per forward pass")->capture_default_str();
  cmd->add_flag("--json", o->json, "print one JSON object");
  add_device_option(*cmd, o->device);
  cmd->callback([o] { run_evaluate(*o); });
}

}  // namespace loft::app
