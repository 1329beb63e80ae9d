// A decoder block's forward and backward. Everything but the attention itself works row by row,
// so it runs over tiles of at most token_tile() tokens: a long context never holds a block's MLP
// intermediates ([T, intermediate], 3.5 GiB each for llama3-8b at 128k tokens) whole, only the
// attention's q, k, v and output. Without checkpointing the forward saves one tile spanning every
// token (the backward reads it whole anyway); with checkpointing the backward recomputes the half
// after the attention tile by tile and runs its backward at once, then the q/k/v half likewise.
#include <cmath>

#include "engine/device/profile.h"
#include "engine/ops/ops.h"
#include "engine/peft/shared_backward.h"
#include "engine/peft/shared_input.h"
#include "models/llama/block.h"

namespace loft::llama {

namespace {

constexpr prof::Part kElementwise = prof::Part::Elementwise, kAttention = prof::Part::Attention;

// [0, T) in tiles of `tile` tokens (the last one shorter).
std::vector<Tile> tiles_of(int64_t T, int64_t tile) {
  std::vector<Tile> out;
  for (int64_t b = 0; b < T; b += tile) out.push_back({b, std::min(tile, T - b)});
  if (out.empty()) out.push_back({0, 0});
  return out;
}

Tensor rows(const Tensor& t, const Tile& c) { return t.slice(c.begin, c.n); }

// A zeroed F32 [1] for the amax output of the op that writes an input (or dy) of these
// projections, when one of them takes it (AdaptedLinear::takes_amax); undefined otherwise.
Tensor amax_for(std::initializer_list<const AdaptedLinear*> readers, const Tensor& like) {
  for (const AdaptedLinear* r : readers)
    if (r->takes_amax()) return Tensor::zeros({1}, DType::F32, like.device());
  return Tensor();
}
Tensor* maybe(Tensor& t) { return t.defined() ? &t : nullptr; }
const Tensor* maybe(const Tensor& t) { return t.defined() ? &t : nullptr; }

// A projection's frozen bias (LlamaConfig::bias), added to its output after the method's product
// (frozen GEMM + adapter), so every method gets it untouched. Frozen, it has no gradient, and dy
// passes through it unchanged: no backward reads it.
void add_bias(const Tensor& bias, Tensor& y) {
  if (!bias.defined()) return;
  prof::Scope p(kElementwise);
  ops::add_bias(y, bias);
}

}  // namespace

void LlamaModel::set_token_tile(int64_t tokens) {
  LOFT_CHECK(tokens >= 0 && tokens % ops::kGemmRowBlock == 0, "token tile ", tokens,
             " must be 0 (no tiling) or a positive multiple of ", ops::kGemmRowBlock);
  token_tile_ = tokens;
}

int64_t LlamaModel::tile_for(int64_t tokens) const {
  return token_tile_ > 0 && tokens > token_tile_ ? token_tile_ : std::max<int64_t>(tokens, 1);
}

void LlamaModel::attention_inputs(Layer& L, const Tensor& x, Tensor* q, Tensor* k, Tensor* v,
                                  AttentionInputsSaved* s) {
  const Dims d = dims_for(x);
  const int64_t n = x.size(0), H = d.sizes.hidden;
  Tensor h1 = d.act({n, H}), rstd1 = d.f32({n});
  Tensor amax1 = amax_for({L.q.get(), L.k.get(), L.v.get()}, x);
  {
    prof::Scope p(kElementwise);
    ops::rmsnorm(x, L.attn_norm, float(config_.rms_norm_eps), h1, &rstd1, maybe(amax1));
  }
  SharedInput in(h1, amax1);  // q, k and v read the same input
  if (q) {
    L.q->forward(h1, *q, s ? &s->sq : nullptr, &in);
    L.k->forward(h1, *k, s ? &s->sk : nullptr, &in);
    L.v->forward(h1, *v, s ? &s->sv : nullptr, &in);
    add_bias(L.bias_of(Proj::Q), *q);
    add_bias(L.bias_of(Proj::K), *k);
    add_bias(L.bias_of(Proj::V), *v);
  } else {
    L.q->save_for_backward(h1, s->sq, &in);
    L.k->save_for_backward(h1, s->sk, &in);
    L.v->save_for_backward(h1, s->sv, &in);
  }
  if (s) {
    s->x = x;
    s->rstd1 = rstd1;
  }
}

void LlamaModel::post_attention(Layer& L, const Tensor& x, const Tensor& att, Tensor* out,
                                PostAttentionSaved* s) {
  const Dims d = dims_for(x);
  const int64_t n = x.size(0), H = d.sizes.hidden, F = d.sizes.ffn;
  Tensor x2 = d.act({n, H});
  L.o->forward(att, x2, s ? &s->so : nullptr);
  add_bias(L.bias_of(Proj::O), x2);
  Tensor h2 = d.act({n, H}), rstd2 = d.f32({n});
  Tensor amax2 = amax_for({L.gate.get(), L.up.get()}, x);
  {
    prof::Scope p(kElementwise);  // x2 += x (residual), h2 = norm(x2)
    ops::add_rmsnorm(x, x2, L.ffn_norm, float(config_.rms_norm_eps), h2, &rstd2, maybe(amax2));
  }
  Tensor gate = d.act({n, F}), up = d.act({n, F});
  {
    SharedInput in(h2, amax2);
    L.gate->forward(h2, gate, s ? &s->sgate : nullptr, &in);
    L.up->forward(h2, up, s ? &s->sup : nullptr, &in);
  }
  add_bias(L.bias_of(Proj::Gate), gate);
  add_bias(L.bias_of(Proj::Up), up);
  Tensor act = d.act({n, F});
  Tensor amax_act = amax_for({L.down.get()}, x);
  { prof::Scope p(kElementwise); ops::swiglu(gate, up, act, maybe(amax_act)); }
  SharedInput act_in(act, amax_act);
  if (!out) {
    // A recompute: the block's output is not needed again.
    L.down->save_for_backward(act, s->sdown, &act_in);
  } else {
    L.down->forward(act, *out, s ? &s->sdown : nullptr, &act_in);
    add_bias(L.bias_of(Proj::Down), *out);
    { prof::Scope p(kElementwise); ops::axpy(1.0f, x2, *out); }  // residual
  }
  if (s) {
    s->x2 = x2;
    s->rstd2 = rstd2;
    s->gate = gate;
    s->up = up;
  }
}

void LlamaModel::post_attention_backward(Layer& L, PostAttentionSaved& s, Tensor& dout,
                                         Tensor& datt) {
  const Dims d = dims_for(dout);
  const int64_t n = dout.size(0), H = d.sizes.hidden, F = d.sizes.ffn;
  // out = x2 + down(swiglu(gate(h2), up(h2))), h2 = rmsnorm(x2).
  Tensor dact = d.act({n, F});
  L.down->backward(dout, s.sdown, dact, false);
  s.sdown.clear();
  // In place: each element's gradients overwrite the gate and up values they come from (the
  // kernels read an element's inputs before writing its outputs), so no [n, i] pair is added.
  Tensor dgate = std::move(s.gate), dup = std::move(s.up);
  Tensor amax_gate = amax_for({L.gate.get()}, dout), amax_up = amax_for({L.up.get()}, dout);
  {
    prof::Scope p(kElementwise);
    ops::swiglu_backward(dact, dgate, dup, dgate, dup, maybe(amax_gate), maybe(amax_up));
  }
  dact = Tensor();
  Tensor dh2 = d.act({n, H});
  {
    SharedBackward group;  // gate and up read the same input
    L.gate->backward(dgate, s.sgate, dh2, false, maybe(amax_gate), &group);
    L.up->backward(dup, s.sup, dh2, true, maybe(amax_up), &group);
    group.finish(dh2);
  }
  dgate = dup = Tensor();
  s.sgate.clear();
  s.sup.clear();
  Tensor amax_o = amax_for({L.o.get()}, dout);
  {
    prof::Scope p(kElementwise);  // dout becomes ∂loss/∂x2: the norm's gradient + the residual's
    ops::rmsnorm_backward_add(dh2, s.x2, L.ffn_norm, s.rstd2, dout, dout, nullptr, maybe(amax_o));
  }
  dh2 = s.x2 = Tensor();
  // x2 = x + o(att).
  L.o->backward(dout, s.so, datt, false, maybe(amax_o));
  s.so.clear();
}

void LlamaModel::attention_inputs_backward(Layer& L, AttentionInputsSaved& s, const Tensor& dq,
                                           const Tensor& dk, const Tensor& dv, const Tensor& dx2,
                                           Tensor& dx, const QkAmax& amax) {
  const Dims d = dims_for(dx2);
  Tensor dh1 = d.act({dx2.size(0), d.sizes.hidden});
  {
    SharedBackward group;  // q, k and v read the same input
    L.q->backward(dq, s.sq, dh1, false, maybe(amax.q), &group);
    L.k->backward(dk, s.sk, dh1, true, maybe(amax.k), &group);
    L.v->backward(dv, s.sv, dh1, true, nullptr, &group);
    group.finish(dh1);
  }
  s.sq.clear();
  s.sk.clear();
  s.sv.clear();
  prof::Scope p(kElementwise);  // + the residual's dx2
  ops::rmsnorm_backward_add(dh1, s.x, L.attn_norm, s.rstd1, dx2, dx);
}

void LlamaModel::attend(int l, const Tensor& q, const Tensor& k, const Tensor& v,
                        const ModelBatch& b, const Attend* attend_at, BlockAttention& a) {
  const Layer& L = *layers_[size_t(l)];
  const Dims d = dims_for(q);
  const auto [T, H, D, hq, hkv, F] = d.sizes;
  a.q = q.view({T, hq, D}), a.k = k.view({T, hkv, D}), a.v = v.view({T, hkv, D});
  {
    prof::Scope p(kElementwise);
    if (config_.qk_norm) {  // each head's q and k normed over head_dim, before RoPE (Qwen3)
      const float eps = float(config_.rms_norm_eps);
      a.q_in = std::move(a.q), a.k_in = std::move(a.k);
      a.q = d.act({T, hq, D}), a.k = d.act({T, hkv, D});
      a.q_rstd = d.f32({T * hq}), a.k_rstd = d.f32({T * hkv});
      ops::head_norm_rope(a.q_in, L.q_norm, eps, b.positions, inv_freq_, a.q, &a.q_rstd);
      ops::head_norm_rope(a.k_in, L.k_norm, eps, b.positions, inv_freq_, a.k, &a.k_rstd);
    } else {
      ops::rope(a.q, b.positions, inv_freq_);
      ops::rope(a.k, b.positions, inv_freq_);
    }
  }
  a.att = d.act({T, hq, D});
  prof::Scope p(kAttention);
  if (attend_at) {
    (*attend_at)(l, a.q, a.k, a.v, a.att);
    return;
  }
  a.lse = d.f32({T, hq});
  ops::attention(a.q, a.k, a.v, b.doc_start, b.seq, 1.0f / std::sqrt(float(D)), a.att, a.lse);
}

void LlamaModel::tiled_attention(int l, const Tensor& x, const std::vector<Tile>& tiles,
                                 const ModelBatch& b, const Attend* attend_at,
                                 AttentionInputsSaved* saved, BlockAttention& a) {
  Layer& L = *layers_[size_t(l)];
  const Dims d = dims_for(x);
  const auto [T, H, D, hq, hkv, F] = d.sizes;
  Tensor q = d.act({T, hq * D}), k = d.act({T, hkv * D}), v = d.act({T, hkv * D});
  for (const Tile& c : tiles) {
    Tensor qc = rows(q, c), kc = rows(k, c), vc = rows(v, c);
    attention_inputs(L, rows(x, c), &qc, &kc, &vc, saved);
  }
  attend(l, q, k, v, b, attend_at, a);
}

void LlamaModel::block_forward(int l, const Tensor& x, Tensor& out, const ModelBatch& b, Saved* s,
                               const Attend* attend_at, BlockAttention* keep) {
  Layer& L = *layers_[size_t(l)];
  const Dims d = dims_for(x);
  const auto [T, H, D, hq, hkv, F] = d.sizes;
  // Saving for the backward: one tile, as the backward reads the whole block at once.
  const std::vector<Tile> tiles = tiles_of(T, s ? std::max<int64_t>(T, 1) : tile_for(T));
  BlockAttention a;
  tiled_attention(l, x, tiles, b, attend_at, s ? &s->in : nullptr, a);
  if (keep) *keep = a;
  const Tensor att = a.att.view({T, hq * D});
  out = d.act({T, H});
  for (const Tile& c : tiles) {
    Tensor oc = rows(out, c);
    post_attention(L, rows(x, c), rows(att, c), &oc, s ? &s->post : nullptr);
  }
  if (s) s->attention = std::move(a);
}

void LlamaModel::attention_backward(int l, const BlockAttention& a, const Tensor& datt,
                                    const ModelBatch& b, Tensor& dq, Tensor& dk, Tensor& dv,
                                    QkAmax* amax) {
  const Dims d = dims_for(datt);
  const auto [T, H, D, hq, hkv, F] = d.sizes;
  dq = d.act({T, hq * D}), dk = d.act({T, hkv * D}), dv = d.act({T, hkv * D});
  Tensor dq3 = dq.view({T, hq, D}), dk3 = dk.view({T, hkv, D}), dv3 = dv.view({T, hkv, D});
  {
    prof::Scope p(kAttention);
    ops::attention_backward(datt.view({T, hq, D}), a.q, a.k, a.v, a.att, a.lse, b.doc_start, b.seq,
                            1.0f / std::sqrt(float(D)), dq3, dk3, dv3);
  }
  const Layer& L = *layers_[size_t(l)];
  if (amax) *amax = {amax_for({L.q.get()}, dq), amax_for({L.k.get()}, dk)};
  Tensor* q_amax = amax ? maybe(amax->q) : nullptr;
  Tensor* k_amax = amax ? maybe(amax->k) : nullptr;
  prof::Scope p(kElementwise);
  if (!config_.qk_norm) {
    ops::rope(dq3, b.positions, inv_freq_, /*inverse=*/true, q_amax);
    ops::rope(dk3, b.positions, inv_freq_, /*inverse=*/true, k_amax);
    return;
  }
  // Back through RoPE and the per-head norms, in place, to the projections' outputs (the norm
  // weights are frozen).
  ops::head_norm_rope_backward(dq3, a.q_in, L.q_norm, a.q_rstd, b.positions, inv_freq_, dq3, q_amax);
  ops::head_norm_rope_backward(dk3, a.k_in, L.k_norm, a.k_rstd, b.positions, inv_freq_, dk3, k_amax);
}

void LlamaModel::block_backward(int l, Saved& s, const ModelBatch& b, Tensor& dx) {
  Layer& L = *layers_[size_t(l)];
  const Dims d = dims_for(dx);
  const auto [T, H, D, hq, hkv, F] = d.sizes;
  Tensor dx2 = std::move(dx);  // ∂loss/∂(block output), then ∂loss/∂x2 in place
  Tensor datt = d.act({T, hq * D});
  post_attention_backward(L, s.post, dx2, datt);
  Tensor dq, dk, dv;
  QkAmax amax;  // whole-tensor amaxes: the q/k backward below runs on the whole tensors too
  attention_backward(l, s.attention, datt, b, dq, dk, dv, &amax);
  s.attention = BlockAttention();
  datt = Tensor();
  dx = d.act({T, H});
  attention_inputs_backward(L, s.in, dq, dk, dv, dx2, dx, amax);
}

void LlamaModel::block_recompute_backward(int l, const Tensor& x, const BlockAttention* restored,
                                          const ModelBatch& b, Tensor& dx) {
  Layer& L = *layers_[size_t(l)];
  const Dims d = dims_for(x);
  const auto [T, H, D, hq, hkv, F] = d.sizes;
  const std::vector<Tile> tiles = tiles_of(T, tile_for(T));
  // One tile: the q/k/v products of the recompute keep their bags for the backward, as without
  // checkpointing. Several: each tile records them again before its backward, so no bag spans T.
  const bool bags_kept = tiles.size() == 1 && !restored;
  AttentionInputsSaved whole;
  BlockAttention a;
  if (restored) a = *restored;
  else tiled_attention(l, x, tiles, b, nullptr, bags_kept ? &whole : nullptr, a);
  // The half after the attention, tile by tile: recomputed, then its backward at once.
  Tensor dx2 = std::move(dx);  // ∂loss/∂(block output), then ∂loss/∂x2 in place
  Tensor datt = d.act({T, hq * D});
  const Tensor att = a.att.view({T, hq * D});
  for (const Tile& c : tiles) {
    PostAttentionSaved ps;
    post_attention(L, rows(x, c), rows(att, c), nullptr, &ps);
    Tensor dc = rows(dx2, c), datt_c = rows(datt, c);
    post_attention_backward(L, ps, dc, datt_c);
  }
  Tensor dq, dk, dv;
  // dq's and dk's amaxes cover every token: they serve only a q/k backward over all of them.
  QkAmax amax;
  attention_backward(l, a, datt, b, dq, dk, dv, tiles.size() == 1 ? &amax : nullptr);
  a = BlockAttention();
  datt = Tensor();
  dx = d.act({T, H});
  for (const Tile& c : tiles) {
    AttentionInputsSaved ts;
    AttentionInputsSaved& s = bags_kept ? whole : ts;
    if (!bags_kept) attention_inputs(L, rows(x, c), nullptr, nullptr, nullptr, &s);
    Tensor dxc = rows(dx, c);
    attention_inputs_backward(L, s, rows(dq, c), rows(dk, c), rows(dv, c), rows(dx2, c), dxc, amax);
  }
}

}  // namespace loft::llama
