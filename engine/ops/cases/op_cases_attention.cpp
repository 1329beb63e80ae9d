// Parity rows of attention, its backward and the KV-cache ops.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "engine/ops/kv_cache_ops.h"
#include "engine/ops/cases/op_cases.h"

namespace loft::cases {
namespace {

// rows B, seq S, query heads, kv heads, head_dim, longest document (random lengths up to it; 0:
// one document per row). Head dims 64 and 128 in BF16 take CUDA's flash kernels, the others its
// GEMM path. Groups of 4, 6 and 7 query heads per kv head on grids this small make the flash
// backward split each group over blocks (2, 3 and 3 splits; 7 as 3 + 3 + 1).
const std::vector<Sizes> kAttentionSizes = {
    {1, 1, 1, 1, 8, 1},   {2, 17, 4, 2, 16, 5},  {1, 70, 2, 1, 64, 70},    {2, 33, 4, 4, 128, 9},
    {1, 130, 4, 2, 64, 40}, {2, 200, 8, 2, 128, 0}, {1, 150, 7, 1, 128, 60}, {2, 96, 6, 1, 64, 0}};

float attention_scale(const Tensor& q) { return 1.0f / std::sqrt(float(q.size(2))); }

// q, k, v, doc_start, and the sequence length as I32 [1].
Tensors attention_inputs(const Sizes& s, std::mt19937& rng) {
  const int64_t t = s[0] * s[1];
  return Tensors{random_tensor({t, s[2], s[4]}, rng), random_tensor({t, s[3], s[4]}, rng),
                 random_tensor({t, s[3], s[4]}, rng),
                 s[5] == 0 ? Tensor::zeros({t}, DType::I32) : random_doc_start(s[0], s[1], s[5], rng),
                 Tensor::from_vector(std::vector<int32_t>{int32_t(s[1])}, {1})};
}

// The forward's out and lse from inputs laid out as attention_inputs (starting at `i`).
std::pair<Tensor, Tensor> attend(const Tensors& in, size_t i, Device d, DType dt, const Call& call) {
  const Tensor& q = in[i];
  const Tensor qd = on(q, d, dt), k = on(in[i + 1], d, dt), v = on(in[i + 2], d, dt), doc = on(in[i + 3], d, dt);
  Tensor out = out_like(q.shape(), d, dt), lse = out_like({q.size(0), q.size(1)}, d, DType::F32);
  call([&] { ops::attention(qd, k, v, doc, in[i + 4].ptr<int32_t>()[0], attention_scale(q), out, lse); });
  return {out, lse};
}

// One layer's attention: B rows of S tokens, one document each (what the flop count assumes).
std::vector<Sizes> attention_layer(const LayerSizes& l) {
  return {{l.batch, l.seq, l.heads, l.kv_heads, l.head_dim, 0}};
}

// Causal: half of the S×S scores; forward 2 GEMMs (backward 5, as FlashAttention counts).
double attention_flops(const Sizes& s) { return 2.0 * double(s[0] * s[2]) * double(s[1] * s[1]) * double(s[4]); }

std::vector<OpCase> attention_pair() {
  OpCase f{"attention"};
  f.sizes = kAttentionSizes;
  f.dims = {"b", "s", "hq", "hkv", "hd", "doc"};
  f.make = attention_inputs;
  f.run = [](const Tensors& in, Device d, DType dt, const Call& call) {
    auto [out, lse] = attend(in, 0, d, dt, call);
    return Tensors{host_f32(out), host_f32(lse)};
  };
  f.tol_f32 = 2e-5;
  f.tol_bf16 = 2e-2;
  f.layer_sizes = attention_layer;
  f.cost = [](const Sizes& s, double) { return Cost{0, attention_flops(s)}; };

  OpCase b{"attention_backward"};
  b.dims = f.dims;
  b.sizes = kAttentionSizes;
  b.make = [](const Sizes& s, std::mt19937& rng) {  // dout, then attention's inputs
    Tensors in = attention_inputs(s, rng);
    in.insert(in.begin(), random_tensor(in[0].shape(), rng));
    return in;
  };
  b.run = [](const Tensors& in, Device d, DType dt, const Call& call) {
    // Not a structured binding: clang before 16 cannot capture one in the lambda below.
    const auto forward = attend(in, 1, d, dt, [](const std::function<void()>& op) { op(); });
    const Tensor &out = forward.first, &lse = forward.second;
    const Tensor& q = in[1];
    const Tensor dout = on(in[0], d, dt), qd = on(q, d, dt), k = on(in[2], d, dt), v = on(in[3], d, dt);
    const Tensor doc = on(in[4], d, dt);
    Tensor dq = out_like(q.shape(), d, dt), dk = out_like(in[2].shape(), d, dt), dv = out_like(in[3].shape(), d, dt);
    call([&] {
      ops::attention_backward(dout, qd, k, v, out, lse, doc, in[5].ptr<int32_t>()[0], attention_scale(q), dq, dk, dv);
    });
    return Tensors{host_f32(dq), host_f32(dk), host_f32(dv)};
  };
  b.backward_of = "attention";
  b.loss = [](const Tensors& in, Device d) {
    return dot(attend(in, 1, d, DType::F32, [](const std::function<void()>& op) { op(); }).first, in[0]);
  };
  b.grad_of = {1, 2, 3};
  b.tol_f32 = 2e-5;
  b.tol_bf16 = 3e-2;
  b.layer_sizes = attention_layer;
  b.cost = [](const Sizes& s, double) { return Cost{0, 2.5 * attention_flops(s)}; };
  return {f, b};
}

// slots, max_len, query heads, kv heads, head_dim, tokens, tiled (tokens as runs of consecutive
// positions with cached_attention's tile table), window (cached_attention's sliding window; 0:
// none).
const std::vector<std::string> kCacheDims = {"slots", "len", "hq", "hkv", "hd", "t", "tiled", "window"};
const std::vector<Sizes> kCacheSizes = {
    {1, 4, 1, 1, 8, 1, 0, 0},   {3, 16, 4, 2, 16, 5, 0, 0},  {2, 40, 8, 2, 64, 9, 0, 0},
    {3, 80, 4, 4, 128, 7, 0, 0}, {2, 90, 4, 2, 64, 75, 1, 0}, {3, 20, 2, 1, 16, 12, 1, 0},
    {3, 40, 4, 2, 64, 9, 0, 7}, {2, 90, 4, 2, 64, 75, 1, 16}};

// A decode step: one new token for each of the batch's sequences, caches of seq positions.
std::vector<Sizes> decode_step(const LayerSizes& l) {
  return {{l.batch, l.seq, l.heads, l.kv_heads, l.head_dim, l.batch, 0, 0}};
}

// Per token a (slot, position) pair, all different: `tiled` gives each slot one run of
// consecutive positions.
std::pair<std::vector<int32_t>, std::vector<int32_t>> places(const Sizes& s, std::mt19937& rng,
                                                               std::vector<int32_t>* tiles) {
  const int64_t slots = s[0], len = s[1], tokens = s[5];
  std::vector<int32_t> slot, pos;
  if (s[6]) {
    std::vector<int32_t> rs, starts, counts;
    int64_t left = tokens;
    for (int32_t r = 0; r < slots && left > 0; ++r) {
      const int64_t n = r + 1 == slots ? left : std::max<int64_t>(1, left / 2);
      const int32_t start = int32_t(std::uniform_int_distribution<int64_t>(0, len - n)(rng));
      for (int64_t i = 0; i < n; ++i) slot.push_back(r), pos.push_back(start + int32_t(i));
      rs.push_back(r), starts.push_back(start), counts.push_back(int32_t(n));
      left -= n;
    }
    *tiles = ops::make_query_tiles(rs, starts, counts);
    return {slot, pos};
  }
  std::vector<int32_t> cells(size_t(slots * len));
  std::iota(cells.begin(), cells.end(), 0);
  std::shuffle(cells.begin(), cells.end(), rng);
  for (int64_t t = 0; t < tokens; ++t) slot.push_back(cells[t] / int32_t(len)), pos.push_back(cells[t] % int32_t(len));
  return {slot, pos};
}

// A draw of the cache ops' shared inputs at size s: slots, pos, k_cache, v_cache and the tile
// table (I32 [runs, 4]; no rows unless s asks for tiles).
struct CacheDraw {
  Tensor slots, pos, k_cache, v_cache, tiles;
};
CacheDraw cache_draw(const Sizes& s, std::mt19937& rng) {
  std::vector<int32_t> tiles;
  auto [slot, pos] = places(s, rng, &tiles);
  const Shape cache{s[0], s[1], s[3], s[4]};
  return {Tensor::from_vector(slot, {s[5]}), Tensor::from_vector(pos, {s[5]}), random_tensor(cache, rng),
          random_tensor(cache, rng), Tensor::from_vector(tiles, {int64_t(tiles.size() / 4), 4})};
}

// A cache op's row: its sizes, timed at a decode step.
OpCase cache_case(const char* op) {
  OpCase c{op};
  c.dims = kCacheDims;
  c.sizes = kCacheSizes;
  c.layer_sizes = decode_step;
  return c;
}

OpCase kv_cache_write_case() {
  OpCase c = cache_case("kv_cache_write");
  c.make = [](const Sizes& s, std::mt19937& rng) {  // k, v, slots, pos, k_cache, v_cache
    const CacheDraw draw = cache_draw(s, rng);
    return Tensors{random_tensor({s[5], s[3], s[4]}, rng), random_tensor({s[5], s[3], s[4]}, rng), draw.slots, draw.pos,
                   draw.k_cache, draw.v_cache};
  };
  c.run = [](const Tensors& in, Device d, DType dt, const Call& call) {
    const Tensor k = on(in[0], d, dt), v = on(in[1], d, dt), slots = on(in[2], d, dt), pos = on(in[3], d, dt);
    Tensor kc = on(in[4], d, dt), vc = on(in[5], d, dt);
    call([&] { ops::kv_cache_write(k, v, slots, pos, kc, vc); });
    return Tensors{host_f32(kc), host_f32(vc)};
  };
  c.tol_bf16 = 0;  // copies
  c.cost = [](const Sizes& s, double act) { return Cost{4.0 * double(s[5] * s[3] * s[4]) * act, 0}; };
  return c;
}

OpCase cached_attention_case() {
  OpCase c = cache_case("cached_attention");
  c.make = [](const Sizes& s, std::mt19937& rng) {  // q, k_cache, v_cache, slots, pos, tiles, window
    const CacheDraw draw = cache_draw(s, rng);
    return Tensors{random_tensor({s[5], s[2], s[4]}, rng), draw.k_cache, draw.v_cache, draw.slots, draw.pos, draw.tiles,
                   Tensor::from_vector(std::vector<int32_t>{int32_t(s[7])}, {1})};
  };
  c.run = [](const Tensors& in, Device d, DType dt, const Call& call) {
    const Tensor& q = in[0];
    const Tensor qd = on(q, d, dt), kc = on(in[1], d, dt), vc = on(in[2], d, dt), slots = on(in[3], d, dt);
    const Tensor pos = on(in[4], d, dt), tiles = on(in[5], d, dt);
    Tensor out = out_like(q.shape(), d, dt);
    const int64_t window = in[6].to_int_vector()[0];
    call([&] { ops::cached_attention(qd, kc, vc, slots, pos, attention_scale(q), out, tiles.size(0) > 0 ? &tiles : nullptr, window); });
    return Tensors{host_f32(out)};
  };
  c.tol_f32 = 2e-5;
  c.tol_bf16 = 2e-2;
  // q read, out written, and on average half of each query's cached keys and values read.
  c.cost = [](const Sizes& s, double act) {
    return Cost{(2.0 * double(s[5] * s[2] * s[4]) + double(s[5] * s[1] * s[3] * s[4])) * act, 0};
  };
  return c;
}

OpCase argmax_rows_case() {
  OpCase c{"argmax_rows"};
  c.dims = {"rows", "v"};
  c.sizes = {{1, 1}, {3, 17}, {64, 32000}, {5, 1031}};
  c.make = [](const Sizes& s, std::mt19937& rng) {
    Tensor x = random_tensor({s[0], s[1]}, rng);
    if (s[0] > 2 && s[1] > 3) {  // a tie (the lower id wins) and a NaN (never chosen)
      float* r = x.ptr<float>() + s[1];
      r[1] = r[3] = 5.0f;
      x.ptr<float>()[2 * s[1]] = std::nanf("");
    }
    return Tensors{x};
  };
  c.run = [](const Tensors& in, Device d, DType, const Call& call) {
    const Tensor x = on(in[0], d, DType::F32);
    Tensor out = out_like({in[0].size(0)}, d, DType::I32);
    call([&] { ops::argmax_rows(x, out); });
    return Tensors{host_f32(out)};
  };
  c.bf16 = false;
  c.tol_f32 = 0;
  // Greedy decoding's step: one row of logits per sequence.
  c.layer_sizes = [](const LayerSizes& l) { return std::vector<Sizes>{{l.batch, l.vocab}}; };
  c.cost = [](const Sizes& s, double) { return Cost{4.0 * double(s[0] * s[1]), 0}; };
  return c;
}

}  // namespace

std::vector<OpCase> attention_cases() {
  std::vector<OpCase> v = attention_pair();
  v.push_back(kv_cache_write_case());
  v.push_back(cached_attention_case());
  v.push_back(argmax_rows_case());
  return v;
}

}  // namespace loft::cases
