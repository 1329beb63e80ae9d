// Everything the data pipeline takes from the command line (the `loft finetune` data options).
#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string_view>
#include <vector>

#include "datasets/record.h"
#include "tokenizer/templates.h"

namespace loft::data {

struct DataSource {
  std::filesystem::path path;
  double weight = 1.0;  // relative sampling weight among the --data files
};

enum class BadRecordPolicy { fail, skip };

// Upper bounds of the data options, checked before anything is read or allocated.
constexpr int64_t kMaxSeq = int64_t(1) << 20;            // --seq tokens per row
constexpr int64_t kMaxShuffleBuffer = int64_t(1) << 20;  // --shuffle-buffer records held
constexpr int64_t kMaxEpochs = 1000;                     // --epochs passes

struct DataConfig {
  std::vector<DataSource> train;              // --data FILE[:WEIGHT] (repeatable)
  std::vector<DataSource> val;                // --val-data FILE (repeatable)
  double val_fraction = 0.0;                  // --val-fraction: hold out this share of --data records
  std::optional<RecordFormat> format;         // --format (default: detected per file from its first record)
  std::optional<ChatTemplate> chat_template;  // --template (default: per format, see default_template)
  // The family of the model's own chat template (tokenizer_config.json), when loft knows it.
  std::optional<ChatTemplate> model_template;
  int64_t seq = 512;                          // --seq: tokens per row; longer examples are truncated
  int64_t batch_rows = 8;                     // --micro-batch: rows per batch
  bool packing = true;                        // --packing / --no-packing
  bool train_on_inputs = false;               // --train-on-inputs: train prompt tokens too
  int64_t shuffle_buffer = 1000;              // --shuffle-buffer: records held for shuffling (0/1 = in order)
  uint64_t seed = 0;                          // --seed
  int64_t epochs = 1;                         // --epochs: passes over every --data file
  int64_t eval_every = 0;                     // --eval-every: steps between validation passes (0 = never)
  BadRecordPolicy on_bad_record = BadRecordPolicy::fail;  // --on-bad-record skip|fail
  // One line / element / document at most: 1 MiB is ~250k tokens, beyond any --seq, and bounds
  // tokenizing memory (a few hundred bytes per input byte) to a few hundred MB.
  size_t max_record_bytes = size_t(1) << 20;
};

// "FILE" or "FILE:WEIGHT" (a suffix after the last ':' that reads as a positive number).
// Throws loft::UsageError naming --data for a zero/negative weight.
DataSource parse_data_spec(std::string_view spec);
// Throws loft::UsageError naming --on-bad-record for anything but skip/fail.
BadRecordPolicy parse_bad_record_policy(std::string_view name);
// Checks option values and their combinations; throws loft::UsageError naming the option.
void validate(const DataConfig& config);

// The template used for a format when --template is not given. Text and prompt/completion records
// are plain (a continuation, as TRL treats string prompt/completion). Chats (messages, sharegpt) and
// instruction data (alpaca, gsm8k: the instruction, with its input, is the user turn) use the
// model's chat template when `model_template` names its family; without one, instruction data
// uses Alpaca's prompt and chats the tokenizer's own markers (Llama-3 header tokens, else ChatML
// tokens, else Llama-2 [INST]).
ChatTemplate default_template(RecordFormat format, const Tokenizer& tok,
                              std::optional<ChatTemplate> model_template = std::nullopt);

// Where a source's template came from, for `loft data inspect` and the finetune plan.
enum class TemplateOrigin { option, model, format };
std::string_view template_origin_text(TemplateOrigin origin);

}  // namespace loft::data
