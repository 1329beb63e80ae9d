// loft data inspect: renders a few examples of data files with their trained tokens marked and
// prints token-length statistics over each whole file (datasets/inspect.h does the work).
#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>

#include "app/commands.h"
#include "app/data_options.h"
#include "app/inspect_json.h"
#include "datasets/inspect.h"
#include "engine/core/error.h"

namespace loft::app {

namespace {

struct DataInspectArgs {
  DataOptions data;  // files, --format, --template, --seq, --train-on-inputs, --on-bad-record
  std::string model, tokenizer_file;
  data::InspectOptions opt;
  bool json = false;
};

std::unique_ptr<Tokenizer> tokenizer_for(const DataInspectArgs& a) {
  if (a.model.empty() == a.tokenizer_file.empty())
    throw UsageError("data inspect: give exactly one of --model DIR or --tokenizer FILE");
  if (!a.model.empty()) {
    if (!std::filesystem::is_directory(a.model)) throw UsageError(cat("--model ", a.model, ": not a folder"));
    return load_tokenizer(a.model);
  }
  if (!std::filesystem::is_regular_file(a.tokenizer_file))
    throw UsageError(cat("--tokenizer ", a.tokenizer_file, ": no such file"));
  return load_sentencepiece(a.tokenizer_file);
}

void run_inspect(DataInspectArgs a) {
  // The same parsing and checks as training, so inspect reads the data exactly as finetune would.
  data::DataConfig c = resolve_data_config(a.data, /*batch_rows=*/1, /*seed=*/0);
  a.opt.format = c.format;
  a.opt.chat_template = c.chat_template;
  a.opt.seq = c.seq;
  a.opt.train_on_inputs = c.train_on_inputs;
  a.opt.on_bad_record = c.on_bad_record;
  const auto tok = tokenizer_for(a);
  if (!a.model.empty()) a.opt.model_template = use_model_chat_template(c, a.model).family;
  nlohmann::json files = nlohmann::json::array();
  for (size_t i = 0; i < a.data.data.size(); ++i) {
    const data::FileInspection r = data::inspect_file(a.data.data[i], a.opt, *tok);
    if (a.json) {
      files.push_back(inspection_json(r, a.opt));
      continue;
    }
    if (i) std::cout << '\n';
    data::print_inspection(std::cout, r, a.opt);
    std::cout.flush();
  }
  if (a.json) std::cout << nlohmann::json{{"files", files}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
}

}  // namespace

void add_data_command(CLI::App& root) {
  CLI::App* data = root.add_subcommand("data", "look at training data the way training reads it");
  // Not require_subcommand(): its error does not say which subcommands exist.
  data->callback([data] {
    if (data->get_subcommands().empty()) throw UsageError("'loft data' needs a subcommand: inspect");
  });
  CLI::App* cmd = data->add_subcommand("inspect", "render examples and print token statistics of data files");
  cmd->footer(
      "In the examples, trained tokens (the loss targets) are wrapped in [[ and ]]; control tokens "
      "show as <bos>, <eos> or <special:ID>. Statistics cover every record of each file, streamed "
      "(not loaded): token lengths before truncation, and what truncation to --seq keeps.");
  auto a = std::make_shared<DataInspectArgs>();
  add_data_options(*cmd, a->data, DataUse::inspection);
  cmd->add_option("--model", a->model, "Hugging Face model folder whose tokenizer (and tokenizer_config.json chat template) to use");
  cmd->add_option("--tokenizer", a->tokenizer_file, "a SentencePiece tokenizer.model file");
  cmd->add_option("--examples", a->opt.examples, "examples to render per file")->capture_default_str();
  cmd->add_flag("--json", a->json, "print one JSON object: per file, the examples as trained/untrained text "
                                  "segments, length statistics and a histogram");
  cmd->callback([a] { run_inspect(*a); });
}

}  // namespace loft::app
