// The data pipeline's top object: records from one or more files (mixed by weight) -> shuffle
// buffer -> template + tokenize -> truncate to --seq -> pack into rows -> batches, with an exact,
// JSON-serialisable position: restore(state()) continues with the very batches an uninterrupted
// run would have produced.
//
// Mixing and epochs: each record comes from a file drawn with probability proportional to its
// weight. A file that reaches its end starts its next pass; the data ends once every file has
// completed --epochs passes (files that finish early keep cycling so the proportions hold).
// The last batch may have fewer rows.
#pragma once
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "datasets/data_config.h"
#include "datasets/packer.h"
#include "datasets/source.h"

namespace loft::data {

struct DataStats {
  int64_t examples = 0;           // examples packed into batches
  int64_t truncated = 0;          // examples cut to --seq
  int64_t dropped_untrained = 0;  // examples left with no trained token (e.g. the response was cut off)
  int64_t skipped_bad = 0;        // bad records skipped (--on-bad-record skip), all files
  int64_t batches = 0;
  int64_t trained_tokens = 0;     // tokens of the packed examples that are targets
  int64_t masked_tokens = 0;      // tokens of the packed examples that are context only (prompts)
  // One line for the end-of-run report, e.g. "skipped 3 bad records (first: a.jsonl:7: ...)".
  std::string summary() const;
  std::string first_skip_reason;
};

class DataLoader {
 public:
  // The training stream (--data, minus the --val-fraction share), shuffled, for --epochs passes.
  static DataLoader training(const DataConfig& config, const Tokenizer& tok);
  // One ordered pass over the validation data (--val-data, or the --val-fraction share of --data).
  static DataLoader validation(const DataConfig& config, const Tokenizer& tok);
  static bool has_validation(const DataConfig& config) { return !config.val.empty() || config.val_fraction > 0; }

  // The next batch, or nullopt when the data is exhausted.
  std::optional<PackedBatch> next();

  // Completed passes over the slowest file (for logs).
  int64_t epoch() const;
  DataStats stats() const;
  const std::vector<std::unique_ptr<Source>>& sources() const { return sources_; }

  nlohmann::json state() const;
  // Restores a position saved by state() of a loader built from the same config. Throws
  // loft::UsageError naming the option that differs.
  void restore(const nlohmann::json& state);

 private:
  DataLoader(const DataConfig& config, const Tokenizer& tok, const std::vector<DataSource>& files, Split split,
             bool ordered);
  std::optional<SourceRecord> next_record();
  int pick_source();
  std::optional<SourceRecord> next_shuffled();
  void add_example(const SourceRecord& rec);

  const Tokenizer* tok_;
  bool train_on_inputs_;
  int64_t seq_;
  int64_t epochs_;
  size_t buffer_capacity_;
  bool ordered_;  // validation: files one after another, one pass, no shuffle
  std::vector<std::unique_ptr<Source>> sources_;
  std::vector<double> weights_;
  std::mt19937_64 rng_;
  std::vector<SourceRecord> buffer_;
  int64_t records_read_ = 0;      // records taken from the sources so far
  int64_t records_per_pass_ = 0;  // records in one pass over every source (known after it)
  int64_t drops_in_a_row_ = 0;    // consecutive examples dropped for having nothing to train
  bool input_done_ = false;
  int current_ = 0;  // ordered mode: the file being read
  Packer packer_;
  DataStats stats_;
};

}  // namespace loft::data
