// Shared by the export tests: an adapter of each method trained a little on stories260K (so it
// matters), saved as finetune saves it, and the perplexity `loft evaluate` reports for a folder.
#pragma once
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/peft/halo_weight.h"
#include "models/llama/loading.h"
#include "tests/common/cli_capture.h"
#include "tests/common/test_util.h"
#include "tests/common/train_a_little.h"

namespace loft::test {

inline std::filesystem::path stories_dir() { return data_path("models/stories260K-hf"); }
inline std::filesystem::path ppl_text() { return data_path("tinystories/tinystories_sample.txt"); }

inline MethodOptions export_method(const std::string& method) {
  MethodOptions m;
  m.method = method;
  m.lora = {4, 8.0f};
  m.targets = parse_lora_targets("all");
  if (method == "halo") m.get<HaloOptions>() = {1, quant::LowpFormat::E4M3};
  apply_method_invariants(m);
  return m;
}

// Trains `steps` steps of `method` on `model_dir` and saves the adapter to `adapter_dir`; returns
// the trained model (CPU).
inline std::unique_ptr<llama::LlamaModel> train_adapter(const std::string& method,
                                                        const std::filesystem::path& model_dir,
                                                        const std::filesystem::path& adapter_dir,
                                                        uint32_t steps = 4) {
  const MethodOptions m = export_method(method);
  std::mt19937_64 rng(5);
  auto model = llama::load_model(model_dir, Device::cpu(), make_linear_factory(m, rng));
  train_a_little(*model, steps);
  save_peft_adapter(adapter_dir, llama::extract_adapter(*model, m, model_dir.string()));
  return model;
}

// The mean NLL `loft evaluate --task ppl` reports; `extra` adds --adapter/--method.
inline double evaluate_nll(const std::filesystem::path& model_dir, std::vector<std::string> extra = {}) {
  std::vector<std::string> args{"evaluate", "--model", model_dir.string(), "--task", "ppl", "--data",
                                ppl_text().string(), "--json", "--device", "cpu"};
  args.insert(args.end(), extra.begin(), extra.end());
  const CliResult r = run_cli_captured(args);
  EXPECT_EQ(r.code, 0) << r.err;
  if (r.code != 0) return NAN;
  return nlohmann::json::parse(r.out)["nll"].get<double>();
}

// `loft export ...`, expecting success.
inline CliResult run_export(std::vector<std::string> args) {
  args.insert(args.begin(), "export");
  CliResult r = run_cli_captured(args);
  EXPECT_EQ(r.code, 0) << r.err;
  return r;
}

// The safetensors formats a round trip covers, as export_merged takes them.
inline const std::vector<std::string>& safetensors_formats() {
  static const std::vector<std::string> f{"bf16", "fp8:channel", "fp8:block", "fp8:tensor"};
  return f;
}
inline bool is_fp8_format(const std::string& format) { return format.rfind("fp8", 0) == 0; }

// `loft export` of `model` merged with `adapter` in `format` ("bf16" or "fp8:<layout>") into
// dir/x-<bf16|layout>, expecting success; returns that folder.
inline std::filesystem::path export_merged(const std::filesystem::path& model, const std::filesystem::path& adapter,
                                           const std::string& format, const std::filesystem::path& dir) {
  const bool fp8 = is_fp8_format(format);
  const std::filesystem::path out = dir / ("x-" + format.substr(fp8 ? 4 : 0));
  std::vector<std::string> args{"--model", model.string(), "--adapter", adapter.string(),
                                "--format", fp8 ? "fp8" : "bf16", "--out", out.string()};
  if (fp8) args.insert(args.end(), {"--fp8-layout", format.substr(4)});
  run_export(args);
  return out;
}

}  // namespace loft::test
