#include "models/llama/fp8_config.h"

#include <map>
#include <nlohmann/json.hpp>

#include "engine/core/error.h"
#include "engine/io/json_fields.h"
#include "engine/io/json_read.h"

namespace loft::llama {

namespace {

using nlohmann::json;

using QuantFields = JsonFields;  // prefix "quantization_config."

std::vector<std::string> optional_strings(const QuantFields& f, const std::string& key) {
  return f.has(key) ? f.strings(key) : std::vector<std::string>{};
}

// Block sides beyond this are no real checkpoint's and would overflow scale-grid sizes.
constexpr int64_t kMaxBlockSide = int64_t(1) << 20;

Fp8Checkpoint parse_transformers_fp8(const QuantFields& f) {
  Fp8Checkpoint c;
  c.quant_method = "fp8";
  c.scale_name = "weight_scale_inv";
  c.granularity = Fp8Checkpoint::Granularity::Block;
  if (const std::string fmt = f.string("fmt", "e4m3"); fmt != "e4m3")
    f.fail("fmt", cat("is ", brief(fmt), "; only E4M3 weights are supported"));
  if (const std::string sf = f.string("scale_fmt", "float"); sf != "float")
    f.fail("scale_fmt", cat("is ", brief(sf), "; only float scales are supported"));
  static const json null;
  const json& b = f.has("weight_block_size") ? f.at("weight_block_size") : null;
  auto side = [](const json& v) {
    return v.is_number_integer() && v.get<int64_t>() > 0 && v.get<int64_t>() <= kMaxBlockSide;
  };
  const bool ok = b.is_array() && b.size() == 2 && side(b[0]) && side(b[1]);
  if (!ok)
    f.fail("weight_block_size",
           cat("is ", brief(b), "; this block size is not supported (expected [rows, cols] of ",
               "two integers from 1 to ", kMaxBlockSide, ", e.g. [128, 128])"));
  c.block_rows = b[0].get<int64_t>();
  c.block_cols = b[1].get<int64_t>();
  c.not_quantized = optional_strings(f, "modules_to_not_convert");
  return c;
}

// compressed-tensors formats other than FP8 weights stored one code per element.
void check_ct_format(const QuantFields& f, const std::string& key, const std::string& format) {
  if (format == "float-quantized" || format == "naive-quantized") return;
  if (format == "pack-quantized")
    f.fail(key, "is 'pack-quantized' (int4/int8 weights packed into int32): not supported; loft "
                "reads FP8 weights (float-quantized)");
  if (format == "int-quantized")
    f.fail(key, "is 'int-quantized' (int8 weights): not supported; loft reads FP8 weights "
                "(float-quantized)");
  f.fail(key, cat("is ", brief(format), ": not supported; loft reads FP8 weights (float-quantized)"));
}

// One config group's weights: 8-bit float, symmetric, per tensor or per channel.
Fp8Checkpoint::Granularity ct_group_strategy(const QuantFields& f, const std::string& group,
                                             const json& g) {
  const std::string key = "config_groups." + (group.size() > 60 ? group.substr(0, 60) + "..." : group);
  if (!g.is_object()) f.fail(key, cat("must be an object, got ", brief(g)));
  const QuantFields gf(g, f.source(), "quantization_config." + key + ".");
  if (gf.has("format")) check_ct_format(f, key + ".format", gf.string("format"));
  if (!gf.has("weights"))
    f.fail(key + ".weights", "is null: activation-only quantization is not supported (loft reads "
                             "FP8 weights)");
  const QuantFields w = gf.object("weights");
  const std::string type = w.string("type", "");
  const std::string strategy = w.string("strategy", "");
  const int64_t bits = w.has("num_bits") ? w.integer("num_bits") : 0;
  if (type != "float" || bits != 8)
    f.fail(key + ".weights", cat("are ", bits, "-bit ", type.empty() ? "?" : type.substr(0, 40),
                                 ": not supported; loft reads 8-bit float (FP8 E4M3) weights"));
  if (!w.boolean("symmetric", true))
    f.fail(key + ".weights.symmetric", "is false: asymmetric FP8 weights are not supported");
  if (strategy == "tensor") return Fp8Checkpoint::Granularity::Tensor;
  if (strategy == "channel") return Fp8Checkpoint::Granularity::Channel;
  f.fail(key + ".weights.strategy",
         cat("is ", brief(strategy), ": not supported (FP8 weights per tensor or per channel)"));
}

Fp8Checkpoint parse_compressed_tensors(const QuantFields& f) {
  Fp8Checkpoint c;
  c.quant_method = "compressed-tensors";
  c.scale_name = "weight_scale";
  c.zero_point_name = "weight_zero_point";
  c.format = f.string("format", "");
  if (!c.format.empty()) check_ct_format(f, "format", c.format);
  if (f.has("sparsity_config") && f.at("sparsity_config").is_object() &&
      f.object("sparsity_config").string("format", "dense") != "dense")
    f.fail("sparsity_config",
           cat("is ", brief(f.at("sparsity_config")), ": sparse weights are not supported"));
  const json& groups = f.at("config_groups");
  if (!groups.is_object() || groups.empty())
    f.fail("config_groups", cat("must be a non-empty object, got ", brief(groups)));
  std::optional<Fp8Checkpoint::Granularity> strategy;
  for (const auto& [name, g] : groups.items()) {
    const auto s = ct_group_strategy(f, name, g);
    if (strategy && *strategy != s)
      f.fail("config_groups", "mix per-tensor and per-channel weights: not supported");
    strategy = s;
    if (c.format.empty() && g.contains("format") && g["format"].is_string())
      c.format = g["format"].get<std::string>();
  }
  if (c.format.empty()) f.fail("format", "is missing (expected float-quantized)");
  c.granularity = *strategy;
  c.not_quantized = optional_strings(f, "ignore");
  return c;
}

// The registered formats, by quant_method.
using Parser = Fp8Checkpoint (*)(const QuantFields&);
const std::map<std::string, Parser>& parsers() {
  static const std::map<std::string, Parser> m{{"fp8", parse_transformers_fp8},
                                               {"compressed-tensors", parse_compressed_tensors}};
  return m;
}

const char* granularity_name(Fp8Checkpoint::Granularity g) {
  switch (g) {
    case Fp8Checkpoint::Granularity::Tensor:
      return "tensor";
    case Fp8Checkpoint::Granularity::Channel:
      return "channel";
    case Fp8Checkpoint::Granularity::Block:
      return "block";
  }
  return "?";
}

}  // namespace

std::pair<int64_t, int64_t> Fp8Checkpoint::block_for(int64_t out, int64_t in) const {
  switch (granularity) {
    case Granularity::Tensor:
      return {out, in};
    case Granularity::Channel:
      return {1, in};
    case Granularity::Block:
      return {block_rows, block_cols};
  }
  throw Error("Fp8Checkpoint: unknown granularity");
}

std::string Fp8Checkpoint::describe() const {
  const std::string scales = granularity == Granularity::Block
                                 ? cat("block ", block_rows, "x", block_cols)
                                 : cat("per-", granularity_name(granularity));
  const std::string by = quant_method == "fp8" ? "transformers fp8" : quant_method + " " + format;
  return cat("fp8 e4m3, ", scales, " (", by, ")");
}

nlohmann::json Fp8Checkpoint::to_json() const {
  json j{{"method", quant_method},
         {"format", format},
         {"weights", "e4m3"},
         {"granularity", granularity_name(granularity)},
         {"scale_tensor", scale_name},
         {"not_quantized", not_quantized},
         {"description", describe()}};
  if (granularity == Granularity::Block) j["block"] = {block_rows, block_cols};
  return j;
}

std::optional<Fp8Checkpoint> parse_fp8_checkpoint(const nlohmann::json& config,
                                                  const std::string& source) {
  if (!config.contains("quantization_config") || config["quantization_config"].is_null())
    return std::nullopt;
  const json& qc = config["quantization_config"];
  if (!qc.is_object())
    throw Error(cat(source, ": field quantization_config must be an object, got ", brief(qc)));
  const QuantFields f(qc, source, "quantization_config.");
  const std::string method = f.string("quant_method", "");
  const auto it = parsers().find(method);
  if (it == parsers().end())
    f.fail("quant_method", cat(method.empty() ? "is missing" : "is " + brief(method),
                               ": not supported; loft reads FP8 checkpoints (fp8, or "
                               "compressed-tensors float-quantized)"));
  return it->second(f);
}

Fp8Checkpoint fp8_export_scheme(const std::string& layout) {
  Fp8Checkpoint c;
  if (layout == "block") {
    c.quant_method = "fp8";
    c.scale_name = "weight_scale_inv";
    c.granularity = Fp8Checkpoint::Granularity::Block;
    c.block_rows = c.block_cols = 128;
  } else if (layout == "channel" || layout == "tensor") {
    c.quant_method = "compressed-tensors";
    c.format = "float-quantized";
    c.scale_name = "weight_scale";
    c.zero_point_name = "weight_zero_point";
    c.granularity = layout == "channel" ? Fp8Checkpoint::Granularity::Channel
                                        : Fp8Checkpoint::Granularity::Tensor;
  } else {
    throw UsageError(cat("--fp8-layout: '", layout, "' is not channel, block or tensor"));
  }
  c.not_quantized = {"lm_head"};
  return c;
}

json quantization_config_json(const Fp8Checkpoint& q) {
  if (q.quant_method == "fp8") {
    LOFT_CHECK(q.granularity == Fp8Checkpoint::Granularity::Block,
               "transformers fp8 stores block scales only");
    return {{"quant_method", "fp8"},
            {"activation_scheme", "dynamic"},
            {"fmt", "e4m3"},
            {"scale_fmt", "float"},
            {"weight_block_size", {q.block_rows, q.block_cols}},
            {"dequantize", false},
            {"modules_to_convert", nullptr},
            {"modules_to_not_convert", q.not_quantized}};
  }
  LOFT_CHECK(q.quant_method == "compressed-tensors" &&
                 q.granularity != Fp8Checkpoint::Granularity::Block,
             "compressed-tensors FP8 export writes per-tensor or per-channel scales");
  auto args = [](const char* strategy, bool dynamic, const json& observer) {
    return json{{"num_bits", 8},          {"type", "float"},          {"symmetric", true},
                {"strategy", strategy},   {"dynamic", dynamic},       {"group_size", nullptr},
                {"block_structure", nullptr}, {"actorder", nullptr},  {"observer", observer},
                {"observer_kwargs", json::object()}};
  };
  const char* strategy = granularity_name(q.granularity);
  const json group{{"targets", {"Linear"}},
                   {"weights", args(strategy, false, "minmax")},
                   {"input_activations", args("token", true, nullptr)},
                   {"output_activations", nullptr},
                   {"format", q.format}};
  return {{"quant_method", "compressed-tensors"},
          {"format", q.format},
          {"quantization_status", "compressed"},
          {"config_groups", {{"group_0", group}}},
          {"ignore", q.not_quantized},
          {"kv_cache_scheme", nullptr},
          {"global_compression_ratio", nullptr}};
}

}  // namespace loft::llama
