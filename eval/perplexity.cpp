#include "eval/perplexity.h"

#include <cmath>
#include <fstream>

#include "engine/ops/ops.h"

namespace loft::eval {

namespace {
// Rows of `row_len` tokens holding whole documents back to back; the rest is padding.
class RowPacker {
 public:
  explicit RowPacker(int64_t row_len) : row_len_(row_len) {}
  bool fits(size_t n) const { return used_ + int64_t(n) <= row_len_; }
  void add(const std::vector<int32_t>& doc) {
    if (!fits(doc.size())) close_row();
    for (int32_t id : doc) {
      ids_.push_back(id);
      labels_.push_back(id);
      doc_ids_.push_back(doc_counter_);
    }
    used_ += int64_t(doc.size());
    ++doc_counter_;
  }
  bool empty() const { return ids_.empty(); }
  // Closes the current row and returns everything as one batch (HF-style labels: the document's
  // own ids, -100 on padding).
  ModelBatch take(Device device) {
    if (used_ > 0) close_row();
    const int64_t rows = int64_t(ids_.size()) / row_len_;
    ModelBatch b = make_batch(ids_, labels_, doc_ids_, rows, row_len_, device);
    ids_.clear();
    labels_.clear();
    doc_ids_.clear();
    return b;
  }
  int64_t complete_rows() const { return int64_t(ids_.size()) / row_len_; }

 private:
  void close_row() {
    // Padding is its own document (id -1 never equals a real one) with nothing to predict.
    while (used_ < row_len_) {
      ids_.push_back(0);
      labels_.push_back(ops::kIgnoreIndex);
      doc_ids_.push_back(-1);
      ++used_;
    }
    used_ = 0;
  }
  int64_t row_len_;
  std::vector<int32_t> ids_, labels_, doc_ids_;
  int64_t used_ = 0;
  int32_t doc_counter_ = 0;
};
}  // namespace

PerplexityResult perplexity(TrainableModel& model, const Tokenizer& tok,
                            const std::filesystem::path& file, Device device,
                            const PerplexityOptions& opt) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw Error(cat("--data: cannot read ", file.string()));
  LOFT_CHECK(opt.max_tokens >= 2, "perplexity: max_tokens must be at least 2");
  const int64_t rows = std::max<int64_t>(1, opt.batch_tokens / opt.max_tokens);
  RowPacker packer(opt.max_tokens);
  PerplexityResult r;
  double nll_sum = 0;
  auto flush = [&] {
    const ModelBatch b = packer.take(device);
    const LossSums s = model.evaluate(b);
    nll_sum += s.loss_sum;
    r.tokens += s.tokens;
  };
  std::string line;
  int64_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    std::vector<int32_t> doc;
    if (tok.bos_id() >= 0) doc.push_back(tok.bos_id());
    try {
      for (int32_t id : tok.encode(line)) doc.push_back(id);
    } catch (const Error& e) {
      throw Error(cat(file.string(), ":", line_no, ": ", e.what()));
    }
    if (int64_t(doc.size()) > opt.max_tokens) doc.resize(size_t(opt.max_tokens));
    ++r.documents;
    if (!packer.fits(doc.size()) && packer.complete_rows() + 1 >= rows) flush();
    packer.add(doc);
  }
  if (!packer.empty()) flush();
  if (r.tokens == 0) throw Error(cat(file.string(), ": no document with two or more tokens"));
  r.nll = nll_sum / double(r.tokens);
  r.ppl = std::exp(r.nll);
  return r;
}

}  // namespace loft::eval
