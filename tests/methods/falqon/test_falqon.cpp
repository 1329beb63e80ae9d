// FalqonLinear (engine/methods/falqon/falqon_linear.h) on the CPU: the melded GEMM's split and the
// backward products against references computed from the layer's own codes, the initial adapter
// against the quantization error's best rank-r approximation, the after-step update, and on
// stories260K: the loss falls, and a model rebuilt from the base checkpoint + method_state is
// bit-identical.
#include <cmath>
#include <cstring>

#include "engine/methods/falqon/falqon_linear.h"
#include "engine/methods/falqon/falqon_ops.h"
#include "engine/ops/ops.h"
#include "engine/optim/adamw.h"
#include "engine/peft/low_rank.h"
#include "engine/peft/method.h"
#include "engine/peft/shared_input.h"
#include "engine/quant/quantize.h"
#include "models/llama/loading.h"
#include "tests/common/amax_op_runs.h"
#include "tests/common/test_util.h"
#include "tests/engine/test_quant_fp8_reference.h"

namespace loft {
namespace {

using quant::LowpFormat;

// decode(codes)·scale as F32 on the CPU.
Tensor deq(const Tensor& codes, const Tensor& scale) {
  Tensor out = Tensor::empty(codes.shape(), DType::F32, codes.device());
  quant::dequantize(codes, &scale, out);
  return out.to(Device::cpu());
}
Tensor deq(const quant::QuantizedTensor& q) { return deq(q.codes, q.scale); }
Tensor melded(const FalqonLinear& l) {
  const Tensor c = l.melded_codes();
  return deq(Tensor::from_host(c.data(), c.shape(), DType::F8_E4M3), Tensor::from_vector(std::vector<float>{l.weight_scale()}, {1}));
}
Tensor matmul_t(const Tensor& a, const Tensor& b) {  // a·bᵀ in F32
  Tensor c = Tensor::empty({a.size(0), b.size(0)}, DType::F32);
  ops::gemm(a, b, c, {.trans_b = true});
  return c;
}

struct Shape3 {
  int64_t out, in;
  int r;
};

TEST(FalqonLinear, ForwardIsOneMeldedProductSplit) {
  std::mt19937 rng(1);
  for (const auto [out, in, r] : {Shape3{172, 64, 8}, Shape3{7, 33, 8}, Shape3{64, 172, 4}}) {
    const Tensor w = test::random_tensor({out, in}, rng, -0.1f, 0.1f), x = test::random_tensor({19, in}, rng);
    FalqonLinear l("m", w, r, {});
    Tensor y = Tensor::empty({19, out}, DType::F32);
    LinearSaved saved;
    l.forward(x, y, &saved);
    ASSERT_EQ(saved.tensors.size(), 1u) << "only O_A is saved";
    const Tensor full = matmul_t(deq(quant::quantize(x, LowpFormat::E4M3)), melded(l));
    Tensor o = Tensor::empty({19, out}, DType::F32), oa = Tensor::empty({19, int64_t(r)}, DType::F32);
    for (int64_t t = 0; t < 19; ++t)
      for (int64_t j = 0; j < out + r; ++j)
        (j < out ? o.ptr<float>()[t * out + j] : oa.ptr<float>()[t * r + j - out]) = full.ptr<float>()[t * (out + r) + j];
    EXPECT_LT(test::rel_error(y, o), 1e-6) << out << "x" << in;
    EXPECT_LT(test::rel_error(saved.tensors[0], oa), 1e-6) << out << "x" << in;
    Tensor exact = matmul_t(x, w);
    EXPECT_LT(test::rel_error(y, exact), 0.06) << "FP8 forward near the exact product";
  }
}

TEST(FalqonLinear, BackwardMatchesTheDequantizedProducts) {
  std::mt19937 rng(2);
  for (const auto [out, in, r] : {Shape3{172, 64, 8}, Shape3{7, 33, 8}}) {
    const int64_t t = 21;
    const Tensor w = test::random_tensor({out, in}, rng, -0.1f, 0.1f), x = test::random_tensor({t, in}, rng);
    const Tensor dy = test::random_tensor({t, out}, rng);
    FalqonLinear l("m", w, r, {});
    Tensor y = Tensor::empty({t, out}, DType::F32), dx = Tensor::empty({t, in}, DType::F32);
    LinearSaved saved;
    l.forward(x, y, &saved);
    l.backward(dy, saved, dx, false);
    const Tensor dyq = deq(quant::quantize(dy, LowpFormat::E5M2));
    const Tensor wq = melded(l).slice(0, out).clone();
    Tensor dx_ref = Tensor::empty({t, in}, DType::F32);
    ops::gemm(dyq, wq, dx_ref);
    EXPECT_LT(test::rel_error(dx, dx_ref), 1e-6);
    Tensor db_ref = Tensor::empty({out, int64_t(r)}, DType::F32);
    ops::gemm(dyq, deq(quant::quantize(saved.tensors[0], LowpFormat::E4M3)), db_ref, {.trans_a = true});
    EXPECT_LT(test::rel_error(l.buffer().grad, db_ref), 1e-6);
    // Gradients accumulate: a second backward doubles dB and, with accumulate_dx, adds to dx.
    Tensor dx2 = dx.clone();
    l.backward(dy, saved, dx2, true);
    ops::scale(db_ref, 2.0f);
    EXPECT_LT(test::rel_error(l.buffer().grad, db_ref), 1e-6);
    ops::scale(dx_ref, 2.0f);
    EXPECT_LT(test::rel_error(dx2, dx_ref), 1e-6);
    EXPECT_EQ(l.params().size(), 1u);
    EXPECT_EQ(l.params()[0]->name, "m.falqon_B");
  }
}

// The amaxes the model hands over (AdaptedLinear::takes_amax: SharedInput's for X, dy_amax for
// dY) give the bytes the layer's own amax passes give.
TEST(FalqonLinear, AGivenAmaxChangesNothing) {
  std::mt19937 rng(9);
  const int64_t t = 21, out = 40, in = 33;
  const Tensor w = test::random_tensor({out, in}, rng, -0.1f, 0.1f), x = test::random_tensor({t, in}, rng);
  const Tensor dy = test::random_tensor({t, out}, rng);
  auto amax_of = [](const Tensor& v) { return Tensor::from_vector(std::vector<float>{test::stored_amax(v)}, {1}); };
  FalqonLinear a("m", w, 8, {}), b("m", w, 8, {});
  EXPECT_TRUE(a.takes_amax());
  Tensor ya = Tensor::empty({t, out}, DType::F32), yb = ya.clone();
  Tensor dxa = Tensor::empty({t, in}, DType::F32), dxb = dxa.clone();
  LinearSaved sa, sb;
  SharedInput plain(x), given(x, amax_of(x));
  a.forward(x, ya, &sa, &plain);
  b.forward(x, yb, &sb, &given);
  EXPECT_TRUE(test::same_bytes(yb, ya));
  const Tensor dy_amax = amax_of(dy);
  a.backward(dy, sa, dxa, false);
  b.backward(dy, sb, dxb, false, &dy_amax);
  EXPECT_TRUE(test::same_bytes(dxb, dxa));
  EXPECT_TRUE(test::same_bytes(b.buffer().grad, a.buffer().grad));
}

TEST(FalqonLinear, InitialAdapterIsTheQuantizationErrorsBestRankR) {
  std::mt19937 rng(3);
  for (const auto [out, in, r] : {Shape3{172, 64, 8}, Shape3{7, 33, 8}, Shape3{96, 128, 16}}) {
    const Tensor w = test::random_tensor({out, in}, rng, -0.1f, 0.1f);
    FalqonLinear l("m", w, r, {});
    const quant::QuantizedTensor q = quant::quantize(w, LowpFormat::E4M3);
    EXPECT_EQ(l.weight_scale(), q.scale.ptr<float>()[0]);
    const Tensor codes = l.melded_codes();
    const std::vector<uint8_t> want = test::code_bytes(q.codes);
    EXPECT_TRUE(std::equal(want.begin(), want.end(), codes.ptr<uint8_t>())) << "backbone rows are Q(W)";
    Tensor e = w.clone();
    ops::axpy(-1.0f, deq(q), e);
    const auto [a, b] = *l.peft_pair();
    EXPECT_EQ(a.shape(), Shape({int64_t(r), in}));
    EXPECT_EQ(b.shape(), Shape({out, int64_t(r)}));
    Tensor approx = Tensor::empty({out, in}, DType::F32);
    ops::gemm(b, a, approx);
    // The optimum from a dense reference SVD of E.
    const LowRankFactors exact = randomized_svd(e, int(std::min(out, in)), {.oversample = 0, .power_iters = 6});
    double tail = 0, total = 0;
    for (size_t i = 0; i < exact.sigma.size(); ++i) (i < size_t(r) ? total : tail) += exact.sigma[i] * exact.sigma[i];
    Tensor diff = e.clone();  // B = −B̂ (the trained weight is W − E): B·A ≈ −E
    ops::axpy(1.0f, approx, diff);
    const double got = std::sqrt(ops::sum_squares(diff)), opt = std::sqrt(tail);
    EXPECT_LE(got, 1.03 * opt + 1e-6 * std::sqrt(total + tail)) << out << "x" << in << ": residual " << got << ", optimal " << opt;
    EXPECT_LT(got, std::sqrt(tail + total)) << "the adapter reduces the error";
    // A's rows are Â encoded with W's scale.
    Tensor a_codes = Tensor::empty(a.shape(), DType::F8_E4M3);
    quant::QuantizedTensor sw{LowpFormat::E4M3, {}, {}, Tensor::from_vector(std::vector<float>{l.weight_scale()}, {1})};
    falqon::encode_e4m3(a, sw.scale, a_codes);
    const std::vector<uint8_t> ac = test::code_bytes(a_codes);
    EXPECT_TRUE(std::equal(ac.begin(), ac.end(), codes.ptr<uint8_t>() + out * in));
  }
}

TEST(FalqonLinear, AfterStepFoldsTheTopRowsIntoTheBackbone) {
  std::mt19937 rng(4);
  for (auto mode : {FalqonOptions::Buffer::reset, FalqonOptions::Buffer::accumulate}) {
    const int64_t out = 40, in = 24;
    const int r = 4;
    FalqonLinear l("m", test::random_tensor({out, in}, rng, -0.5f, 0.5f), r, {.topk = 3, .buffer = mode});
    const Tensor before = l.melded_codes();
    Tensor b = test::random_tensor({out, r}, rng, -1e-3f, 1e-3f);
    for (int64_t i : {5, 17, 30}) b.ptr<float>()[i * r + 1] = 0.3f * float(i);  // the top-3 rows
    l.buffer().value.copy_from(b);
    const Tensor b_hat = l.peft_pair()->second;
    l.after_step();
    const Tensor after = l.melded_codes();
    const Tensor m0 = melded(l);
    const float s = l.weight_scale();
    for (int64_t i = 0; i < out; ++i) {
      const bool top = i == 5 || i == 17 || i == 30;
      for (int64_t j = 0; j < in; ++j) {
        uint8_t want = before.ptr<uint8_t>()[i * in + j];
        if (top) {
          double v = fp8_e4m3_to_f32(want);
          for (int c = 0; c < r; ++c) v += double(b.ptr<float>()[i * r + c]) * m0.ptr<float>()[(out + c) * in + j] / s;
          want = test::nearest_code(LowpFormat::E4M3, float(std::clamp(v, -448.0, 448.0)));
        }
        EXPECT_EQ(after.ptr<uint8_t>()[i * in + j], want) << "row " << i << " col " << j;
        EXPECT_EQ(l.transposed_codes().ptr<uint8_t>()[j * out + i], want);
      }
      for (int c = 0; c < r; ++c) {
        const float left = l.buffer().value.ptr<float>()[i * r + c];
        EXPECT_EQ(left, top || mode == FalqonOptions::Buffer::reset ? 0.0f : b.ptr<float>()[i * r + c]);
      }
    }
    // peft_pair's B gained exactly the applied rows.
    const Tensor b_eff = l.peft_pair()->second;
    for (int64_t i = 0; i < out; ++i)
      for (int c = 0; c < r; ++c) {
        const bool top = i == 5 || i == 17 || i == 30;
        EXPECT_EQ(b_eff.ptr<float>()[i * r + c], b_hat.ptr<float>()[i * r + c] + (top ? b.ptr<float>()[i * r + c] : 0.0f));
      }
    EXPECT_EQ(test::rel_error(l.merged_weight(), melded(l).slice(0, out)), 0.0);
  }
}

// The state holds exactly the changed rows' codes and Â's, whatever their spacing: neighbours,
// rows a few apart (copied as one span with the rows between) and rows far apart, the first and
// the last row included; loading it into a fresh projection gives the same melded codes.
TEST(FalqonLinear, MethodStateHoldsTheChangedRowsAtAnySpacing) {
  std::mt19937 rng(6);
  const int64_t out = 300, in = 24;
  const int r = 2;
  const std::vector<int64_t> top = {0, 1, 2, 9, 40, 41, 120, 299};
  const Tensor w = test::random_tensor({out, in}, rng, -0.5f, 0.5f);
  FalqonLinear l("m", w, r, {.topk = int(top.size())});
  Tensor b = test::random_tensor({out, r}, rng, -1e-3f, 1e-3f);
  for (int64_t i : top) b.ptr<float>()[i * r] = 0.5f + 0.01f * float(i);
  l.buffer().value.copy_from(b);
  l.after_step();
  const Tensor codes = l.melded_codes();
  const auto st = l.method_state();
  EXPECT_EQ(st.at("falqon_rows").to_int_vector(), std::vector<int64_t>(top.begin(), top.end()));
  const Tensor& rows = st.at("falqon_row_codes");
  ASSERT_EQ(rows.shape(), Shape({int64_t(top.size()), in}));
  for (size_t t = 0; t < top.size(); ++t)
    EXPECT_EQ(std::memcmp(rows.ptr<uint8_t>() + int64_t(t) * in, codes.ptr<uint8_t>() + top[t] * in, size_t(in)), 0)
        << "row " << top[t];
  EXPECT_EQ(std::memcmp(st.at("falqon_a_codes").data(), codes.ptr<uint8_t>() + out * in, size_t(r * in)), 0);
  FalqonLinear fresh("m", w, r, {.topk = int(top.size())});
  fresh.load_method_state(st);
  const Tensor again = fresh.melded_codes();
  EXPECT_EQ(std::memcmp(again.data(), codes.data(), size_t(codes.nbytes())), 0);
}

TEST(FalqonLinear, OptionsAndFactory) {
  EXPECT_EQ(parse_falqon_buffer("reset"), FalqonOptions::Buffer::reset);
  EXPECT_EQ(parse_falqon_buffer("accumulate"), FalqonOptions::Buffer::accumulate);
  EXPECT_THROW(parse_falqon_buffer("keep"), UsageError);
  std::mt19937_64 rng(0);
  MethodOptions m{"falqon", {4, 16.0f}, parse_lora_targets("q_proj")};
  m.get<FalqonOptions>().topk = -1;
  EXPECT_THROW(make_linear_factory(m, rng), UsageError);
  m.get<FalqonOptions>().topk = 0;
  auto factory = make_linear_factory(m, rng);
  std::mt19937 g(5);
  const Tensor w = test::random_tensor({16, 8}, g);
  EXPECT_NE(dynamic_cast<FalqonLinear*>(factory("l.q_proj", "q_proj", w.clone()).get()), nullptr);
  auto frozen = factory("l.k_proj", "k_proj", w.clone());
  EXPECT_EQ(dynamic_cast<FalqonLinear*>(frozen.get()), nullptr);
  EXPECT_EQ(test::rel_error(frozen->merged_weight(), w), 0.0) << "non-targets stay dense";
}

// stories260K with every projection FALQON-adapted; batches repeat four random 8-grams.
struct TrainedRun {
  std::unique_ptr<llama::LlamaModel> model;
  double first = 0, last = 0;  // training loss on the first batch, before and after
};

ModelBatch gram_batch(int64_t vocab, int gram_seed, int noise_seed) {
  std::mt19937 g{uint32_t(gram_seed)}, noise{uint32_t(noise_seed + 100)};
  std::vector<int32_t> gram(8), ids(2 * 64);
  for (auto& t : gram) t = int32_t(g() % uint32_t(vocab));
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = (i % 11 == 0) ? int32_t(noise() % uint32_t(vocab)) : gram[i % 8];
  return make_batch(ids, ids, {}, 2, 64, Device::cpu());
}

std::unique_ptr<llama::LlamaModel> load(const MethodOptions& m) {
  std::mt19937_64 rng(21);
  return llama::load_model(test::data_path("models/stories260K-hf"), Device::cpu(), make_linear_factory(m, rng));
}

TrainedRun train(const MethodOptions& m, int steps, double lr) {
  TrainedRun run{load(m)};
  const int64_t vocab = run.model->config().vocab_size;
  const ModelBatch probe = gram_batch(vocab, 0, 1000);
  const LossSums l0 = run.model->evaluate(probe);
  AdamW opt(run.model->params(), {});
  for (int s = 0; s < steps; ++s) {
    const ModelBatch b = gram_batch(vocab, s % 4, s);
    run.model->forward_backward(b, 1.0f / float(b.target_count));
    opt.clip_grad_norm(3.0);
    opt.step(lr);
    run.model->after_step();
  }
  const LossSums l1 = run.model->evaluate(probe);
  run.first = l0.loss_sum / double(l0.tokens);
  run.last = l1.loss_sum / double(l1.tokens);
  return run;
}

MethodOptions falqon_options(FalqonOptions::Buffer mode) {
  MethodOptions m{"falqon", {8, 8.0f}, parse_lora_targets("all")};
  m.get<FalqonOptions>().buffer = mode;
  m.seed = 3;
  return m;
}

TEST(FalqonTraining, LossFallsOnStories260K) {

  for (auto mode : {FalqonOptions::Buffer::reset, FalqonOptions::Buffer::accumulate}) {
    const TrainedRun run = train(falqon_options(mode), 30, 2e-2);
    std::printf("falqon %s: held-out loss %.4f -> %.4f after 30 steps\n",
                mode == FalqonOptions::Buffer::reset ? "reset" : "accumulate", run.first, run.last);
    EXPECT_LT(run.last, 0.8 * run.first);
  }
}

TEST(FalqonTraining, RebuildFromBaseAndMethodStateIsBitIdentical) {
  const MethodOptions m = falqon_options(FalqonOptions::Buffer::accumulate);
  TrainedRun run = train(m, 6, 2e-2);
  std::map<std::string, std::map<std::string, Tensor>> states;
  int changed_modules = 0;
  for (const auto& [name, lin] : run.model->linears()) {
    states[name] = lin->method_state();
    changed_modules += states[name].at("falqon_rows").numel() > 0;
  }
  EXPECT_GT(changed_modules, 0) << "training changed no backbone row: the test would prove nothing";

  auto rebuilt = load(m);
  for (const auto& [name, lin] : rebuilt->linears()) lin->load_method_state(states.at(name));
  const ModelBatch probe = gram_batch(rebuilt->config().vocab_size, 1, 7);
  for (size_t i = 0; i < run.model->linears().size(); ++i) {
    auto* a = dynamic_cast<FalqonLinear*>(run.model->linears()[i].second);
    auto* b = dynamic_cast<FalqonLinear*>(rebuilt->linears()[i].second);
    ASSERT_TRUE(a && b);
    EXPECT_EQ(test::code_bytes(a->melded_codes()), test::code_bytes(b->melded_codes()));
    EXPECT_EQ(test::code_bytes(a->transposed_codes()), test::code_bytes(b->transposed_codes()));
    EXPECT_EQ(a->buffer().value.to_float_vector(), b->buffer().value.to_float_vector());
    EXPECT_EQ(a->peft_pair()->second.to_float_vector(), b->peft_pair()->second.to_float_vector());
  }
  EXPECT_EQ(run.model->logits(probe).to_float_vector(), rebuilt->logits(probe).to_float_vector());

  // A state from another base (a different scale) and a missing key are refused by name.
  const std::string name = run.model->linears()[0].first;
  auto bad = states.at(name);
  bad["falqon_scale"] = Tensor::from_vector(std::vector<float>{bad["falqon_scale"].ptr<float>()[0] * 2}, {1});
  try {
    rebuilt->linears()[0].second->load_method_state(bad);
    ADD_FAILURE() << "a mismatched scale was accepted";
  } catch (const Error& e) {
    EXPECT_TRUE(test::contains(e.what(), name));
  }
  // A scale one bf16 rounding away (a state trained on the GPU's bf16 base, loaded on the CPU's
  // f32 one, or the reverse) is the same base.
  auto near = states.at(name);
  near["falqon_scale"] = Tensor::from_vector(std::vector<float>{near["falqon_scale"].ptr<float>()[0] * (1 + 0x1p-9f)}, {1});
  EXPECT_NO_THROW(rebuilt->linears()[0].second->load_method_state(near));
  bad = states.at(name);
  bad.erase("falqon_applied");
  EXPECT_THROW(rebuilt->linears()[0].second->load_method_state(bad), Error);
}

}  // namespace
}  // namespace loft
