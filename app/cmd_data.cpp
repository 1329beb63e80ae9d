// loft data inspect: renders a few examples of data files with their trained tokens marked and
// prints token-length statistics over each whole file (datasets/inspect.h does the work).
#include <iostream>
#include <memory>

#include "app/commands.h"
#include "datasets/inspect.h"
#include "engine/core/error.h"

namespace loft::app {

namespace {

struct DataInspectArgs {
  std::vector<std::string> files;
  std::string format, chat_template, model, tokenizer_file, on_bad_record = "fail";
  data::InspectOptions opt;
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
  if (!a.format.empty()) a.opt.format = data::parse_record_format(a.format);
  if (!a.chat_template.empty()) a.opt.chat_template = parse_chat_template(a.chat_template);
  a.opt.on_bad_record = data::parse_bad_record_policy(a.on_bad_record);
  const auto tok = tokenizer_for(a);
  for (size_t i = 0; i < a.files.size(); ++i) {
    const data::FileInspection r = data::inspect_file(a.files[i], a.opt, *tok);
    if (i) std::cout << '\n';
    data::print_inspection(std::cout, r, a.opt);
    std::cout.flush();
  }
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
  cmd->add_option("files", a->files, "data files (.jsonl, .json, .txt, optionally .zst)")->required();
  cmd->add_option("--format", a->format,
                  "record format: alpaca, messages, sharegpt, prompt_completion, text or gsm8k "
                  "(default: detected from the first record)");
  cmd->add_option("--template", a->chat_template,
                  "alpaca, llama2, llama3, chatml or plain (default: chosen by the format)");
  cmd->add_option("--model", a->model, "Hugging Face model folder whose tokenizer.model to use");
  cmd->add_option("--tokenizer", a->tokenizer_file, "a SentencePiece tokenizer.model file");
  cmd->add_option("--seq", a->opt.seq, "tokens per row: longer examples count as truncated")->capture_default_str();
  cmd->add_option("--examples", a->opt.examples, "examples to render per file")->capture_default_str();
  cmd->add_flag("--train-on-inputs", a->opt.train_on_inputs, "train the prompt tokens too");
  cmd->add_option("--on-bad-record", a->on_bad_record, "skip or fail on a bad record")->capture_default_str();
  cmd->callback([a] { run_inspect(*a); });
}

}  // namespace loft::app
