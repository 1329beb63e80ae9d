#include "engine/train/batch.h"

#include "engine/ops/ops.h"

namespace loft {

namespace {
void check_sizes(size_t ids, size_t labels, size_t docs, int64_t rows, int64_t seq) {
  const size_t t_total = size_t(rows * seq);
  LOFT_CHECK(ids == t_total && labels == t_total, "batch: ", ids, " ids and ", labels,
             " labels for ", rows, " rows of ", seq);
  LOFT_CHECK(docs == 0 || docs == t_total, "batch: ", docs, " document ids for ", t_total,
             " tokens");
}
}  // namespace

ModelBatch make_batch(const std::vector<int32_t>& ids, const std::vector<int32_t>& labels,
                      const std::vector<int32_t>& doc_ids, int64_t rows, int64_t seq, Device device) {
  check_sizes(ids.size(), labels.size(), doc_ids.size(), rows, seq);
  // Shift: position t predicts labels[t+1] of the same document.
  std::vector<int32_t> targets(ids.size(), ops::kIgnoreIndex);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i + 1 < seq; ++i) {
      const size_t t = size_t(r * seq + i);
      if (doc_ids.empty() || doc_ids[t + 1] == doc_ids[t]) targets[t] = labels[t + 1];
    }
  return make_batch_shifted(ids, targets, doc_ids, rows, seq, device);
}

ModelBatch make_batch_shifted(const std::vector<int32_t>& ids, const std::vector<int32_t>& targets,
                              const std::vector<int32_t>& doc_ids, int64_t rows, int64_t seq,
                              Device device) {
  check_sizes(ids.size(), targets.size(), doc_ids.size(), rows, seq);
  const size_t t_total = ids.size();
  std::vector<int32_t> positions(t_total), doc_start(t_total);
  ModelBatch b;
  b.rows = rows;
  b.seq = seq;
  for (int64_t r = 0; r < rows; ++r) {
    int32_t start = 0;
    for (int64_t i = 0; i < seq; ++i) {
      const size_t t = size_t(r * seq + i);
      if (i > 0 && !doc_ids.empty() && doc_ids[t] != doc_ids[t - 1]) start = int32_t(i);
      doc_start[t] = start;
      positions[t] = int32_t(i) - start;
      if (targets[t] != ops::kIgnoreIndex) ++b.target_count;
    }
  }
  const Shape shape{int64_t(t_total)};
  b.ids = Tensor::from_vector(ids, shape, device);
  b.targets = Tensor::from_vector(targets, shape, device);
  b.positions = Tensor::from_vector(positions, shape, device);
  b.doc_start = Tensor::from_vector(doc_start, shape, device);
  // A row that skips the vocabulary saves ~4·vocab·hidden FLOPs; the gathers cost two passes over
  // [T, hidden]: worth it from well under 1% of rows, so 1/64 keeps clear of a batch's row ends.
  const int64_t without = int64_t(t_total) - b.target_count;
  if (b.target_count > 0 && without * 64 >= int64_t(t_total)) {
    std::vector<int32_t> rows, row_targets, scatter(t_total, int32_t(b.target_count));
    for (size_t t = 0; t < t_total; ++t)
      if (targets[t] != ops::kIgnoreIndex) {
        scatter[t] = int32_t(rows.size());
        rows.push_back(int32_t(t));
        row_targets.push_back(targets[t]);
      }
    const Shape compact{b.target_count};
    b.loss_rows = Tensor::from_vector(rows, compact, device);
    b.loss_targets = Tensor::from_vector(row_targets, compact, device);
    b.loss_scatter = Tensor::from_vector(scatter, shape, device);
  }
  return b;
}

}  // namespace loft
