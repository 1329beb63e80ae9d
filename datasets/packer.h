// Fixed-length rows from tokenized examples, and batches of rows.
//
// Label alignment (pre-shifted): targets[t] is the token the model must predict from position t,
// i.e. ids[t+1] of the same example when that token is trained, else -100. So the loss is
// cross_entropy(logits[t], targets[t]) over targets != -100 with no further shift; the last token of
// each example has target -100, so no target ever crosses an example boundary. (Hugging Face's
// `labels` are unshifted: hf_labels[t+1] == targets[t].)
//
// Packing puts several whole examples in one row; positions restart at 0 for each example and
// doc_ids number the examples in a row, so attention from i to j is allowed iff j <= i and
// doc_ids[i] == doc_ids[j] (document masking). Without packing each row holds one example. The rest
// of a row is padding: pad id, target -100, position 0, doc id -1.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

#include "datasets/tokenize.h"
#include "engine/train/batch.h"

namespace loft::data {

// Packed rows on the host, as the packer and the data loader hand them out (the model's batch,
// with tensors on its device, is engine/train/batch.h's ModelBatch).
struct PackedBatch {
  int64_t rows = 0, seq = 0;       // every vector below is [rows * seq], row-major
  std::vector<int32_t> ids;
  std::vector<int32_t> targets;    // pre-shifted, -100 = not trained (see above)
  std::vector<int32_t> positions;  // restart at 0 per example
  std::vector<int32_t> doc_ids;    // example index within its row, -1 for padding
  int64_t trained_tokens = 0;      // targets != -100
  int64_t examples = 0;

  static constexpr int32_t kIgnore = -100;
  bool operator==(const PackedBatch&) const = default;
};

// The model's batch (engine/train/batch.h) on `device`, from a packed batch: targets stay as they
// are (already shifted), positions and document masks follow doc_ids.
loft::ModelBatch to_model_batch(const PackedBatch& b, Device device);

class Packer {
 public:
  Packer(int64_t seq, int64_t batch_rows, bool packing, int32_t pad_id);

  // Adds one example of 1..seq tokens (truncate first).
  void add(TokenizedExample ex);
  // True when a full batch of rows is complete.
  bool ready() const { return int64_t(rows_.size()) >= batch_rows_; }
  PackedBatch take();
  // Everything pending (the current row too) as a last batch of fewer rows; empty() afterwards.
  PackedBatch flush();
  bool empty() const { return rows_.empty() && current_.empty(); }

  nlohmann::json state() const;
  // Throws loft::UsageError when the state was written with another --seq / --micro-batch / packing.
  void restore(const nlohmann::json& state);

 private:
  using Row = std::vector<TokenizedExample>;
  void close_row();
  PackedBatch build(size_t n_rows);

  int64_t seq_, batch_rows_;
  bool packing_;
  int32_t pad_id_;
  std::vector<Row> rows_;  // complete rows waiting for a batch
  Row current_;            // the row being filled
  int64_t current_len_ = 0;
};

}  // namespace loft::data
