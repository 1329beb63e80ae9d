// `loft bench kernels`: each kernel of a training step timed alone on random inputs at the
// sizes one layer of the shape gives it. The ops of the op table are its case rows
// (engine/ops/cases: each row's layer_sizes and cost), so a new op is timed by its row; the rows
// below are the kernels outside the table (quantization, Hadamard, FP8 GEMMs, NF4, FALQON, HOT)
// and the whole optimizer step. A row reports the time per call and the rate it reaches: GB/s
// over the bytes the kernel must move at least (each input read once, each output written once),
// or TFLOP/s for GEMMs and attention. Timing: a warm-up call, then `repeats` calls between two
// device synchronisations.
#include "app/bench_kernels.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <set>
#include <ostream>
#include <string>

#include "engine/device/memory.h"
#include "engine/methods/falqon/falqon_ops.h"
#include "engine/methods/hot/hot_gemm.h"
#include "engine/methods/hot/hot_quant.h"
#include "engine/methods/hot/hot_weight.h"
#include "engine/ops/cases/op_cases.h"
#include "engine/ops/ops.h"
#include "engine/optim/adamw.h"
#include "engine/quant/code_transpose.h"
#include "engine/quant/hadamard.h"
#include "engine/quant/lowp_gemm.h"
#include "engine/quant/nf4.h"
#include "engine/quant/nf4_lowp.h"
#include "engine/quant/quantize.h"
#include "engine/quant/rotate_quantize.h"
#include "models/llama/memory_estimate.h"

namespace loft::app {

namespace {

struct Row {
  std::string name;
  double bytes = 0, flops = 0;  // per call; one of them is zero
  std::function<void()> call;
};

// A row of the op table: it draws its inputs and times itself.
struct TableRow {
  std::string name;
  double bytes = 0, flops = 0;
  std::function<double()> seconds;
};

double seconds_per_call(const std::function<void()>& call, Device device, int repeats) {
  call();
  synchronize(device);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < repeats; ++i) call();
  synchronize(device);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / repeats;
}

// Every op of the table at the layer's sizes, in BF16 on a GPU where the op takes it (F32 on the
// CPU): the row's inputs drawn, its run called, the first op it calls timed.
void add_table_rows(const cases::LayerSizes& layer, Device device, int repeats, std::vector<TableRow>& rows) {
  for (const cases::OpCase& c : cases::op_cases()) {
    if (!c.layer_sizes) continue;  // c.not_timed says why
    const DType dt = device.is_cpu() || !c.bf16 ? DType::F32 : DType::BF16;
    for (const cases::Sizes& s : c.layer_sizes(layer)) {
      const cases::Cost cost = c.cost(s, double(dtype_size(dt)));
      rows.push_back({cases::label(c, s), cost.bytes, cost.flops, [&c, s, dt, device, repeats] {
                        std::mt19937 rng(1);
                        double seconds = -1;
                        c.run(c.make(s, rng), device, dt, [&](const std::function<void()>& op) {
                          if (seconds >= 0) return op();
                          seconds = seconds_per_call(op, device, repeats);
                        });
                        return seconds;
                      }});
    }
  }
}

Tensor random(Shape shape, DType dtype, Device device, uint64_t seed) {
  Tensor t = Tensor::empty(std::move(shape), dtype, device);
  ops::fill_random(t, seed, 1.0f);
  return t;
}

}  // namespace

void run_kernel_bench(const llama::LlamaConfig& cfg, int64_t batch, int64_t seq, Device device,
                      int repeats, const std::vector<std::string>& only, const std::string& title,
                      std::ostream& out) {
  const DType dt = device.is_cpu() ? DType::F32 : DType::BF16;
  const int64_t T = batch * seq, d = cfg.hidden_size, f = cfg.intermediate_size;
  const double act = double(dtype_size(dt));
  const auto fmt = quant::LowpFormat::E4M3;
  std::vector<Row> rows;
  const cases::LayerSizes layer{.batch = batch, .seq = seq, .hidden = d, .intermediate = f, .heads = cfg.num_heads,
                                .kv_heads = cfg.num_kv_heads, .head_dim = cfg.head_dim, .vocab = cfg.vocab_size,
                                .loss_rows = std::min(T, llama::default_loss_chunk_tokens(cfg.vocab_size))};
  std::vector<TableRow> table;
  add_table_rows(layer, device, repeats, table);

  for (int64_t n : {d, f}) {
    const std::string w = std::string("[") + std::to_string(T) + "," + std::to_string(n) + "]";
    Tensor x = random({T, n}, dt, device, 1), y = Tensor::empty({T, n}, dt, device);
    const quant::HadamardPlan plan = quant::plan_for(n), tok = quant::token_plan(T);
    const double io = double(T * n) * act;
    rows.push_back({"quantize e4m3 " + w, io + double(T * n), 0,
                    [=] { (void)quant::quantize(x, fmt); }});
    rows.push_back({"quantize e4m3 +transposed " + w, io + 2.0 * double(T * n), 0,
                    [=] { (void)quant::quantize(x, fmt, true); }});
    rows.push_back({"rotate_quantize rows " + w, io + double(T * n), 0,
                    [=] { (void)quant::rotate_quantize(plan, x, fmt); }});
    rows.push_back({"rotate_quantize tokens " + w, io + double(T * n), 0,
                    [=] { (void)quant::token_rotate_quantize(tok, x, fmt); }});
    rows.push_back({"hadamard rows inverse " + w, 2 * io, 0,
                    [=] { quant::hadamard_transform(plan, x, y, true); }});
    rows.push_back({"hadamard tokens inverse " + w, 2 * io, 0,
                    [=] { quant::token_transform(tok, x, y, true); }});
  }
  // The frozen products of one layer in FP8 E4M3, Y = X·Wᵀ (the table's gemm row times bf16).
  if (!device.is_cpu())
    for (auto [out_f, in_f] : {std::pair{d, d}, std::pair{f, d}, std::pair{d, f}}) {
      const std::string s = std::to_string(T) + "x" + std::to_string(out_f) + "x" + std::to_string(in_f);
      const quant::QuantizedTensor xq = quant::quantize(random({T, in_f}, dt, device, 2), fmt);
      const quant::QuantizedTensor wq = quant::quantize(random({out_f, in_f}, dt, device, 3), fmt);
      Tensor y = Tensor::empty({T, out_f}, dt, device);
      rows.push_back({"gemm e4m3 " + s, 0, 2.0 * double(T) * double(out_f) * double(in_f), [=] {
                        Tensor yy = y;
                        quant::gemm_lowp(xq.codes, xq.scale, wq.codes, wq.scale, yy);
                      }});
    }
  // HALO's NF4 backbone: a projection's weight decoded to E4M3 codes, as for the forward GEMM
  // and transposed for dX (halo_weight.cpp, --backbone nf4). Bytes: 4-bit codes in, codes out.
  if (!device.is_cpu())
    for (auto [out_f, in_f] : {std::pair{d, d}, std::pair{f, d}}) {
      const Nf4Tensor q = quantize_nf4(random({out_f, in_f}, dt, device, 11));
      const float s = quant::nf4_lowp_scale(q, fmt);
      for (bool t : {false, true}) {
        Tensor codes = Tensor::empty(t ? Shape{in_f, out_f} : Shape{out_f, in_f}, DType::F8_E4M3, device);
        rows.push_back({std::string("nf4_to_lowp e4m3 ") + (t ? "transposed " : "") + "[" +
                            std::to_string(out_f) + "," + std::to_string(in_f) + "]",
                        1.5 * double(out_f * in_f), 0, [=] {
                          Tensor c = codes;
                          quant::nf4_to_lowp(q, s, t, c);
                        }});
      }
    }
  // The byte transpose FALQON and HALO run before each frozen dX GEMM (W's codes [out, in] ->
  // [in, out] in the shared scratch), at each projection shape: read once, written once.
  for (auto [out_f, in_f] : {std::pair{d, d}, std::pair{f, d}, std::pair{d, f}}) {
    const Tensor w = Tensor::zeros({out_f, in_f}, DType::U8, device);  // a copy: values do not matter
    Tensor wt = Tensor::empty({in_f, out_f}, DType::U8, device);
    rows.push_back({"transpose codes [" + std::to_string(out_f) + "," + std::to_string(in_f) + "]",
                    2.0 * double(out_f * in_f), 0, [=] {
                      Tensor t = wt;
                      quant::transpose_codes(w, t);
                    }});
  }
  // FALQON (r = k = 64, its defaults) at each projection shape: the forward's O_A GEMM beside the
  // melded [W; A] GEMM it split from, and the after-step update of one projection. The update rows
  // run in accumulate mode first (B keeps rows to select), then reset (B zero after the first call:
  // every score ties, the select's slowest case).
  std::set<int64_t> oa_widths;  // the O_A GEMM depends on `in` alone: time it once per width
  for (auto [out_f, in_f] : {std::pair{d, d}, std::pair{f, d}, std::pair{d, f}}) {
    const int64_t r = 64, k = std::min<int64_t>(64, out_f);
    const std::string s = std::string("[") + std::to_string(out_f) + "x" + std::to_string(in_f) + " r64]";
    Tensor wm = Tensor::empty({out_f + r, in_f}, DType::F8_E4M3, device);
    Tensor scale = Tensor::empty({1}, DType::F32, device), codes = wm.slice(0, out_f);
    quant::quantize_into(random({out_f, in_f}, dt, device, 7), codes, nullptr, scale);
    Tensor a_codes = wm.slice(out_f, r);
    falqon::encode_e4m3(random({r, in_f}, DType::F32, device, 8), scale, a_codes);
    if (!device.is_cpu()) {
      const quant::QuantizedTensor xq = quant::quantize(random({T, in_f}, dt, device, 9), fmt);
      for (int64_t n : {r, out_f + r}) {
        if (n == r && !oa_widths.insert(in_f).second) continue;
        Tensor c = Tensor::empty({T, n}, dt, device), w = wm.slice(out_f + r - n, n);
        rows.push_back({"gemm e4m3 " + std::to_string(T) + "x" + std::to_string(n) + "x" +
                            std::to_string(in_f) + (n == r ? " falqon O_A" : " melded"),
                        0, 2.0 * double(T) * double(n) * double(in_f), [=] {
                          Tensor cc = c;
                          quant::gemm_lowp(xq.codes, xq.scale, w, scale, cc);
                        }});
      }
    }
    // B at an Adam step's size against unit-scale W and A: a few % of the k rows' codes change
    // (as in training), not all of them.
    Tensor b = Tensor::empty({out_f, r}, DType::F32, device);
    ops::fill_random(b, 10, 1e-3f);
    Tensor scores = Tensor::empty({out_f}, DType::F32, device);
    Tensor idx = Tensor::empty({k}, DType::I32, device);
    Tensor changed = Tensor::zeros({out_f}, DType::U8, device);
    Tensor applied = Tensor::zeros({out_f, r}, DType::F32, device);
    const double b_bytes = double(out_f * r) * 4;
    // At least: A's codes, and the k rows' codes read and written.
    const double update_bytes = double(r * in_f) + 2.0 * double(k * in_f);
    rows.push_back({"falqon row_scores " + s, b_bytes + double(out_f) * 4, 0, [=] {
                      Tensor sc = scores;
                      falqon::row_scores(b, sc);
                    }});
    const std::string topk = "falqon select_topk k" + std::to_string(k) + " " + s;
    rows.push_back({topk, double(out_f) * 4, 0, [=] {
                      Tensor i = idx;
                      falqon::select_topk(scores, i);
                    }});
    // `kept`: the transposed backbone codes patched too (--falqon-transposed keep).
    const Tensor wt = Tensor::zeros({in_f, out_f}, DType::F8_E4M3, device);
    for (bool reset : {false, true})
      for (bool kept : {false, true})
        rows.push_back({std::string("falqon after_step ") + (reset ? "reset " : "accumulate ") +
                            (kept ? "kept " : "") + s,
                        b_bytes + update_bytes, 0, [=] {
                          Tensor sc = scores;
                          falqon::RowUpdate u{idx, b, wm, kept ? wt : Tensor(), scale, changed, applied};
                          falqon::row_scores(u.b, sc);
                          falqon::select_topk(sc, u.idx);
                          falqon::apply_rows(u, reset);
                        }});
  }
  // HOT's dX product (--method hot, its defaults: INT4 codes, per-token SR) at each projection
  // shape: dY's quantizer (dY read, one code byte per element written; per tensor reads dY twice),
  // the int32 GEMM on the device's default path, the epilogue (int32 read, dX written) and the
  // whole HotWeight::backward_input the trainer calls.
  for (auto [out_f, in_f] : {std::pair{d, d}, std::pair{f, d}, std::pair{d, f}}) {
    const std::string s = std::to_string(T) + "x" + std::to_string(out_f) + "x" + std::to_string(in_f);
    const Tensor dy = random({T, out_f}, dt, device, 17), w = random({out_f, in_f}, dt, device, 18);
    Tensor dx = Tensor::empty({T, in_f}, dt, device);
    const quant::HotCodes a = quant::hot_quantize_dy(dy, {}), b = quant::hot_weight_codes(w, 4);
    const Tensor acc = quant::hot_igemm(a, b);
    const double q_bytes = double(T * out_f) * (act + 1), fl = 2.0 * double(T) * double(out_f) * double(in_f);
    for (quant::HotScale scale : {quant::HotScale::PerToken, quant::HotScale::PerTensor}) {
      quant::HotQuantOptions opt;
      opt.scale = scale;
      const bool token = scale == quant::HotScale::PerToken;
      rows.push_back({std::string("hot quantize dY ") + (token ? "per token [" : "per tensor [") +
                          std::to_string(T) + "," + std::to_string(out_f) + "]",
                      q_bytes + (token ? 0.0 : double(T * out_f) * act), 0, [=] {
                        quant::HotCodes aa = a;
                        quant::hot_quantize_dy_into(dy, opt, aa);
                      }});
    }
    rows.push_back({"hot int32 gemm " + s, 0, fl, [=] { (void)quant::hot_igemm(a, b); }});
    rows.push_back({"hot epilogue [" + std::to_string(T) + "," + std::to_string(in_f) + "]",
                    double(T * in_f) * (4 + act), 0, [=] {
                      Tensor g = dx;
                      quant::hot_epilogue(acc, a, b, nullptr, g, false);
                    }});
    auto hw = std::make_shared<HotWeight>(WeightSource(w), HotOptions{}, HotSite{});
    rows.push_back({"hot backward_input " + s, 0, fl, [=] {
                      Tensor g = dx;
                      hw->backward_input(dy, g, false);
                    }});
  }
  // The optimizer step over every adapter tensor of the model (A and B of all projections at r=64,
  // LoRA's default; the table's grad_norm_clip and adamw_all rows time one layer's): the grad norm with its clip factor and the fused AdamW that zeroes the grads
  // (engine/optim/adamw.h), as train_step runs them. At least 36 B per param: g read twice (norm,
  // update), p, m, v read and written, g written. After the first call the grads are zero, which
  // changes no traffic.
  std::vector<Param> adapter;
  adapter.reserve(size_t(cfg.num_layers) * 2 * llama::kNumProj);
  int64_t trainable = 0;
  for (int64_t l = 0; l < cfg.num_layers; ++l)
    for (const llama::ProjShape& p : cfg.projections())
      for (const Shape& s : {Shape{64, p.in}, Shape{p.out, 64}}) {
        adapter.push_back({"", random(s, DType::F32, device, 11), random(s, DType::F32, device, 12)});
        trainable += shape_numel(s);
      }
  std::vector<Param*> adapter_params;
  for (Param& p : adapter) adapter_params.push_back(&p);
  auto optimizer = std::make_shared<AdamW>(adapter_params, AdamWConfig{.weight_decay = 0.01});
  rows.push_back({"adamw step " + std::to_string(adapter.size()) + " tensors " +
                      std::to_string(trainable) + " params",
                  36.0 * double(trainable), 0, [optimizer] {
                    optimizer->clip_grad_norm(0.3);
                    optimizer->step(2e-4);
                  }});

  // --only: rows whose kernel (the name's first word) is one of the given names.
  const auto wanted = [&](const std::string& name) {
    return only.empty() || std::find(only.begin(), only.end(), name.substr(0, name.find(' '))) != only.end();
  };
  for (const std::string& name : only) {
    std::set<std::string> kernels;
    for (const TableRow& r : table) kernels.insert(r.name.substr(0, r.name.find(' ')));
    for (const Row& r : rows) kernels.insert(r.name.substr(0, r.name.find(' ')));
    if (kernels.count(name)) continue;
    std::string known;
    for (const std::string& k : kernels) known += (known.empty() ? "" : ", ") + k;
    throw UsageError("--only: no kernel named '" + name + "' at this shape; kernels: " + known);
  }
  std::erase_if(table, [&](const TableRow& r) { return !wanted(r.name); });
  std::erase_if(rows, [&](const Row& r) { return !wanted(r.name); });
  int width = 46;  // the longest name's
  for (const TableRow& r : table) width = std::max(width, int(r.name.size()));
  for (const Row& r : rows) width = std::max(width, int(r.name.size()));
  char line[300];
  std::snprintf(line, sizeof line, "%-*s %10s %10s %10s\n", width, "kernel", "us/call", "GB/s", "TFLOP/s");
  out << title << line;
  const auto print = [&](const std::string& name, double bytes, double flops, double s) {
    char rate[32] = "";
    if (bytes > 0) std::snprintf(rate, sizeof rate, "%10.1f %10s", bytes / s / 1e9, "");
    if (flops > 0) std::snprintf(rate, sizeof rate, "%10s %10.1f", "", flops / s / 1e12);
    std::snprintf(line, sizeof line, "%-*s %10.1f %s\n", width, name.c_str(), s * 1e6, rate);
    out << line << std::flush;
  };
  for (const TableRow& r : table) print(r.name, r.bytes, r.flops, r.seconds());
  for (const Row& r : rows) print(r.name, r.bytes, r.flops, seconds_per_call(r.call, device, repeats));
}

}  // namespace loft::app
