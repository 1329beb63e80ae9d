#include "models/llama/model.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "engine/device/device_info.h"
#include "engine/device/pinned_memory.h"
#include "engine/device/profile.h"
#include "engine/ops/ops.h"
#include "engine/ops/rope_freq.h"
#include "engine/peft/method_state.h"
#include "engine/peft/shared_input.h"
#include "models/llama/block.h"
#include "models/llama/memory_estimate.h"
#include "models/llama/sliding_window.h"

namespace loft::llama {

// Part of `loft bench`'s breakdown charged here; the projections and the blocks charge their own.
constexpr prof::Part kElementwise = prof::Part::Elementwise;

LlamaModel::Dims LlamaModel::dims_for(const Tensor& activations) const {
  return {{activations.size(0), config_.hidden_size, config_.head_dim, config_.num_heads,
           config_.num_kv_heads, config_.intermediate_size},
          activations.dtype(),
          activations.device()};
}

LlamaModel::LlamaModel(LlamaConfig config, LlamaWeights weights, const LinearFactory& factory,
                       ShardGather* shard)
    : config_(std::move(config)), weights_(std::move(weights)) {
  const Device dev = device();
  for (int l = 0; l < config_.num_layers; ++l) {
    auto& w = weights_.layers[size_t(l)];
    auto layer = std::make_unique<Layer>();
    layer->attn_norm = w.attn_norm;
    layer->ffn_norm = w.ffn_norm;
    layer->bias = std::move(w.bias);
    layer->q_norm = std::move(w.q_norm);
    layer->k_norm = std::move(w.k_norm);
    const std::string p = "model.layers." + std::to_string(l);
    // The model owns each frozen weight through its AdaptedLinear only, so a method that
    // re-encodes the weight (FP8, NF4) lets the original go. A weight an FP8 checkpoint keeps as
    // codes + scales goes to the factory as such (engine/peft/weight_source.h).
    auto make = [&](const char* module, const char* target, Proj proj) {
      quant::ScaledFp8& fp8 = w.fp8[size_t(proj)];
      // Weights left in host memory or as stored (Projections::as_stored, staged bench weights)
      // come to the device one projection at a time, just before the method re-encodes them.
      Tensor& dense = w.proj(proj);
      std::function<Tensor()>& draw = w.draw[size_t(proj)];
      if (!dense.defined() && !fp8.defined() && draw) dense = draw();
      draw = nullptr;
      if (dense.defined() && (dense.device() != dev || dense.dtype() != compute_dtype()))
        dense = convert_weight(dense, compute_dtype(), dev);
      WeightSource src = fp8.defined() ? WeightSource(std::move(fp8), compute_dtype(), dev)
                                       : WeightSource(std::move(w.proj(proj)));
      auto lin = factory(p + "." + module + "." + target, target, std::move(src));
      w.proj(proj) = Tensor();
      fp8 = {};
      named_.emplace_back(p + "." + module + "." + target, lin.get());
      return lin;
    };
    layer->q = make("self_attn", "q_proj", Proj::Q);
    layer->k = make("self_attn", "k_proj", Proj::K);
    layer->v = make("self_attn", "v_proj", Proj::V);
    layer->o = make("self_attn", "o_proj", Proj::O);
    layer->gate = make("mlp", "gate_proj", Proj::Gate);
    layer->up = make("mlp", "up_proj", Proj::Up);
    layer->down = make("mlp", "down_proj", Proj::Down);
    // The projections that read one input, told so (LoRA keeps their A as one matrix).
    for (const std::vector<AdaptedLinear*>& readers :
         {std::vector<AdaptedLinear*>{layer->q.get(), layer->k.get(), layer->v.get()},
          std::vector<AdaptedLinear*>{layer->gate.get(), layer->up.get()}})
      for (AdaptedLinear* r : readers) r->group_with(readers);
    layers_.push_back(std::move(layer));
    // Sharded as it is built: no more than this layer's whole codes beside the shares so far.
    if (shard) {
      if (!shards_) shards_ = std::make_unique<ShardedBackbone>(*shard);
      shards_->add_layer(layer_stored_tensors(size_t(l)));
    }
  }
  const auto inv = rope_inv_freq(config_.head_dim, config_.rope_theta, config_.rope_scaling);
  inv_freq_ = Tensor::from_vector(inv, {int64_t(inv.size())}, dev);
}

LlamaModel::~LlamaModel() = default;

std::vector<Param*> LlamaModel::params() {
  std::vector<Param*> out;
  for (auto& [name, lin] : named_)
    for (Param* p : lin->params()) out.push_back(p);
  return out;
}

std::vector<Param*> LlamaModel::layer_params(size_t l) {
  std::vector<Param*> out;
  const Layer& L = *layers_[l];
  for (AdaptedLinear* lin : {L.q.get(), L.k.get(), L.v.get(), L.o.get(), L.gate.get(), L.up.get(),
                             L.down.get()})
    for (Param* p : lin->params()) out.push_back(p);
  return out;
}

std::vector<Tensor*> LlamaModel::layer_stored_tensors(size_t l) {
  std::vector<Tensor*> out;
  for (const auto& [name, lin] : layer_linears(l)) {
    std::vector<Tensor*> stored = lin->sharded_tensors();
    if (stored.empty())
      throw Error(cat("--shard-backbone: ", name, "'s frozen weight is kept in a form this method "
                      "cannot shard yet (its store names no stored tensors)"));
    out.insert(out.end(), stored.begin(), stored.end());
  }
  return out;
}

void LlamaModel::shard_backbone(ShardGather& gather) {
  LOFT_CHECK(!shards_, "the backbone is already sharded");
  auto shards = std::make_unique<ShardedBackbone>(gather);
  for (size_t l = 0; l < layers_.size(); ++l) shards->add_layer(layer_stored_tensors(l));
  shards_ = std::move(shards);
}

std::vector<Param*> LlamaModel::grad_order() {
  std::vector<Param*> out;
  for (size_t l = layers_.size(); l-- > 0;)
    for (Param* p : layer_params(l)) out.push_back(p);
  return out;
}

bool LlamaModel::writes_shards() const {
  return shards_ && std::any_of(named_.begin(), named_.end(),
                                [](const auto& n) { return n.second->writes_sharded_tensors(); });
}

std::vector<std::pair<std::string, AdaptedLinear*>> LlamaModel::layer_linears(size_t l) const {
  // named_ holds each layer's kNumProj projections in order.
  return {named_.begin() + ptrdiff_t(l * size_t(kNumProj)), named_.begin() + ptrdiff_t((l + 1) * size_t(kNumProj))};
}

void LlamaModel::each_layer_gathered(const std::function<void(size_t)>& fn, bool written) {
  const size_t n = layers_.size();
  for (size_t l = 0; l < n; ++l) {
    shards_->use(int(l), l + 1 < n ? int(l) + 1 : -1);
    fn(l);
    if (written) shards_->keep_written(int(l));
  }
}

void LlamaModel::after_step() {
  state_gathered_ = false;
  if (!writes_shards()) {
    std::vector<AdaptedLinear*> all;
    for (auto& [name, lin] : named_) all.push_back(lin);
    return after_steps(all);
  }
  // Sharded codes that the update writes: layer by layer, each gathered, updated alike on every
  // rank, and this rank's share kept.
  each_layer_gathered([&](size_t l) {
    std::vector<AdaptedLinear*> layer;
    for (auto& [name, lin] : layer_linears(l)) layer.push_back(lin);
    after_steps(layer);
  }, true);
}

void LlamaModel::refresh_copies() {
  for (auto& [name, lin] : named_) lin->refresh_copies();
}

int64_t LlamaModel::calibration_batches() const {
  int64_t n = 0;
  for (const auto& [name, lin] : named_) n = std::max<int64_t>(n, lin->calibration_batches());
  return n;
}

void LlamaModel::start_calibration() {
  for (auto& [name, lin] : named_) lin->start_calibration();
}

void LlamaModel::finish_calibration() {
  for (auto& [name, lin] : named_) lin->finish_calibration();
}

std::map<std::string, Tensor> LlamaModel::method_state() const {
  if (!writes_shards()) return collect_method_state(named_);
  LOFT_CHECK(state_gathered_, "the method state of a model whose sharded codes it reads is gathered "
             "first, on every rank (LlamaModel::gather_method_state)");
  return gathered_state_;
}

void LlamaModel::gather_method_state() {
  // Gathered already since the last step or restore (a replica check and a checkpoint of the same
  // step): every rank knows it alike, so every rank skips the collective.
  if (!writes_shards() || state_gathered_) return;
  gathered_state_.clear();
  each_layer_gathered([&](size_t l) { gathered_state_.merge(collect_method_state(layer_linears(l))); },
                      false);
  state_gathered_ = true;
}

void LlamaModel::load_method_state(const std::map<std::string, Tensor>& state,
                                   const std::string& source) {
  if (!writes_shards()) return restore_method_state(named_, state, source);
  state_gathered_ = false;
  // Each layer's modules from the state, into its gathered codes; what is left names no layer.
  std::map<std::string, std::map<std::string, Tensor>> by_module = split_method_state(state, source);
  each_layer_gathered([&](size_t l) {
    std::map<std::string, Tensor> mine;
    for (const auto& [module, lin] : layer_linears(l)) {
      auto it = by_module.find(module);
      if (it == by_module.end()) continue;
      for (const auto& [key, t] : it->second) mine.emplace(module + "." + key, t);
      by_module.erase(it);
    }
    restore_method_state(layer_linears(l), mine, source);
  }, true);
  if (!by_module.empty())
    throw Error(cat(source, ": method state for ", by_module.begin()->first,
                    ", which is not a projection of this model"));
}

Tensor LlamaModel::embed(const ModelBatch& b) {
  const int64_t T = b.ids.size(0), H = config_.hidden_size;
  Tensor x = Tensor::empty({T, H}, compute_dtype(), device());
  prof::Scope scope(kElementwise);
  if (weights_.embed.device() == device()) {
    ops::embedding(weights_.embed, b.ids, x);
    return x;
  }
  // A table in host memory is read by the GPU's lookup over PCIe: page-locked host memory is in
  // the GPU's address space (unified addressing), so the step neither gathers rows on the host
  // nor waits for their upload (it did both, ~5 ms at llama3-8b's 8,192 tokens). The first step
  // moves the table into page-locked memory; weights_.embed then holds that copy.
  if (!table_mapped_.defined()) {
    const Tensor& table = weights_.embed;
    std::shared_ptr<Storage> locked = allocate_pinned_host(table.nbytes(), device());
    std::memcpy(locked->data(), table.data(), table.nbytes());
    weights_.embed = Tensor::wrap(locked->data(), table.shape(), table.dtype(), Device::cpu(), locked);
    table_mapped_ = Tensor::wrap(locked->data(), weights_.embed.shape(), weights_.embed.dtype(),
                                 device(), locked);
  }
  ops::embedding(table_mapped_, b.ids, x);
  return x;
}

LossSums LlamaModel::loss_head(const Tensor& h, const ModelBatch& b, Tensor* dh, float grad_scale) {
  const Dims d = dims_for(h);
  const int64_t T = h.size(0), H = config_.hidden_size, V = config_.vocab_size;
  prof::Scope scope(prof::Part::LossHead);
  Tensor hn = d.act({T, H}), rstd = d.f32({T});
  {
    prof::Scope p(kElementwise);
    ops::rmsnorm(h, weights_.final_norm, float(config_.rms_norm_eps), hn, &rstd);
  }
  // When enough positions have no target (prompt tokens, ModelBatch::loss_rows), only the rows
  // with one go through the vocabulary: gathered after the norm, their gradient gathered back
  // through a zero row for the others. No buffer is larger than the whole-batch path's.
  const bool compact = b.loss_rows.defined();
  Tensor rows = hn;
  const Tensor& targets = compact ? b.loss_targets : b.targets;
  if (compact) {
    rows = d.act({b.loss_rows.size(0), H});
    prof::Scope p(kElementwise);
    ops::embedding(hn, b.loss_rows, rows);
  }
  hn = Tensor();
  const int64_t R = rows.size(0);
  Tensor drows = dh ? d.act({R + (compact ? 1 : 0), H}) : Tensor();
  Tensor losses = d.f32({R});
  // Logits are produced in fp32 straight from the GEMM's fp32 accumulator: rounding them to bf16
  // first would cost ~3% relative error in softmax probabilities (logits of magnitude ~10 keep only
  // ~0.03 absolute precision in bf16). Never hold [R, V] at once: ~64M logits per chunk.
  const int64_t chunk = default_loss_chunk_tokens(V);
  for (int64_t c0 = 0; c0 < R; c0 += chunk) {
    const int64_t n = std::min(chunk, R - c0);
    Tensor logits = d.f32({n, V});
    ops::gemm(rows.slice(c0, n), weights_.output_weight(), logits, {.trans_b = true});
    Tensor lc = losses.slice(c0, n);
    // The gradient in the compute dtype (the GEMM takes matching inputs): fp32 in place, or
    // rounded once to bf16 by the cross-entropy itself.
    Tensor dl = !dh ? Tensor() : d.dtype == DType::F32 ? logits : d.act({n, V});
    ops::cross_entropy(logits, targets.slice(c0, n), lc, dh ? &dl : nullptr, grad_scale);
    if (dh) {
      Tensor dchunk = drows.slice(c0, n);
      ops::gemm(dl, weights_.output_weight(), dchunk);
    }
  }
  rows = Tensor();  // only the chunks read it
  if (dh) {
    prof::Scope p(kElementwise);
    Tensor dhn = drows;
    if (compact) {
      drows.slice(R, 1).zero_();
      dhn = d.act({T, H});
      ops::embedding(drows, b.loss_scatter, dhn);
      drows = Tensor();
    }
    *dh = d.act({T, H});
    ops::rmsnorm_backward(dhn, h, weights_.final_norm, rstd, *dh);
  }
  return {ops::sum(losses), b.target_count};
}

// Tensors a layer keeps in CheckpointOffload: its input (item 0), then its BlockAttention's
// (items 1.., BlockAttention::tensors order).
constexpr size_t kInput = 0, kOffloadItems = 1 + BlockAttention::kMaxTensors;

ModelBatch LlamaModel::windowed(const ModelBatch& b) const {
  if (config_.sliding_window <= 0) return b;
  ModelBatch w = b;
  w.doc_start = apply_sliding_window(b.doc_start, b.seq, config_.sliding_window);
  return w;
}

bool LlamaModel::keeps_attention(int64_t tokens) const {
  return attention_in_host_ && keeps_attention_in_host(config_, tokens, int64_t(dtype_size(compute_dtype())),
                                 device_memory_bytes(Device::cpu()), host_share_);
}

LossSums LlamaModel::forward_backward(const ModelBatch& batch, float grad_scale) {
  const ModelBatch b = windowed(batch);
  const size_t n = layers_.size();
  std::vector<Tensor> inputs(n);
  std::vector<Saved> saved(checkpointing_ ? 0 : n);
  Tensor x = embed(b);
  if (checkpointing_ && offload_on_ && !offload_)
    offload_ = make_checkpoint_offload(x.device(), n, kOffloadItems);
  CheckpointOffload* off = checkpointing_ && offload_on_ ? offload_.get() : nullptr;
  const bool keep_attention = off && keeps_attention(x.size(0));
  std::vector<char> restores(n, 0);  // layers whose attention tensors wait in host memory
  if (off) off->begin_forward();
  for (size_t l = 0; l < n; ++l) {
    if (off) off->store(l, kInput, x);
    else inputs[l] = x;
    Tensor out;
    BlockAttention kept;
    layer_codes(int(l), l + 1 < n ? int(l) + 1 : -1);  // the last layer's backward comes next
    block_forward(int(l), x, out, b, checkpointing_ ? nullptr : &saved[l], nullptr,
                  keep_attention ? &kept : nullptr);
    const auto attention = kept.tensors(config_.qk_norm);
    size_t bytes = 0;
    for (const Tensor* t : attention) bytes += t->nbytes();
    // Paced to the host link: a layer whose tensors would make the copies fall behind the
    // compute recomputes its attention instead (the same values either way).
    if (keep_attention && off->room_for(l, bytes)) {
      for (size_t i = 0; i < attention.size(); ++i) off->store(l, 1 + i, *attention[i]);
      restores[l] = 1;
    }
    x = out;
  }
  if (off) off->end_forward();
  Tensor dh;
  const LossSums sums = loss_head(x, b, &dh, grad_scale);
  x = Tensor();  // the last block's output: no block's backward reads it
  for (size_t l = n; l-- > 0;) {
    layer_codes(int(l), int(l) - 1);
    if (checkpointing_) {
      const Tensor in = off ? off->fetch(l, kInput) : inputs[l];
      BlockAttention restored;
      if (restores[l]) {
        const auto attention = restored.tensors(config_.qk_norm);
        for (size_t i = 0; i < attention.size(); ++i) *attention[i] = off->fetch(l, 1 + i);
      }
      if (off && l > 0) off->prefetch(l - 1);  // comes up while this layer computes
      block_recompute_backward(int(l), in, restores[l] ? &restored : nullptr, b, dh);
    } else {
      block_backward(int(l), saved[l], b, dh);
      saved[l] = Saved();  // free this block's activations as soon as they are consumed
    }
    inputs[l] = Tensor();
    if (grad_ready_) grad_ready_(layer_params(l));  // no later layer adds to them
  }
  return sums;
}

Tensor LlamaModel::forward_hidden(const ModelBatch& batch, const Attend* attend) {
  const ModelBatch b = windowed(batch);
  Tensor x = embed(b);
  for (size_t l = 0; l < layers_.size(); ++l) {
    layer_codes(int(l), l + 1 < layers_.size() ? int(l) + 1 : -1);
    Tensor out;
    block_forward(int(l), x, out, b, nullptr, attend);
    x = out;
  }
  return x;
}

Tensor LlamaModel::forward_hidden(const Tensor& ids, const Tensor& positions,
                                  const Attend& attend) {
  LOFT_CHECK(ids.dim() == 1 && positions.shape() == ids.shape(), "forward_hidden: ids ", ids.str(),
             " and positions ", positions.str(), " must be [T] each");
  ModelBatch b;
  b.rows = 1;
  b.seq = ids.size(0);
  b.ids = ids;
  b.positions = positions;
  return forward_hidden(b, &attend);
}

Tensor LlamaModel::head_logits(const Tensor& x) {
  const int64_t R = x.size(0), H = config_.hidden_size, V = config_.vocab_size;
  Tensor hn = Tensor::empty({R, H}, x.dtype(), x.device());
  ops::rmsnorm(x, weights_.final_norm, float(config_.rms_norm_eps), hn);
  Tensor logits = Tensor::empty({R, V}, DType::F32, x.device());
  ops::gemm(hn, weights_.output_weight(), logits, {.trans_b = true});  // fp32 out, as loss_head
  return logits;
}

LossSums LlamaModel::evaluate(const ModelBatch& b) { return loss_head(forward_hidden(b), b, nullptr, 1.0f); }

Tensor LlamaModel::logits(const ModelBatch& b) { return head_logits(forward_hidden(b)).to(Device::cpu()); }

}  // namespace loft::llama
