#include "engine/train/batch.h"

#include "engine/ops/ops.h"

namespace loft {

Batch make_batch(const std::vector<int32_t>& ids, const std::vector<int32_t>& labels,
                 const std::vector<int32_t>& doc_ids, int64_t rows, int64_t seq, Device device) {
  const size_t t_total = size_t(rows * seq);
  LOFT_CHECK(ids.size() == t_total && labels.size() == t_total, "make_batch: ", ids.size(),
             " ids and ", labels.size(), " labels for ", rows, " rows of ", seq);
  LOFT_CHECK(doc_ids.empty() || doc_ids.size() == t_total, "make_batch: ", doc_ids.size(),
             " document ids for ", t_total, " tokens");
  std::vector<int32_t> targets(t_total), positions(t_total), doc_start(t_total);
  Batch b;
  b.rows = rows;
  b.seq = seq;
  for (int64_t r = 0; r < rows; ++r) {
    int32_t start = 0;
    for (int64_t i = 0; i < seq; ++i) {
      const size_t t = size_t(r * seq + i);
      if (i > 0 && !doc_ids.empty() && doc_ids[t] != doc_ids[t - 1]) start = int32_t(i);
      doc_start[t] = start;
      positions[t] = int32_t(i) - start;
      const bool has_next = i + 1 < seq && (doc_ids.empty() || doc_ids[t + 1] == doc_ids[t]);
      targets[t] = has_next ? labels[t + 1] : ops::kIgnoreIndex;
      if (targets[t] != ops::kIgnoreIndex) ++b.target_count;
    }
  }
  const Shape shape{int64_t(t_total)};
  b.ids = Tensor::from_vector(ids, shape, device);
  b.targets = Tensor::from_vector(targets, shape, device);
  b.positions = Tensor::from_vector(positions, shape, device);
  b.doc_start = Tensor::from_vector(doc_start, shape, device);
  return b;
}

}  // namespace loft
