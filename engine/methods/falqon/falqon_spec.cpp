// falqon: melded FP8 LoRA (docs/methods.md, "FALQON"; engine/methods/falqon/falqon_linear.h). Its
// targets are FalqonLinear, its other projections dense; the trained model is rebuilt from method
// state.
#include "engine/io/json_fields.h"
#include "engine/io/json_read.h"
#include "engine/methods/falqon/falqon_linear.h"
#include "engine/peft/frozen_linear.h"
#include "engine/peft/method_spec.h"

namespace loft {

FalqonOptions::Buffer parse_falqon_buffer(const std::string& name) {
  if (name == "reset") return FalqonOptions::Buffer::reset;
  if (name == "accumulate") return FalqonOptions::Buffer::accumulate;
  throw UsageError(cat("--falqon-buffer: '", name, "' is not reset or accumulate"));
}

const char* falqon_buffer_name(FalqonOptions::Buffer buffer) {
  return buffer == FalqonOptions::Buffer::accumulate ? "accumulate" : "reset";
}

namespace {

constexpr int kMaxTopk = 1 << 16;

class FalqonSpec : public MethodSpec {
 public:
  std::string name() const override { return "falqon"; }
  // docs/methods.md: FALQON's reference scripts.
  MethodDefaults defaults() const override {
    return {.rank = 64, .alpha = 16.0f, .lr = 2e-3, .schedule = "constant", .warmup = 0, .max_grad_norm = 3.0,
            .batch = 16};
  }

  std::vector<MethodFlag> flags() const override {
    return {int_method_flag<FalqonOptions>("--falqon-topk", "FALQON rows updated per step",
                                           "the rank", &FalqonOptions::topk, 0, kMaxTopk),
            method_flag<FalqonOptions, FalqonOptions::Buffer>(
                "--falqon-buffer",
                "FALQON ΔB buffer after each update: reset (zero all of B) or accumulate (keep "
                "unapplied rows)",
                "accumulate", &FalqonOptions::buffer, parse_falqon_buffer,
                [](FalqonOptions::Buffer b) { return std::string(falqon_buffer_name(b)); }),
            transposed_codes_flag<FalqonOptions>(
                "--falqon-transposed",
                "FALQON's transposed backbone codes for the dX GEMM: keep (+1 byte a weight, no "
                "transpose per step), per-step (transposed into one shared scratch in each "
                "backward) or auto (keep when the estimate leaves room on the device)",
                &FalqonOptions::transposed)};
  }
  // auto: keep the transposed codes where the run's estimate with them leaves room (RunPlan).
  void resolve_memory_choices(MethodOptions& m, const MemoryFits& fits) const override {
    keep_transposed_where_it_fits(m, fits, &FalqonOptions::transposed);
  }
  std::string plan_detail(const MethodOptions& m) const override {
    const FalqonOptions& f = m.get<FalqonOptions>();
    return cat("buffer ", falqon_buffer_name(f.buffer), ", transposed codes ", transposed_codes_name(f.transposed));
  }
  bool apply_variant(MethodOptions& m, const std::string& v) const override {
    if (v != "reset" && v != "accumulate") return false;
    m.get<FalqonOptions>().buffer = parse_falqon_buffer(v);
    return true;
  }
  std::string variants_help() const override { return "reset|accumulate"; }
  std::vector<std::string> variant_examples() const override { return {"falqon:reset"}; }
  // No α/r scaling: the adapter's PEFT α/r is 1.
  void apply_invariants(MethodOptions& m) const override { m.lora.alpha = float(m.lora.rank); }
  void validate(const MethodOptions& m) const override {
    const int topk = m.get<FalqonOptions>().topk;
    if (topk < 0) throw UsageError(cat("--falqon-topk ", topk, " must be >= 0 (0 = the rank)"));
  }

  void write_record(const MethodOptions& m, nlohmann::json& loft) const override {
    const FalqonOptions& f = m.get<FalqonOptions>();
    // The SVD seed is not needed: A's codes travel in the method state.
    loft["falqon"] = {{"topk", f.topk}, {"buffer", falqon_buffer_name(f.buffer)}};
  }
  void read_record(const JsonFields& loft, MethodOptions& m) const override {
    const JsonFields j = loft.object("falqon");
    FalqonOptions& f = m.get<FalqonOptions>();
    f.topk = j.int32("topk", 0);
    const std::string buffer = j.string("buffer");
    if (buffer != "reset" && buffer != "accumulate")
      j.fail("buffer", cat("must be reset or accumulate, got ", brief(buffer)));
    f.buffer = parse_falqon_buffer(buffer);
  }
  void bench_options(const MethodOptions& m, nlohmann::ordered_json& j) const override {
    const FalqonOptions& f = m.get<FalqonOptions>();
    j["falqon_topk"] = f.topk ? f.topk : m.lora.rank;
    j["falqon_buffer"] = falqon_buffer_name(f.buffer);
    j["falqon_transposed"] = transposed_codes_name(f.transposed);
  }

  MethodMemoryRow memory_row(const ProjectionSizes& s, const MethodOptions& m) const override {
    // [W; A] in E4M3 (1 byte each) + W's codes transposed for the dX GEMM: kept for every
    // projection, or made in one shared scratch (the largest projection); only B trains. An
    // unresolved auto counts the scratch (what runs where no plan resolves it).
    const bool keep = m.get<FalqonOptions>().transposed == FalqonOptions::Transposed::keep;
    MethodMemoryRow row{keep ? "falqon-fp8-kept" : "falqon-fp8",
                        keep ? "E4M3 [W; A] + W's codes transposed, kept" : "E4M3 [W; A] + one projection's transpose scratch",
                        memory_add(memory_add(s.weights, s.rank_in), keep ? s.weights : 0), s.rank_out,
                        // saves only x·Aᵀ; B is used in fp32; ΣΔB_applied is fp32 beside it.
                        /*saves_inputs=*/false, /*compute_copies=*/false, /*extra_bytes_per_trainable=*/4};
    row.scratch_bytes = keep ? 0 : s.largest_projection;
    return row;
  }
  std::vector<MethodMemoryRow> memory_rows(const ProjectionSizes& s) const override {
    MethodOptions keep;
    keep.method = "falqon";
    keep.get<FalqonOptions>().transposed = FalqonOptions::Transposed::keep;
    return {memory_row(s, MethodOptions{}), memory_row(s, keep)};
  }

  LinearFactory linear_factory(const MethodOptions& m, std::mt19937_64&) const override {
    FalqonOptions f = m.get<FalqonOptions>();
    f.seed = m.seed;
    // FALQON takes the WeightSource itself (an FP8 checkpoint's codes or exact values); its
    // frozen non-targets stay dense.
    return [targets = m.targets, rank = m.lora.rank, f](const std::string& name, const std::string& target,
                                                        WeightSource weight) -> std::unique_ptr<AdaptedLinear> {
      if (!targets.count(target)) return std::make_unique<FrozenLinear>(weight.dense());
      return std::make_unique<FalqonLinear>(name, weight, rank, f);
    };
  }
  bool pair_adapter() const override { return false; }
};

}  // namespace

LOFT_DEFINE_METHOD_SPEC(falqon, FalqonSpec)

}  // namespace loft
