// hot: LoRA beside a frozen weight whose dX product is Hadamard-quantized INT4/INT8 (docs/hot.md;
// engine/methods/hot/hot_weight.h), over a dense, FP8 or NF4 backbone, optionally with LQS's
// per-layer scale choice from a calibration pass before step 0.
#include <algorithm>

#include "engine/io/json_fields.h"
#include "engine/io/json_read.h"
#include "engine/methods/hot/hot_weight.h"
#include "engine/peft/method_spec.h"
#include "engine/peft/nf4_weight.h"

namespace loft {

namespace {

constexpr int kMaxLqsBatches = 1 << 10;
constexpr int64_t kBf16 = 2, kFp32 = 4;

int64_t round_up(int64_t v, int64_t m) { return memory_mul((v + m - 1) / m, m); }

// The memory rows' terms (below the spec).
int64_t hot_code_bytes(const ProjectionSizes& s);
int64_t hot_nf4_scratch(const ProjectionSizes& s);
int64_t hot_backward_bytes_per_token(const ProjectionSizes& s);

// HOT changes only the frozen weights' backward, so it keeps LoRA's recipe (the QLoRA defaults).
class HotSpec : public MethodSpec {
 public:
  std::string name() const override { return "hot"; }
  MethodDefaults defaults() const override { return qlora_recipe(); }
  std::vector<MethodFlag> flags() const override {
    std::vector<MethodFlag> f;
    f.push_back(int_method_flag<HotOptions>("--hot-gx-bits", "HOT dX codes (dY and W): 4 or 8 bits", "4",
                                            &HotOptions::gx_bits, 4, 8));
    f.push_back(method_flag<HotOptions, bool>(
        "--hot-lqs", "HOT: choose per-token or per-tensor dY scales per layer (LQS) on a calibration pass before step 0",
        "off", &HotOptions::lqs, [](const std::string& v) { return v == "true"; },
        [](bool v) { return std::string(v ? "true" : "off"); }));
    f.back().is_switch = true;
    f.push_back(int_method_flag<HotOptions>("--hot-lqs-batches", "HOT: micro-batches of LQS's calibration pass",
                                            "1", &HotOptions::lqs_batches, 1, kMaxLqsBatches));
    f.push_back(method_flag<HotOptions, quant::HotRound>(
        "--hot-round", "HOT dY rounding: sr (stochastic, unbiased) or rne (nearest)", "sr", &HotOptions::round,
        parse_hot_round, [](quant::HotRound r) { return std::string(hot_round_name(r)); }));
    f.push_back(method_flag<HotOptions, HotBackbone>(
        "--backbone", "HOT forward backbone: dense, fp8 (E4M3 per tensor) or nf4 (decoded per GEMM)", "dense",
        &HotOptions::backbone, parse_hot_backbone, [](HotBackbone b) { return std::string(hot_backbone_name(b)); }));
    f.back().refused_elsewhere = true;  // fp8 and nf4 forwards are HALO's and hot's; QLoRA is NF4 already
    return f;
  }
  bool apply_variant(MethodOptions& m, const std::string& v) const override {
    HotOptions& h = m.get<HotOptions>();
    if (v == "g4" || v == "g8") h.gx_bits = v[1] - '0';
    else if (v == "lqs") h.lqs = true;
    else if (v == "sr" || v == "rne") h.round = parse_hot_round(v);
    else if (v == "dense" || v == "fp8" || v == "nf4") h.backbone = parse_hot_backbone(v);
    else return false;
    return true;
  }
  std::string variants_help() const override { return "g4|g8, lqs, sr|rne, dense|fp8|nf4"; }
  std::vector<std::string> variant_examples() const override { return {"hot:lqs", "hot:g8", "hot:nf4"}; }
  void validate(const MethodOptions& m) const override {
    const HotOptions& h = m.get<HotOptions>();
    check_hot_gx_bits(h.gx_bits);
    if (h.lqs_batches < 1 || h.lqs_batches > kMaxLqsBatches)
      throw UsageError(cat("--hot-lqs-batches ", h.lqs_batches, " is not in 1..", kMaxLqsBatches));
  }

  void write_record(const MethodOptions& m, nlohmann::json& loft) const override {
    const HotOptions& h = m.get<HotOptions>();
    // The SR seed is the run's (recorded with it); the counter and LQS's choices travel in the
    // method state.
    loft["hot"] = {{"gx_bits", h.gx_bits},
                   {"round", hot_round_name(h.round)},
                   {"backbone", hot_backbone_name(h.backbone)},
                   {"lqs", h.lqs},
                   {"lqs_batches", h.lqs_batches}};
  }
  void read_record(const JsonFields& loft, MethodOptions& m) const override {
    const JsonFields j = loft.object("hot");
    HotOptions& h = m.get<HotOptions>();
    h.gx_bits = j.int32("gx_bits", 4, 8);
    if (h.gx_bits != 4 && h.gx_bits != 8) j.fail("gx_bits", cat("must be 4 or 8, got ", h.gx_bits));
    const std::string round = j.string("round");
    if (round != "sr" && round != "rne") j.fail("round", cat("must be sr or rne, got ", brief(round)));
    h.round = parse_hot_round(round);
    const std::string backbone = j.string("backbone");
    if (backbone != "dense" && backbone != "fp8" && backbone != "nf4")
      j.fail("backbone", cat("must be dense, fp8 or nf4, got ", brief(backbone)));
    h.backbone = parse_hot_backbone(backbone);
    h.lqs = j.boolean("lqs");
    if (j.has("lqs_batches")) h.lqs_batches = j.int32("lqs_batches", 1, kMaxLqsBatches);
  }

  std::string plan_detail(const MethodOptions& m) const override {
    const HotOptions& h = m.get<HotOptions>();
    return cat("dX INT", h.gx_bits, " (Hadamard-16 along out, ", h.lqs ? "per-token or per-tensor by LQS" : "per-token",
               " ", h.round == quant::HotRound::Stochastic ? "SR" : "RNE",
               ") · W codes per in-channel · GEMM int32 (s4 on sm_80-89, else INT8 carrier; CPU loop) · backbone ",
               hot_backbone_name(h.backbone), " · LQS ",
               h.lqs ? cat("on (", h.lqs_batches, " calibration micro-batch", h.lqs_batches == 1 ? "" : "es", ")")
                     : std::string("off"));
  }
  std::string brief_detail(const MethodOptions& m) const override {
    const HotOptions& h = m.get<HotOptions>();
    return cat("int", h.gx_bits, ", ", hot_round_name(h.round), ", backbone ", hot_backbone_name(h.backbone),
               h.lqs ? ", lqs" : "");
  }
  void bench_options(const MethodOptions& m, nlohmann::ordered_json& j) const override {
    const HotOptions& h = m.get<HotOptions>();
    j["hot_gx_bits"] = h.gx_bits;
    j["hot_round"] = hot_round_name(h.round);
    j["hot_lqs"] = h.lqs;
    j["backbone"] = hot_backbone_name(h.backbone);
  }

  MethodMemoryRow memory_row(const ProjectionSizes& s, const MethodOptions& m) const override {
    MethodMemoryRow row = frozen_row(s, m.get<HotOptions>().backbone);
    row.working_bytes_per_token = hot_backward_bytes_per_token(s);
    return row;
  }
  static MethodMemoryRow frozen_row(const ProjectionSizes& s, HotBackbone backbone) {
    MethodMemoryRow row;
    switch (backbone) {
      case HotBackbone::Fp8:
        row = {"hot-fp8", "E4M3 W + INT8-carrier dX codes of W + one projection's transpose scratch",
               memory_add(s.weights, hot_code_bytes(s)), s.lora()};
        row.scratch_bytes = s.largest_projection;
        return row;
      case HotBackbone::Nf4:
        row = {"hot-nf4", "NF4 W + one projection's decoded W and dX codes", s.nf4_bytes, s.lora()};
        row.scratch_bytes = hot_nf4_scratch(s);
        return row;
      case HotBackbone::Dense:
        break;
    }
    return {"hot-dense", "bf16 W + INT8-carrier dX codes of W",
            memory_add(memory_mul(kBf16, s.weights), hot_code_bytes(s)), s.lora()};
  }
  std::vector<MethodMemoryRow> memory_rows(const ProjectionSizes& s) const override {
    std::vector<MethodMemoryRow> rows;
    for (HotBackbone b : {HotBackbone::Dense, HotBackbone::Fp8, HotBackbone::Nf4}) {
      MethodOptions m;
      m.get<HotOptions>().backbone = b;
      rows.push_back(memory_row(s, m));
    }
    return rows;
  }

  LinearFactory linear_factory(const MethodOptions& m, std::mt19937_64& rng) const override {
    HotOptions h = m.get<HotOptions>();
    h.seed = m.seed;
    // Every frozen projection (adapted or not) gets the HOT dX product; lm_head and the
    // embeddings are not projections and stay as they are.
    return lora_family_factory(m, rng, [h](const std::string& name, const WeightSource& w) {
      return hot_weight(w, h, hot_site_of(name));
    });
  }
  Tensor export_backbone(const Tensor& w, const MethodOptions& m) const override {
    // The adapter merges onto W, or onto the NF4 backbone the forward used (as QLoRA's).
    return m.get<HotOptions>().backbone == HotBackbone::Nf4 ? frozen_weight_f32(*nf4_weight(w)) : w;
  }
  bool quantized_backbone() const override { return true; }
};

// Per token, the most one dX product holds at once (hot_gemm.cpp, hot_quant.cpp): dY rotated to
// fp32 and its int8 codes (out wide), and the int32 accumulator (in wide). A 24 GiB llama-7b run
// at 10 × 2048 tokens went 0.4 GiB past the estimate without it.
int64_t hot_backward_bytes_per_token(const ProjectionSizes& s) {
  int64_t most = 0;
  for (const auto& [out, in] : s.layer_shapes)
    most = std::max(most, memory_add(memory_mul(kFp32 + 1, out), memory_mul(kFp32, in)));
  return most;
}

// The resident W codes of every projection (INT8 carrier: K = out padded to 128, rows = in
// padded to 16) plus a 4-byte step per in-channel.
int64_t hot_code_bytes(const ProjectionSizes& s) {
  int64_t layer = 0;
  for (const auto& [out, in] : s.layer_shapes)
    layer = memory_add(layer, memory_add(memory_mul(round_up(in, 16), round_up(out, 128)),
                                         memory_mul(kFp32, in)));
  return memory_mul(layer, s.layers);
}

// NF4 regenerates one projection's codes per backward from its decoded W: the largest
// projection's decoded bf16 W, codes and steps.
int64_t hot_nf4_scratch(const ProjectionSizes& s) {
  int64_t largest = 0;
  for (const auto& [out, in] : s.layer_shapes)
    largest = std::max(largest, memory_add(memory_add(memory_mul(kBf16, memory_mul(out, in)),
                                                      memory_mul(round_up(in, 16), round_up(out, 128))),
                                           memory_mul(kFp32, in)));
  return largest;
}

}  // namespace

LOFT_DEFINE_METHOD_SPEC(hot, HotSpec)

}  // namespace loft
