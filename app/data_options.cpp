#include "app/data_options.h"

#include <CLI/CLI.hpp>
#include <iostream>

#include "app/option_checks.h"
#include "engine/core/error.h"
#include "tokenizer/templates.h"

namespace loft::app {

void add_data_options(CLI::App& cmd, DataOptions& o, DataUse use) {
  const bool training = use == DataUse::training;
  if (training)
    cmd.add_option("--data", o.data, "dataset file(s): .jsonl, .jsonl.zst, .json, .txt; FILE:WEIGHT mixes")
        ->required();
  else
    cmd.add_option("files", o.data, "data files (.jsonl, .json, .txt, optionally .zst)")->required();
  cmd.add_option("--format", o.format,
                 "record format: alpaca, messages, sharegpt, prompt_completion, text, gsm8k "
                 "(default: detected from the first record)");
  cmd.add_option("--template", o.chat_template,
                 cat("prompt template: auto, ", chat_template_list(),
                     " (default auto: the model's chat template from tokenizer_config.json when loft knows its "
                     "family, else per format)"));
  cmd.add_option("--seq", o.seq, "tokens per row; longer examples are truncated")->capture_default_str()->transform(seq_bound());
  cmd.add_flag("--train-on-inputs", o.train_on_inputs, "also train prompt tokens");
  cmd.add_option("--on-bad-record", o.on_bad_record, "skip or fail on a bad record")->capture_default_str();
  if (!training) return;
  cmd.add_option("--val-data", o.val_data, "held-out validation file(s)");
  cmd.add_option("--val-fraction", o.val_fraction, "hold out this share of --data for validation")->check(fraction_below(0, 1));
  cmd.add_option("--eval-every", o.eval_every, "validation loss every N steps (0: at the end only)")->transform(int_in(0));
  cmd.add_flag("--packing,!--no-packing", o.packing, "pack several examples per row (default on)");
  cmd.add_option("--shuffle-buffer", o.shuffle_buffer, "records held for shuffling")->capture_default_str()->transform(int_in(0, data::kMaxShuffleBuffer));
  cmd.add_option("--epochs", o.epochs, "passes over the data (default: 1, or repeat until --steps)")->transform(int_in(1, data::kMaxEpochs));
}

data::DataConfig resolve_data_config(const DataOptions& o, int64_t batch_rows, uint64_t seed,
                                     bool steps_given) {
  data::DataConfig c;
  for (const auto& d : o.data) c.train.push_back(data::parse_data_spec(d));
  for (const auto& d : o.val_data) c.val.push_back(data::parse_data_spec(d));
  c.val_fraction = o.val_fraction;
  if (!o.format.empty()) c.format = data::parse_record_format(o.format);
  if (!o.chat_template.empty() && o.chat_template != "auto") c.chat_template = parse_chat_template(o.chat_template);
  c.seq = o.seq;
  c.batch_rows = batch_rows;
  c.packing = o.packing;
  c.train_on_inputs = o.train_on_inputs;
  c.shuffle_buffer = o.shuffle_buffer;
  c.seed = seed;
  constexpr int64_t kUnbounded = int64_t(1) << 40;  // the step count ends training first
  c.epochs = o.epochs > 0 ? o.epochs : (steps_given ? kUnbounded : 1);
  c.eval_every = o.eval_every;
  c.on_bad_record = data::parse_bad_record_policy(o.on_bad_record);
  data::validate(c);
  return c;
}

ChatTemplateDetection use_model_chat_template(data::DataConfig& c, const std::filesystem::path& model_dir) {
  ChatTemplateDetection d = detect_chat_template(model_dir);
  c.model_template = d.family;
  if (d.has_chat_template && !d.family && !c.chat_template)
    std::cerr << "note: " << d.summary() << "; using the record format's default template (--template picks one)\n";
  return d;
}

}  // namespace loft::app
