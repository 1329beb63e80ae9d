#include "models/llama/fp8_config.h"

#include <map>
#include <nlohmann/json.hpp>

#include "engine/core/error.h"

namespace loft::llama {

namespace {

using nlohmann::json;

// One line naming config.json and the quantization_config field at fault.
class QuantFields {
 public:
  QuantFields(const json& qc, const std::string& source) : qc_(qc), source_(source) {}
  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    throw Error(cat(source_, ": field quantization_config.", key, " ", what));
  }
  const json& get(const std::string& key) const {
    static const json null;
    return qc_.contains(key) ? qc_[key] : null;
  }
  // A string field; `fallback` when absent or null.
  std::string string(const std::string& key, const std::string& fallback = "") const {
    const json& v = get(key);
    if (v.is_null()) return fallback;
    if (!v.is_string()) fail(key, cat("must be a string, got ", v.dump()));
    return v.get<std::string>();
  }
  // A list of strings; empty when absent or null.
  std::vector<std::string> strings(const std::string& key) const {
    const json& v = get(key);
    if (v.is_null()) return {};
    std::vector<std::string> out;
    if (!v.is_array()) fail(key, cat("must be a list of strings, got ", v.dump()));
    for (const json& e : v) {
      if (!e.is_string()) fail(key, cat("must be a list of strings, got ", v.dump()));
      out.push_back(e.get<std::string>());
    }
    return out;
  }

 private:
  const json& qc_;
  const std::string& source_;
};

Fp8Checkpoint parse_transformers_fp8(const QuantFields& f) {
  Fp8Checkpoint c;
  c.quant_method = "fp8";
  c.scale_name = "weight_scale_inv";
  c.granularity = Fp8Checkpoint::Granularity::Block;
  if (const std::string fmt = f.string("fmt", "e4m3"); fmt != "e4m3")
    f.fail("fmt", cat("is '", fmt, "'; only E4M3 weights are supported"));
  if (const std::string sf = f.string("scale_fmt", "float"); sf != "float")
    f.fail("scale_fmt", cat("is '", sf, "'; only float scales are supported"));
  const json& b = f.get("weight_block_size");
  const bool ok = b.is_array() && b.size() == 2 && b[0].is_number_integer() &&
                  b[1].is_number_integer() && b[0].get<int64_t>() > 0 && b[1].get<int64_t>() > 0;
  if (!ok)
    f.fail("weight_block_size",
           cat("is ", b.dump(), "; this block size is not supported (expected [rows, cols] of ",
               "two positive integers, e.g. [128, 128])"));
  c.block_rows = b[0].get<int64_t>();
  c.block_cols = b[1].get<int64_t>();
  c.not_quantized = f.strings("modules_to_not_convert");
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
  f.fail(key, cat("is '", format, "': not supported; loft reads FP8 weights (float-quantized)"));
}

// One config group's weights: 8-bit float, symmetric, per tensor or per channel.
Fp8Checkpoint::Granularity ct_group_strategy(const QuantFields& f, const std::string& group,
                                             const json& g) {
  const std::string key = "config_groups." + group;
  if (!g.is_object()) f.fail(key, cat("must be an object, got ", g.dump()));
  if (g.contains("format") && !g["format"].is_null()) {
    if (!g["format"].is_string()) f.fail(key + ".format", "must be a string");
    check_ct_format(f, key + ".format", g["format"].get<std::string>());
  }
  if (!g.contains("weights") || g["weights"].is_null())
    f.fail(key + ".weights", "is null: activation-only quantization is not supported (loft reads "
                             "FP8 weights)");
  const json& w = g["weights"];
  if (!w.is_object()) f.fail(key + ".weights", cat("must be an object, got ", w.dump()));
  const std::string type = w.value("type", std::string());
  const std::string strategy = w.value("strategy", std::string());
  const json& num_bits = w.contains("num_bits") ? w["num_bits"] : json();
  const int64_t bits = num_bits.is_number_integer() ? num_bits.get<int64_t>() : 0;
  if (type != "float" || bits != 8)
    f.fail(key + ".weights", cat("are ", bits, "-bit ", type.empty() ? "?" : type,
                                 ": not supported; loft reads 8-bit float (FP8 E4M3) weights"));
  if (w.contains("symmetric") && w["symmetric"] == false)
    f.fail(key + ".weights.symmetric", "is false: asymmetric FP8 weights are not supported");
  if (strategy == "tensor") return Fp8Checkpoint::Granularity::Tensor;
  if (strategy == "channel") return Fp8Checkpoint::Granularity::Channel;
  f.fail(key + ".weights.strategy",
         cat("is '", strategy, "': not supported (FP8 weights per tensor or per channel)"));
}

Fp8Checkpoint parse_compressed_tensors(const QuantFields& f) {
  Fp8Checkpoint c;
  c.quant_method = "compressed-tensors";
  c.scale_name = "weight_scale";
  c.zero_point_name = "weight_zero_point";
  c.format = f.string("format");
  if (!c.format.empty()) check_ct_format(f, "format", c.format);
  const json& sparsity = f.get("sparsity_config");
  if (sparsity.is_object() && sparsity.value("format", std::string("dense")) != "dense")
    f.fail("sparsity_config", cat("is ", sparsity.dump(), ": sparse weights are not supported"));
  const json& groups = f.get("config_groups");
  if (!groups.is_object() || groups.empty())
    f.fail("config_groups", cat("must be a non-empty object, got ", groups.dump()));
  std::optional<Fp8Checkpoint::Granularity> strategy;
  for (const auto& [name, g] : groups.items()) {
    const auto s = ct_group_strategy(f, name, g);
    if (strategy && *strategy != s)
      f.fail("config_groups", "mix per-tensor and per-channel weights: not supported");
    strategy = s;
    if (c.format.empty() && g.contains("format") && g["format"].is_string()) c.format = g["format"];
  }
  if (c.format.empty()) f.fail("format", "is missing (expected float-quantized)");
  c.granularity = *strategy;
  c.not_quantized = f.strings("ignore");
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
    throw Error(cat(source, ": field quantization_config must be an object, got ", qc.dump()));
  const QuantFields f(qc, source);
  const std::string method = f.string("quant_method");
  const auto it = parsers().find(method);
  if (it == parsers().end())
    f.fail("quant_method", cat(method.empty() ? "is missing" : "is '" + method + "'",
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
