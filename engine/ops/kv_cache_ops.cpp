// The checks of the KV-cache ops of op_list.def, then the dispatch to their device.
#include "engine/ops/kv_cache_ops.h"

#include <algorithm>
#include <cstdint>

#include "engine/ops/dispatch.h"

namespace loft::ops {

namespace {

void need(bool ok, const char* op, const char* name, const Tensor& t, const std::string& want) {
  LOFT_CHECK(ok, op, ": ", name, " is ", t.defined() ? t.str() : "undefined", ", expected ", want);
}

void one_device(const char* op, std::initializer_list<const Tensor*> ts) {
  const Device d = (*ts.begin())->device();
  for (const Tensor* t : ts)
    LOFT_CHECK(t->defined() && t->device() == d, op, ": tensors on different devices (",
               t->defined() ? t->str() : "undefined", " vs ", d.str(), ")");
}

bool dtype_ok(const Tensor& t) {
  return t.dtype() == DType::F32 || (t.device().is_cuda() && t.dtype() == DType::BF16);
}

// The cache pair [slots, max_len, Hkv, D] and the per-token slots/pos [T] I32.
void check_cache(const char* op, const Tensor& k_cache, const Tensor& v_cache, const Tensor& slots,
                 const Tensor& pos, int64_t tokens) {
  need(k_cache.dim() == 4 && dtype_ok(k_cache), op, "k_cache", k_cache,
       "[slots, max_len, kv_heads, head_dim] F32 (or BF16 on CUDA)");
  need(v_cache.shape() == k_cache.shape() && v_cache.dtype() == k_cache.dtype(), op, "v_cache",
       v_cache, "k_cache's shape and dtype");
  const std::string per_token = cat("I32 [", tokens, "]");
  need(slots.dtype() == DType::I32 && slots.shape() == Shape{tokens}, op, "slots", slots,
       per_token);
  need(pos.dtype() == DType::I32 && pos.shape() == Shape{tokens}, op, "pos", pos, per_token);
}

}  // namespace

void kv_cache_write(const Tensor& k, const Tensor& v, const Tensor& slots, const Tensor& pos,
                    Tensor& k_cache, Tensor& v_cache) {
  const char* op = "kv_cache_write";
  one_device(op, {&k, &v, &slots, &pos, &k_cache, &v_cache});
  check_cache(op, k_cache, v_cache, slots, pos, k.dim() > 0 ? k.size(0) : 0);
  const Shape row{k_cache.size(2), k_cache.size(3)};
  need(k.dim() == 3 && Shape{k.size(1), k.size(2)} == row && k.dtype() == k_cache.dtype(), op, "k",
       k, cat("[tokens, ", row[0], ", ", row[1], "] ", dtype_name(k_cache.dtype())));
  need(v.shape() == k.shape() && v.dtype() == k.dtype(), op, "v", v, "k's shape and dtype");
  if (k.size(0) == 0) return;
  dispatch::kv_cache_write(k.device(), k, v, slots, pos, k_cache, v_cache);
}

std::vector<int32_t> make_query_tiles(const std::vector<int32_t>& slot, const std::vector<int32_t>& start,
                                      const std::vector<int32_t>& count) {
  constexpr int32_t kRows = 64;
  LOFT_CHECK(slot.size() == start.size() && slot.size() == count.size(), "make_query_tiles: ", slot.size(),
             " slots, ", start.size(), " starts, ", count.size(), " counts");
  std::vector<int32_t> out;
  int32_t first = 0;
  for (size_t r = 0; r < slot.size(); ++r) {
    for (int32_t done = 0; done < count[r]; done += kRows)
      out.insert(out.end(), {first + done, std::min(kRows, count[r] - done), slot[r], start[r] + done});
    first += count[r];
  }
  return out;
}

void cached_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                      const Tensor& slots, const Tensor& pos, float scale, Tensor& out,
                      const Tensor* tiles, int64_t window) {
  const char* op = "cached_attention";
  LOFT_CHECK(window >= 0 && window <= INT32_MAX, op, ": window ", window,
             " must be 0 (none) or a key count up to 2^31-1");
  one_device(op, {&q, &k_cache, &v_cache, &slots, &pos, &out});
  check_cache(op, k_cache, v_cache, slots, pos, q.dim() > 0 ? q.size(0) : 0);
  need(q.dim() == 3 && q.size(2) == k_cache.size(3) && q.dtype() == k_cache.dtype() &&
           q.size(1) % k_cache.size(2) == 0,
       op, "q", q,
       cat("[tokens, a multiple of ", k_cache.size(2), " heads, ", k_cache.size(3), "] ",
           dtype_name(k_cache.dtype())));
  need(out.shape() == q.shape() && out.dtype() == q.dtype(), op, "out", out, "q's shape and dtype");
  if (tiles)
    need(tiles->dtype() == DType::I32 && tiles->dim() == 2 && tiles->size(1) == 4 &&
             tiles->device() == q.device(),
         op, "tiles", *tiles, "I32 [runs, 4] on q's device");
  if (q.size(0) == 0) return;
  dispatch::cached_attention(q.device(), q, k_cache, v_cache, slots, pos, scale, out, tiles,
                             window);
}

void argmax_rows(const Tensor& x, Tensor& out) {
  const char* op = "argmax_rows";
  one_device(op, {&x, &out});
  need(x.dim() == 2 && x.dtype() == DType::F32 && x.size(1) > 0, op, "x", x, "F32 [rows, vocab > 0]");
  need(out.dim() == 1 && out.size(0) == x.size(0) && out.dtype() == DType::I32, op, "out", out,
       cat("I32 [", x.size(0), "]"));
  if (x.size(0) == 0) return;
  dispatch::argmax_rows(x.device(), x, out);
}

}  // namespace loft::ops
