#include "datasets/packer.h"

#include "engine/core/error.h"
#include "engine/io/json_fields.h"
#include "engine/io/json_read.h"

namespace loft::data {

Packer::Packer(int64_t seq, int64_t batch_rows, bool packing, int32_t pad_id)
    : seq_(seq), batch_rows_(batch_rows), packing_(packing), pad_id_(pad_id) {}

void Packer::add(TokenizedExample ex) {
  LOFT_CHECK(!ex.ids.empty() && int64_t(ex.size()) <= seq_, "packer: example of ", ex.size(),
             " tokens does not fit a row of ", seq_);
  // Whole examples only: one that does not fit the current row starts the next one.
  if (!current_.empty() && (!packing_ || current_len_ + int64_t(ex.size()) > seq_)) close_row();
  current_len_ += int64_t(ex.size());
  current_.push_back(std::move(ex));
  if (!packing_ || current_len_ == seq_) close_row();
}

void Packer::close_row() {
  rows_.push_back(std::move(current_));
  current_.clear();
  current_len_ = 0;
}

PackedBatch Packer::take() {
  LOFT_CHECK(ready(), "packer: no full batch yet");
  return build(size_t(batch_rows_));
}

PackedBatch Packer::flush() {
  if (!current_.empty()) close_row();
  return build(rows_.size());
}

PackedBatch Packer::build(size_t n_rows) {
  PackedBatch b;
  b.rows = int64_t(n_rows);
  b.seq = seq_;
  const size_t n = n_rows * size_t(seq_);
  b.ids.assign(n, pad_id_);
  b.targets.assign(n, PackedBatch::kIgnore);
  b.positions.assign(n, 0);
  b.doc_ids.assign(n, -1);
  for (size_t r = 0; r < n_rows; ++r) {
    size_t at = r * size_t(seq_);
    int32_t doc = 0;
    for (const TokenizedExample& ex : rows_[r]) {
      for (size_t t = 0; t < ex.size(); ++t, ++at) {
        b.ids[at] = ex.ids[t];
        b.positions[at] = int32_t(t);
        b.doc_ids[at] = doc;
        if (t + 1 < ex.size() && ex.trained[t + 1]) {
          b.targets[at] = ex.ids[t + 1];
          ++b.trained_tokens;
        }
      }
      ++doc;
      ++b.examples;
    }
  }
  rows_.erase(rows_.begin(), rows_.begin() + std::ptrdiff_t(n_rows));
  return b;
}

nlohmann::json Packer::state() const {
  auto row_json = [](const Row& row) {
    nlohmann::json j = nlohmann::json::array();
    for (const TokenizedExample& ex : row) j.push_back(to_json(ex));
    return j;
  };
  nlohmann::json rows = nlohmann::json::array();
  for (const Row& r : rows_) rows.push_back(row_json(r));
  return {{"seq", seq_}, {"batch_rows", batch_rows_}, {"packing", packing_}, {"rows", rows},
          {"current", row_json(current_)}};
}

void Packer::restore(const nlohmann::json& s) {
  try {
    // Typed reads: a saved seq of 1.6e87 is a damaged state, not a number to convert.
    const JsonFields f(s, "the saved data position", "packer.");
    const auto same = [&](const char* option, auto mine, auto theirs) {
      if (theirs != mine)
        throw UsageError(cat(option, ": the data position to resume was saved with ", theirs, ", not ", mine));
    };
    same("--seq", seq_, f.integer("seq"));
    same("--micro-batch", batch_rows_, f.integer("batch_rows"));
    same("--packing", packing_, f.boolean("packing"));
    // A row holds at most seq tokens; anything else is a damaged state, not one to pack from.
    auto row_from = [&](const nlohmann::json& j) {
      Row row;
      int64_t len = 0;
      for (const auto& e : j) {
        row.push_back(tokenized_example_from_json(e));
        len += int64_t(row.back().size());
        if (row.back().size() == 0 || len > seq_)
          throw Error(cat("the saved data position holds a row of more than --seq ", seq_,
                          " tokens (or an empty example)"));
      }
      return row;
    };
    const nlohmann::json& rows = s.at("rows");
    if (!rows.is_array())
      throw Error(cat("the saved data position holds ", brief(rows), " as its rows"));
    rows_.clear();
    for (const auto& r : rows) rows_.push_back(row_from(r));
    current_ = row_from(s.at("current"));
  } catch (const nlohmann::json::exception& e) {
    throw UsageError(cat("the saved data position is malformed: ", e.what()));
  }
  current_len_ = 0;
  for (const TokenizedExample& ex : current_) current_len_ += int64_t(ex.size());
}

loft::ModelBatch to_model_batch(const PackedBatch& b, Device device) {
  return make_batch_shifted(b.ids, b.targets, b.doc_ids, b.rows, b.seq, device);
}

}  // namespace loft::data
