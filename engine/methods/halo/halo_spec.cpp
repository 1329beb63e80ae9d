// halo: LoRA beside a Hadamard-rotated FP8/INT8 frozen weight (docs/methods.md, "HALO PEFT";
// engine/peft/halo_weight.h), levels 0/1/2, optionally over an NF4 backbone.
#include "engine/io/json_fields.h"
#include "engine/io/json_read.h"
#include "engine/peft/halo_weight.h"
#include "engine/peft/method_spec.h"
#include "engine/peft/nf4_weight.h"
#include "engine/quant/hadamard.h"

namespace loft {

quant::LowpFormat parse_halo_format(const std::string& name) {
  if (name == "fp8") return quant::LowpFormat::E4M3;
  if (name == "int8") return quant::LowpFormat::INT8;
  throw UsageError(cat("--halo-format: '", name, "' is not fp8 or int8"));
}

std::string halo_format_name(quant::LowpFormat format) {
  switch (format) {
    case quant::LowpFormat::E4M3:
      return "fp8";
    case quant::LowpFormat::INT8:
      return "int8";
    default:
      throw Error("HALO format is neither fp8 nor int8");
  }
}

HaloBackbone parse_halo_backbone(const std::string& name) {
  if (name == "dense") return HaloBackbone::Dense;
  if (name == "nf4") return HaloBackbone::Nf4;
  throw UsageError(cat("--backbone: '", name, "' is not dense or nf4"));
}

const char* backbone_name(HaloBackbone b) { return b == HaloBackbone::Nf4 ? "nf4" : "dense"; }

namespace {

constexpr int kMaxLevel = 2;

// The NF4 backbone as the model computed with it: W rotated along its input (levels 1, 2),
// stored NF4-DQ, decoded, and rotated back.
Tensor halo_nf4_backbone(const Tensor& w, int level) {
  Tensor wr = w;
  quant::HadamardPlan plan;
  if (level >= 1) {
    plan = quant::plan_for(w.size(1));
    wr = Tensor::empty(w.shape(), DType::F32);
    quant::hadamard_transform(plan, w, wr);
  }
  Tensor back = dequantize_nf4(quantize_nf4(wr), DType::F32);
  if (level >= 1) quant::hadamard_transform(plan, back, back, /*inverse=*/true);
  return back;
}

class HaloSpec : public MethodSpec {
 public:
  std::string name() const override { return "halo"; }
  // docs/methods.md: HALO's reference scripts.
  MethodDefaults defaults() const override {
    return {.rank = 16, .alpha = 8.0f, .lr = 3e-4, .schedule = "linear", .warmup = 20, .max_grad_norm = 0.0,
            .batch = 32};
  }

  std::vector<MethodFlag> flags() const override {
    MethodFlag level = int_method_flag<HaloOptions>(
        "--halo-level", "HALO rotations: 0 none, 1 input dim, 2 also dY along tokens", "2",
        &HaloOptions::level, 0, kMaxLevel);
    MethodFlag format = method_flag<HaloOptions, quant::LowpFormat>(
        "--halo-format", "HALO low-precision format fp8 or int8", "fp8", &HaloOptions::format,
        parse_halo_format, halo_format_name);
    MethodFlag backbone = method_flag<HaloOptions, HaloBackbone>(
        "--backbone", "HALO weight store: dense codes, or nf4 (decoded per GEMM)", "dense",
        &HaloOptions::backbone, parse_halo_backbone, [](HaloBackbone b) { return std::string(backbone_name(b)); });
    backbone.refused_elsewhere = true;  // NF4 storage is HALO's; QLoRA is NF4 by definition
    MethodFlag transposed = transposed_codes_flag<HaloOptions>(
        "--halo-transposed",
        "HALO's transposed weight codes for the dX GEMM (dense backbone): keep (+1 byte a weight, no "
        "transpose per step), per-step (transposed into one shared scratch in each backward) or auto "
        "(keep when the estimate leaves room on the device)",
        &HaloOptions::transposed);
    return {level, format, backbone, transposed};
  }
  // auto: keep the dense backbone's transposed codes where the run's estimate with them leaves
  // room (RunPlan); an NF4 backbone has none to keep.
  void resolve_memory_choices(MethodOptions& m, const MemoryFits& fits) const override {
    HaloOptions& h = m.get<HaloOptions>();
    if (h.backbone == HaloBackbone::Nf4 && h.transposed == TransposedCodes::auto_choice)
      h.transposed = TransposedCodes::per_step;
    keep_transposed_where_it_fits(m, fits, &HaloOptions::transposed);
  }
  bool apply_variant(MethodOptions& m, const std::string& v) const override {
    HaloOptions& h = m.get<HaloOptions>();
    if (v == "fp8" || v == "int8") h.format = parse_halo_format(v);
    else if (v == "dense" || v == "nf4") h.backbone = parse_halo_backbone(v);
    else if (v.size() == 2 && v[0] == 'l' && v[1] >= '0' && v[1] <= '0' + kMaxLevel) h.level = v[1] - '0';
    else return false;
    return true;
  }
  std::string variants_help() const override { return "fp8|int8, dense|nf4, l0|l1|l2"; }
  std::vector<std::string> variant_examples() const override {
    return {"halo:int8", "halo:nf4", "halo:l1"};
  }
  void validate(const MethodOptions& m) const override {
    const int level = m.get<HaloOptions>().level;
    if (level < 0 || level > kMaxLevel)
      throw UsageError(cat("--halo-level ", level, " is not one of 0, 1, 2"));
    const HaloOptions& h = m.get<HaloOptions>();
    if (h.backbone == HaloBackbone::Nf4 && h.transposed == TransposedCodes::keep)
      throw UsageError("--halo-transposed keep needs --backbone dense: an NF4 backbone decodes each GEMM's codes as it needs them");
  }

  void write_record(const MethodOptions& m, nlohmann::json& loft) const override {
    const HaloOptions& h = m.get<HaloOptions>();
    loft["halo"] = {{"level", h.level}, {"format", halo_format_name(h.format)},
                    {"backbone", backbone_name(h.backbone)}};
  }
  void read_record(const JsonFields& loft, MethodOptions& m) const override {
    const JsonFields j = loft.object("halo");
    HaloOptions& h = m.get<HaloOptions>();
    h.level = j.int32("level", 0, kMaxLevel);
    const std::string format = j.string("format");
    if (format != "fp8" && format != "int8")
      j.fail("format", cat("must be fp8 or int8, got ", brief(format)));
    h.format = parse_halo_format(format);
    if (j.has("backbone")) {  // absent in records written before the NF4 backbone: dense
      const std::string backbone = j.string("backbone");
      if (backbone != "dense" && backbone != "nf4")
        j.fail("backbone", cat("must be dense or nf4, got ", brief(backbone)));
      h.backbone = parse_halo_backbone(backbone);
    }
  }

  std::string plan_detail(const MethodOptions& m) const override {
    const HaloOptions& h = m.get<HaloOptions>();
    if (h.backbone == HaloBackbone::Nf4) return cat(brief_detail(m), ", backbone nf4");
    return cat(brief_detail(m), ", backbone dense, transposed codes ", transposed_codes_name(h.transposed));
  }
  std::string brief_detail(const MethodOptions& m) const override {
    const HaloOptions& h = m.get<HaloOptions>();
    return cat("level ", h.level, ", ", halo_format_name(h.format));
  }
  void bench_options(const MethodOptions& m, nlohmann::ordered_json& j) const override {
    const HaloOptions& h = m.get<HaloOptions>();
    j["halo_level"] = h.level;
    j["halo_format"] = halo_format_name(h.format);
    j["backbone"] = backbone_name(h.backbone);
    if (h.backbone == HaloBackbone::Dense) j["halo_transposed"] = transposed_codes_name(h.transposed);
  }

  MethodMemoryRow memory_row(const ProjectionSizes& s, const MethodOptions& m) const override {
    const HaloOptions& h = m.get<HaloOptions>();
    // Q(W·H) rotated once at load: NF4, or 1 byte each. The scratch, as large as the largest
    // projection: NF4's codes (W or its transpose) decoded just before each GEMM, or the dense
    // codes transposed for each dX GEMM; or, kept, the dense codes' transpose beside them (1 byte
    // each more) and no scratch. An unresolved auto counts the scratch (what runs where no plan
    // resolves it). LoRA in bf16 beside it.
    if (h.backbone == HaloBackbone::Nf4) {
      MethodMemoryRow row{"halo-nf4", "NF4 rotated W + one projection's FP8 decode", s.nf4_bytes, s.lora()};
      row.scratch_bytes = s.largest_projection;
      return row;
    }
    const bool keep = h.transposed == TransposedCodes::keep;
    const std::string format = h.format == quant::LowpFormat::INT8 ? "int8" : "fp8";
    MethodMemoryRow row{cat("halo-", format, keep ? "-kept" : ""),
                        cat(h.format == quant::LowpFormat::INT8 ? "INT8" : "E4M3",
                            keep ? " rotated W + its codes transposed, kept" : " rotated W + one projection's transpose scratch"),
                        memory_add(s.weights, keep ? s.weights : 0), s.lora()};
    row.scratch_bytes = keep ? 0 : s.largest_projection;
    return row;
  }
  std::vector<MethodMemoryRow> memory_rows(const ProjectionSizes& s) const override {
    MethodOptions fp8, int8, nf4, fp8_kept;
    fp8.get<HaloOptions>().format = quant::LowpFormat::E4M3;
    int8.get<HaloOptions>().format = quant::LowpFormat::INT8;
    nf4.get<HaloOptions>().backbone = HaloBackbone::Nf4;
    fp8_kept.get<HaloOptions>().transposed = TransposedCodes::keep;
    return {memory_row(s, fp8), memory_row(s, fp8_kept), memory_row(s, int8), memory_row(s, nf4)};
  }

  LinearFactory linear_factory(const MethodOptions& m, std::mt19937_64& rng) const override {
    const HaloOptions h = m.get<HaloOptions>();
    // HALO takes the WeightSource itself: an FP8 checkpoint's codes or exact values.
    return lora_family_factory(m, rng, [h](const std::string&, const WeightSource& w) { return halo_weight(w, h); });
  }
  Tensor export_backbone(const Tensor& w, const MethodOptions& m) const override {
    // Dense codes are undone (the adapter merges onto W); an NF4 backbone is kept.
    const HaloOptions& h = m.get<HaloOptions>();
    return h.backbone == HaloBackbone::Nf4 ? halo_nf4_backbone(w, h.level) : w;
  }
  bool quantized_backbone() const override { return true; }
};

}  // namespace

LOFT_DEFINE_METHOD_SPEC(halo, HaloSpec)

}  // namespace loft
