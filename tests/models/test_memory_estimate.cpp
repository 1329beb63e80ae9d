// The memory estimate against numbers worked out by hand (Llama-2-7B, stories260K).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <functional>

#include "engine/methods/hot/hot_weight.h"
#include "engine/peft/halo_weight.h"
#include "models/llama/bench_model.h"
#include "models/llama/memory_estimate.h"
#include "tests/common/test_util.h"

namespace loft::llama {
namespace {

LlamaConfig llama2_7b() {
  return LlamaConfig::from_json_text(R"({"hidden_size": 4096, "intermediate_size": 11008,
    "num_hidden_layers": 32, "num_attention_heads": 32, "vocab_size": 32000})",
                                     "llama2-7b");
}

const MethodMemory& find(const std::vector<MethodMemory>& ms, const std::string& name) {
  for (const auto& m : ms)
    if (m.method == name) return m;
  throw Error("no method " + name);
}

TEST(MemoryEstimate, Llama2_7BByHand) {
  const auto ms = estimate_training_memory(llama2_7b(), {.batch = 1, .seq = 512, .lora_rank = 64});
  ASSERT_EQ(ms.size(), 11u);
  // 4·4096² + 3·4096·11008 per layer, 32 layers.
  const int64_t P = 6'476'005'376;
  const int64_t norms = 2 * 65 * 4096;
  const int64_t largest = 11008 * 4096LL;  // gate/up/down: the largest projection
  // r = 64 on all 7 projections: PEFT reports 159,907,840 trainable parameters for this model.
  const auto& lora = find(ms, "lora-bf16");
  EXPECT_EQ(lora.adapter_params, 159'907'840);
  // fp32 value, grad, AdamW m and v + the bf16 copies of A and B the GEMMs use.
  EXPECT_EQ(lora.adapter, (16 + 2) * 159'907'840LL);
  EXPECT_EQ(lora.frozen_weights, 2 * P + norms);
  // --shard-backbone over 4 ranks: a quarter of the projections and two layers' worth gathered.
  MemoryEstimateOptions sharded{.batch = 1, .seq = 512, .lora_rank = 64};
  sharded.shard_world = 4;
  const auto ms4 = estimate_training_memory(llama2_7b(), sharded);
  const auto& lora4 = find(ms4, "lora-bf16");
  EXPECT_EQ(lora4.frozen_weights, 2 * P / 4 + 2 * (2 * P / 32) + norms);
  EXPECT_EQ(lora4.adapter, lora.adapter);  // adapters stay whole on every rank
  // On a GPU the untied input table stays in host memory: only lm_head is on the device.
  EXPECT_EQ(lora.embeddings, 2 * 32000 * 4096LL);
  EXPECT_EQ(lora.host_embeddings, 2 * 32000 * 4096LL);

  // HOT (dense backbone): bf16 W + INT8-carrier codes of W (Llama widths need no padding) + a
  // 4-byte step per in-channel: 6 projections with in = 4096, down_proj with in = 11008.
  EXPECT_EQ(find(ms, "hot-dense").frozen_weights, 3 * P + 32 * 4 * (6 * 4096 + 11008) + norms);
  EXPECT_EQ(find(ms, "hot-dense").adapter_params, 159'907'840);

  // QLoRA: NF4-DQ + one projection decoded to bf16 for its GEMM.
  const auto& qlora = find(ms, "qlora-nf4");
  EXPECT_NEAR(double(qlora.frozen_weights - norms - 2 * largest), P * 4.127 / 8, P * 4.127 / 8 * 1e-4);
  EXPECT_EQ(qlora.adapter_params, lora.adapter_params);
  // Sharded, the codes split over the ranks but each rank decodes a whole projection.
  const int64_t nf4 = qlora.frozen_weights - norms - 2 * largest;
  EXPECT_EQ(find(ms4, "qlora-nf4").frozen_weights,
            (nf4 + 3) / 4 + 2 * ((nf4 + 31) / 32) + 2 * largest + norms);

  // FALQON: [W; A] in E4M3, A = r·Σin, + one transpose scratch as large as the largest
  // projection (gate/up/down: 11008·4096 bytes); B = r·Σout trains, in fp32 with its applied sum
  // beside it (20 B/param); it saves x·Aᵀ but not the projections' inputs.
  const int64_t scratch = largest;
  const auto& falqon = find(ms, "falqon-fp8");
  EXPECT_EQ(falqon.frozen_weights, P + 64 * 35584 * 32LL + scratch + norms);
  EXPECT_EQ(falqon.adapter_params, 64 * 42496 * 32LL);
  EXPECT_EQ(falqon.adapter, 20 * falqon.adapter_params);
  EXPECT_EQ(lora.activations - falqon.activations, 512 * 32 * 2 * (2 * 4096 + 11008LL));
  // --falqon-transposed keep: every projection's W codes transposed beside them (P bytes) instead
  // of the one scratch.
  const auto& kept = find(ms, "falqon-fp8-kept");
  EXPECT_EQ(kept.frozen_weights, falqon.frozen_weights - scratch + P);
  // Sharded: [W; A] split over the ranks, the one transpose scratch whole on each.
  const int64_t melded = P + 64 * 35584 * 32LL;
  EXPECT_EQ(find(ms4, "falqon-fp8").frozen_weights,
            (melded + 3) / 4 + 2 * ((melded + 31) / 32) + scratch + norms);
  EXPECT_EQ(kept.activations, falqon.activations);

  for (const char* halo : {"halo-fp8", "halo-int8"})
    EXPECT_EQ(find(ms, halo).frozen_weights, P + scratch + norms) << halo;
  // --halo-transposed keep: the rotated codes transposed beside them instead of the one scratch.
  EXPECT_EQ(find(ms, "halo-fp8-kept").frozen_weights, P + P + norms);
  EXPECT_EQ(find(ms, "halo-fp8-kept").activations, find(ms, "halo-fp8").activations);
  EXPECT_EQ(find(ms, "hot-fp8").frozen_weights,
            find(ms, "hot-dense").frozen_weights - P + scratch) << "bf16 W -> E4M3 W + scratch";
  // HALO's NF4 backbone decodes one projection's FP8 codes (1 byte each) at a time.
  EXPECT_EQ(find(ms, "halo-nf4").frozen_weights, qlora.frozen_weights - 2 * largest + largest);

  for (const auto& m : ms) {
    if (!m.method.starts_with("falqon-fp8")) {
      EXPECT_EQ(m.activations, lora.activations) << m.method;
    }
    EXPECT_EQ(m.total(), m.frozen_weights + m.embeddings + m.adapter + m.activations + m.working);
  }
  // One 512-token chunk of logits: fp32 + the bf16 gradient.
  EXPECT_EQ(lora.logits, 512 * 32000 * 6LL);
}

// The options choose the form: each of a method's forms is the entry of the options that train
// with it (HALO's format and backbone, HOT's backbone).
TEST(MemoryEstimate, OptionsChooseTheirForm) {
  const MemoryEstimateOptions eo{.batch = 1, .seq = 512, .lora_rank = 64};
  const auto ms = estimate_training_memory(llama2_7b(), eo);
  const auto form = [&](const std::string& method, const std::function<void(MethodOptions&)>& set) {
    MethodOptions m;
    m.method = method;
    set(m);
    return estimate_method_memory(llama2_7b(), eo, m);
  };
  const auto expect_form = [&](const MethodMemory& got, const std::string& name) {
    EXPECT_EQ(got.method, name);
    EXPECT_EQ(got.total(), find(ms, name).total()) << name;
  };
  expect_form(form("lora", [](MethodOptions&) {}), "lora-bf16");
  expect_form(form("halo", [](MethodOptions& m) { m.get<HaloOptions>().format = quant::LowpFormat::INT8; }),
              "halo-int8");
  expect_form(form("halo", [](MethodOptions& m) { m.get<HaloOptions>().backbone = HaloBackbone::Nf4; }),
              "halo-nf4");
  for (const auto& [backbone, name] : {std::pair{HotBackbone::Dense, "hot-dense"}, std::pair{HotBackbone::Fp8, "hot-fp8"},
                                       std::pair{HotBackbone::Nf4, "hot-nf4"}})
    expect_form(form("hot", [b = backbone](MethodOptions& m) { m.get<HotOptions>().backbone = b; }), name);
  MethodOptions unknown;
  unknown.method = "dora";
  EXPECT_THROW(estimate_method_memory(llama2_7b(), eo, unknown), UsageError);
}

// Checkpointing keeps each block's input instead of its saved tensors, and adds back one layer's
// recomputed set during its backward; by hand for Llama-2-7B at 4 × 1024.
TEST(MemoryEstimate, CheckpointingByHand) {
  const MemoryEstimateOptions plain{.batch = 4, .seq = 1024, .lora_rank = 64};
  MemoryEstimateOptions gc = plain;
  gc.grad_checkpointing = true;
  gc.checkpoint_offload = false;  // every input on the GPU
  MemoryEstimateOptions offloaded = gc;
  offloaded.checkpoint_offload = true;  // CheckpointOffload: two layers' inputs and attention
                                        // tensors on the GPU at a time
  const MethodMemory p = estimate_training_memory(llama2_7b(), plain)[0];
  const MethodMemory g = estimate_training_memory(llama2_7b(), gc)[0];
  const MethodMemory o = estimate_training_memory(llama2_7b(), offloaded)[0];
  const int64_t T = 4096, h = 4096, i = 11008, r = 64;
  const int64_t per_layer = activation_bytes_per_token_layer(llama2_7b(), r);
  EXPECT_EQ(p.activations, T * (32 * per_layer + 16));
  EXPECT_EQ(g.activations, T * (32 * 2 * h + 16));
  // q, k, v and the output in bf16 (7b: no GQA, 4h), the fp32 log-sum-exp of 32 heads.
  // (two layers' inputs; the next layer's attention tensors, as the working set counts the
  // current layer's).
  EXPECT_EQ(o.activations, T * (2 * 2 * h + (2 * 4 * h + 4 * 32) + 16));
  // What a layer hands to the offload per token (LlamaModel::keeps_attention's measure).
  EXPECT_EQ(offloaded_bytes_per_token_layer(llama2_7b()), 2 * h + 2 * 4 * h + 4 * 32);
  EXPECT_EQ(o.working, g.working);
  // Without checkpointing the backward's peak is at down_proj: the incoming gradient, dX [T, i]
  // and dY·B beside every saved tensor. Or the loss head is: the last hidden state, its norm and
  // the norm's gradient, fp32 losses and rstd, and one logits chunk (2048 tokens of 32000 fp32
  // logits + their bf16 gradient).
  const int64_t excess = 2 * (h + i + r), head = T * (3 * 2 * h + 8) + 2048 * 32000 * 6LL;
  EXPECT_EQ(p.working, std::max(T * excess, head));
  // With checkpointing (models/llama/block.cpp), beside the block input, the most of: the half
  // after the attention recomputed and back-propagated tile by tile, beside the attention tensors
  // (q, k, v, out: 4h bf16 for 7b, no GQA; fp32 lse of 32 heads), ∂out, ∂att and, in one tile,
  // the q/k/v projections' bags (their normed input, 3 x·Aᵀ, fp32 rstd); the attention backward,
  // beside dq, dk, dv and the flash kernel's fp32 dQ and per-row dot; the q/k/v half tile by tile
  // beside ∂x2, dq, dk, dv and ∂x.
  const int64_t attention = 2 * 4 * h + 4 * 32, bags = 2 * (h + 3 * r) + 4;
  const int64_t grads = 2 * 3 * h + 4 * (h + 32);
  const int64_t mlp = 2 * (2 * h + 3 * i + 3 * r) + 4;  // x2, gate, up, the bags' inputs, rstd2
  const auto by_hand = [&](int64_t t) {
    const int64_t one = t >= T ? bags : 0;
    const int64_t whole = attention + 2 * h + 2 * h + one;
    return std::max({T * whole + t * (mlp + excess - 2 * h), T * (whole + grads),
                     T * (2 * h + grads + 2 * h + one) + t * (bags - one + 2 * (h + r))});
  };
  EXPECT_EQ(g.working, std::max(by_hand(T), head));
  MemoryEstimateOptions tiled = gc;
  tiled.token_tile = 1024;
  EXPECT_EQ(estimate_training_memory(llama2_7b(), tiled)[0].working, std::max(by_hand(1024), head));
  EXPECT_LT(by_hand(1024), by_hand(T));
  EXPECT_EQ(g.frozen_weights, p.frozen_weights);
  EXPECT_LT(g.total(), p.total());
}

// On the CPU everything is f32 and the input table is host memory, i.e. the device's.
TEST(MemoryEstimate, CpuCountsF32AndTheTable) {
  const auto gpu = estimate_training_memory(llama2_7b(), {.batch = 1, .seq = 64, .lora_rank = 8});
  const auto cpu =
      estimate_training_memory(llama2_7b(), {.batch = 1, .seq = 64, .lora_rank = 8, .gpu = false});
  EXPECT_EQ(cpu[0].frozen_weights, 2 * gpu[0].frozen_weights);
  EXPECT_EQ(cpu[0].embeddings, 2 * 2 * gpu[0].embeddings);  // both tables, f32
  EXPECT_EQ(cpu[0].host_embeddings, 0);
  EXPECT_EQ(cpu[0].adapter, 16 * cpu[0].adapter_params);  // no copies: f32 is the compute dtype
}

TEST(MemoryEstimate, Nf4Layout) {
  EXPECT_EQ(nf4_dq_bytes(64), 32 + 1 + 4 + 4);
  EXPECT_EQ(nf4_dq_bytes(65), 33 + 2 + 4 + 4);
  EXPECT_EQ(nf4_dq_bytes(64 * 256 * 2), 16384 + 512 + 8 + 4);
}

TEST(MemoryEstimate, ActivationsByHand) {
  const auto c = load_llama_config(test::data_path("models/stories260K-hf"));
  // bf16: 4·64 + 2·64 + 2·32 + 3·172 + 7·8 = 1020 values; fp32: 2 + 8 heads.
  EXPECT_EQ(activation_bytes_per_token_layer(c, 8), 2 * 1020 + 4 * 10);
  const auto one = estimate_training_memory(c, {.batch = 2, .seq = 64, .lora_rank = 8});
  const auto two = estimate_training_memory(c, {.batch = 4, .seq = 64, .lora_rank = 8});
  EXPECT_EQ(one[0].activations, 128 * (5 * 2080 + 16));  // + the batch's 4 I32 per token
  EXPECT_EQ(two[0].activations, 2 * one[0].activations);
  EXPECT_EQ(one[0].embeddings, 2 * 512 * 64);  // tied: one matrix, on the device
  EXPECT_EQ(one[0].host_embeddings, 0);
  EXPECT_EQ(one[0].logits, 128 * 512 * 6);
  // The logits chunk is the model's: 2^26 / vocab tokens in whole 128-token tiles (131072 here),
  // or --logits-chunk-tokens.
  EXPECT_EQ(default_loss_chunk_tokens(512), 131072);
  EXPECT_EQ(default_loss_chunk_tokens(128256), 512);  // Llama 3 (523 rounded down)
  EXPECT_EQ(default_loss_chunk_tokens(32000), 2048);  // Llama 2 (2097 rounded down)
  EXPECT_EQ(default_loss_chunk_tokens(int64_t(1) << 20), 64);  // under one tile: as it comes
  EXPECT_EQ(default_loss_chunk_tokens(int64_t(1) << 30), 1);
  const auto big = estimate_training_memory(c, {.batch = 16, .seq = 512, .lora_rank = 8});
  EXPECT_EQ(big[0].logits, 8192 * 512 * 6);
  const auto chunked =
      estimate_training_memory(c, {.batch = 16, .seq = 512, .lora_rank = 8, .logits_chunk_tokens = 1024});
  EXPECT_EQ(chunked[0].logits, 1024 * 512 * 6);
  EXPECT_THROW(estimate_training_memory(c, {.batch = 0}), Error);
  EXPECT_THROW(estimate_training_memory(c, {.batch = int64_t(1) << 40, .seq = int64_t(1) << 30}),
               UsageError);
}

}  // namespace
}  // namespace loft::llama

namespace loft::llama {
namespace {

// Offloaded attention tensors come back to the device only where the host kept them: llama3-8b at
// 131,072 tokens hands the host 112.5 GiB of inputs and attention tensors, kept on a 256 GiB host
// (at most half of it) and not on a 128 GiB one (the H200 machine, where the measured qlora peak,
// 18.44e9 bytes, is within 1% of this estimate).
TEST(MemoryEstimate, AttentionTensorsOnTheDeviceOnlyWhereTheHostKeepsThem) {
  const LlamaConfig c = *bench_shape_config("llama3-8b");
  const int64_t T = 131072, gib = int64_t(1) << 30, h = 4096;
  const int64_t per_token = offloaded_bytes_per_token_layer(c);
  EXPECT_EQ(per_token, 2 * h + 2 * (2 * 4096 + 2 * 1024) + 4 * 32);
  EXPECT_FALSE(keeps_attention_in_host(c, T, 2, 128 * gib));
  EXPECT_TRUE(keeps_attention_in_host(c, T, 2, 256 * gib));
  EXPECT_FALSE(keeps_attention_in_host(c, T, 2, 256 * gib, 2));  // two replicas share the host
  EXPECT_FALSE(keeps_attention_in_host(c, T, 2, 0));
  MemoryEstimateOptions o{.batch = 1, .seq = T, .lora_rank = 64, .grad_checkpointing = true};
  const MethodOptions qlora{"qlora", {64, 16.0f}, parse_lora_targets("all"), 0};
  o.host_bytes = 256 * gib;
  const MethodMemory kept = estimate_method_memory(c, o, qlora);
  o.host_bytes = 128 * gib;
  const MethodMemory recomputed = estimate_method_memory(c, o, qlora);
  o.host_bytes = 0;  // unknown: the larger
  EXPECT_EQ(estimate_method_memory(c, o, qlora).total(), kept.total());
  EXPECT_EQ(kept.activations - recomputed.activations, T * (per_token - 2 * h));
  std::printf("llama3-8b qlora 131072 tokens: estimate %lld bytes on a 128 GiB host, %lld kept\n",
              (long long)recomputed.total(), (long long)kept.total());
  EXPECT_NEAR(double(recomputed.total()), 18444592128.0, 0.01 * 18444592128.0);
  // Two replicas on a 256 GiB host each get half of it, as LlamaModel::set_host_memory_share
  // gives them: neither keeps its attention tensors, so each one's estimate is the recomputing one.
  o.host_bytes = 256 * gib;
  o.host_share = 2;
  EXPECT_EQ(estimate_method_memory(c, o, qlora).total(), recomputed.total());
  o.host_share = 1;
  EXPECT_EQ(estimate_method_memory(c, o, qlora).total(), kept.total());
}

}  // namespace
}  // namespace loft::llama
