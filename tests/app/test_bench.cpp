// `loft bench` through the real CLI on the CPU: the JSON report and its arithmetic, method lists
// (each on a fresh model), the per-part breakdown, the text report, gradient checkpointing
// reaching the model, a real checkpoint, and usage errors.
#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>

#include "engine/device/device_info.h"
#include "engine/device/profile.h"
#include "engine/parallel/nccl_comm.h"
#include "engine/tensor/device.h"
#include "models/llama/bench_model.h"
#include "models/llama/config.h"
#include "app/commands.h"
#include "tests/common/cli_capture.h"
#include "tests/common/test_util.h"

namespace loft::test {
namespace {

// r·Σ(in + out) over the 7 projections of every layer: the LoRA parameters of a config.
int64_t lora_params(const llama::LlamaConfig& c, int64_t r) {
  int64_t n = 0;
  for (const auto& p : c.projections()) n += r * (p.in + p.out);
  return n * c.num_layers;
}

nlohmann::json bench_json(std::vector<std::string> args) {
  args.insert(args.begin(), {"bench", "step", "--device", "cpu", "--json"});
  const CliResult r = test::run_cli_captured(args);
  EXPECT_EQ(r.code, 0) << r.err;
  return nlohmann::json::parse(r.out);  // exactly one JSON object, nothing else
}

// The one method of a single-method run.
nlohmann::json only_method(const nlohmann::json& j) {
  EXPECT_EQ(j["methods"].size(), 1u);
  return j["methods"][0];
}

// llama-70b on the CPU (f32 weights: 276 GB) is answered "does not fit" from the estimate, at
// once, for each method, instead of being killed by the kernel part way through building it.
TEST(BenchCommand, ACpuShapeBeyondTheRamDoesNotFitAtOnce) {
  const nlohmann::json j = bench_json({"--shape", "llama-70b", "--method", "lora,qlora", "--steps", "1"});
  for (const auto& m : j["methods"]) {
    if (int64_t(m["estimated_peak_bytes"]) <= device_memory_bytes(Device::cpu()))
      GTEST_SKIP() << "this machine's RAM holds a 70B model in f32";
    EXPECT_EQ(m["fits"], false) << m.dump();
    EXPECT_NE(m["error"].get<std::string>().find("GiB of RAM"), std::string::npos) << m.dump();
  }
}

TEST(BenchCommand, TinyShapeJson) {
  const CliResult r = test::run_cli_captured({"bench", "step", "--shape", "tiny", "--device", "cpu",
                                              "--steps", "2", "--warmup", "1", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_NE(r.err.find("bench    tiny"), std::string::npos) << "plan on stderr: " << r.err;
  const llama::LlamaConfig c = *llama::bench_shape_config("tiny");
  EXPECT_EQ(j["shape"], "tiny");
  EXPECT_TRUE(j["model"].is_null());
  EXPECT_EQ(j["batch"], 4);
  EXPECT_EQ(j["seq"], 512);
  EXPECT_EQ(j["steps"], 2);
  EXPECT_EQ(j["profiled_steps"], 2);
  EXPECT_EQ(j["device"], "cpu");
  EXPECT_EQ(j["device_name"], "cpu");
  EXPECT_TRUE(j["device_uuid"].is_null());  // a GPU's as nvidia-smi prints it
  EXPECT_TRUE(j["device_memory_bytes"].is_null());  // the CPU has no fixed memory to fit into
  EXPECT_EQ(j["grad_checkpointing"], false);
  EXPECT_EQ(j["base_parameters"], llama::llama_parameter_count(c));
  const auto m = only_method(j);
  EXPECT_EQ(m["method"], "lora");
  EXPECT_EQ(m["options"], nlohmann::json({{"rank", 64}, {"alpha", 16.0}}));
  EXPECT_EQ(m["fits"], true);
  const int64_t trainable = lora_params(c, 64);
  EXPECT_EQ(m["trainable_parameters"], trainable);
  EXPECT_EQ(m["parameters"], llama::llama_parameter_count(c) + trainable);

  const auto times = m["step_times_s"].get<std::vector<double>>();
  ASSERT_EQ(times.size(), 2u);
  const double med = m["step_s"], mean = m["step_s_mean"];
  EXPECT_GT(times[0], 0);
  EXPECT_GT(times[1], 0);
  EXPECT_DOUBLE_EQ(med, (times[0] + times[1]) / 2);
  EXPECT_DOUBLE_EQ(mean, (times[0] + times[1]) / 2);
  EXPECT_NEAR(double(m["tokens_per_s"]), 4 * 512 / med, 1e-9 * 4 * 512 / med);

  // The peak holds at least the weights, the adapter with its grads and AdamW moments (fp32,
  // 16 B/param) and one layer's [T, intermediate] activations; far less than a GiB.
  const double peak = m["peak_bytes"];
  const double floor_bytes = 4.0 * double(llama::llama_parameter_count(c)) +
                             16.0 * double(trainable) + 4.0 * 4 * 512 * 172;
  EXPECT_GT(peak, floor_bytes);
  EXPECT_LT(peak, double(1 << 30));
  const double loss = m["last_loss"];
  EXPECT_NEAR(loss, std::log(512.0), 0.5);  // three small steps from a near-uniform model
}

// Each method of a list runs on its own fresh model and reports its options, times, peak and a
// breakdown that accounts for the whole profiled step.
// --prompt-fraction masks each row's first labels as a chat template masks the prompt: the plan
// and the JSON say how many, and the loss averages over the targets left (a loss near ln(vocab)
// on random tokens either way, so it stays finite and positive).
TEST(BenchCommand, PromptFractionMasksEachRowsFirstLabels) {
  const nlohmann::json j = bench_json({"--shape", "tiny", "--batch", "2", "--seq", "64", "--steps", "1",
                                       "--warmup", "0", "--profile-steps", "0", "--prompt-fraction", "0.25"});
  EXPECT_EQ(j["masked_prompt_tokens"], 16);
  const double loss = only_method(j)["last_loss"].get<double>();
  EXPECT_TRUE(std::isfinite(loss) && loss > 0) << loss;
  const CliResult r = test::run_cli_captured({"bench", "step", "--shape", "tiny", "--device", "cpu", "--batch", "1",
                                              "--seq", "40", "--steps", "1", "--warmup", "0", "--profile-steps", "0",
                                              "--prompt-fraction", "0.5"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE((r.out + r.err).find("the first 20 of each row's 40 labels have no target"), std::string::npos)
      << r.out << r.err;
  EXPECT_EQ(bench_json({"--shape", "tiny", "--steps", "1", "--warmup", "0", "--profile-steps", "0"})["masked_prompt_tokens"],
            0);
}

TEST(BenchCommand, MethodListWithBreakdown) {
  const auto j = bench_json({"--shape", "tiny", "--method", "lora,qlora,halo", "--batch", "2",
                             "--seq", "64", "--steps", "2", "--warmup", "1", "--profile-steps",
                             "2", "--halo-format", "int8", "--halo-level", "0"});
  ASSERT_EQ(j["methods"].size(), 3u);
  const std::vector<std::string> names = {"lora", "qlora", "halo"};
  for (size_t i = 0; i < names.size(); ++i) {
    const auto& m = j["methods"][i];
    SCOPED_TRACE(names[i]);
    EXPECT_EQ(m["method"], names[i]);
    for (const char* key : {"options", "fits", "tokens_per_s", "step_s", "step_s_mean",
                            "step_times_s", "peak_bytes", "trainable_parameters", "parameters",
                            "last_loss", "profiled_step_s", "breakdown_s"})
      EXPECT_TRUE(m.contains(key)) << key;
    EXPECT_GT(double(m["tokens_per_s"]), 0);
    EXPECT_GT(double(m["peak_bytes"]), 0);
    EXPECT_TRUE(std::isfinite(double(m["last_loss"])));

    const auto& b = m["breakdown_s"];
    ASSERT_EQ(b.size(), size_t(prof::kParts));
    double sum = 0;
    for (int p = 0; p < prof::kParts; ++p) {
      const char* part = prof::part_name(prof::Part(p));
      ASSERT_TRUE(b.contains(part)) << part;
      EXPECT_GE(double(b[part]), 0) << part;
      sum += double(b[part]);
    }
    // The parts are exhaustive (Other takes what no scope claims), so they add up to the
    // profiled step; the wall clock around the steps adds only the start/stop bookkeeping.
    const double step = m["profiled_step_s"];
    EXPECT_GT(step, 0);
    EXPECT_NEAR(sum, step, 0.05 * step);
    for (const char* part :
         {"frozen_gemm", "adapter", "attention", "elementwise", "loss_head", "optimizer"})
      EXPECT_GT(double(b[part]), 0) << part;
    EXPECT_EQ(double(b["falqon_update"]), 0.0);  // no FALQON code ran
  }
  EXPECT_EQ(j["methods"][0]["options"], nlohmann::json({{"rank", 64}, {"alpha", 16.0}}));
  EXPECT_EQ(j["methods"][1]["options"], nlohmann::json({{"rank", 64}, {"alpha", 16.0}}));
  EXPECT_EQ(j["methods"][2]["options"],
            nlohmann::json(
                {{"rank", 64}, {"alpha", 16.0}, {"halo_level", 0}, {"halo_format", "int8"}, {"backbone", "dense"}, {"halo_transposed", "per-step"}}));
  // Same adapter shapes whatever stores the frozen weight.
  EXPECT_EQ(j["methods"][0]["trainable_parameters"], j["methods"][2]["trainable_parameters"]);
}

// --profile-ops: each part's time by op inside the real step; the ops of a part sum to the
// part, and the ops a method runs appear where they run (FALQON's quantizer in quant_hadamard,
// its E4M3 products in frozen_gemm and adapter, named by shape and code types, its row update,
// the norms and SwiGLU in elementwise, the attention). Without profiled steps, or with --gpus, it
// is a usage error.
TEST(BenchCommand, ProfileOpsBreaksEachPartDownByOp) {
  const auto m = only_method(bench_json({"--shape", "tiny", "--method", "falqon", "--batch", "2", "--seq", "64",
                                         "--steps", "1", "--warmup", "1", "--profile-steps", "2", "--profile-ops"}));
  ASSERT_TRUE(m.contains("op_breakdown")) << m.dump();
  const auto& ops = m["op_breakdown"];
  for (const char* op : {"falqon_update/falqon_after_steps", "elementwise/rmsnorm",
                         "elementwise/swiglu_backward", "attention/attention", "attention/attention_backward",
                         "loss_head/cross_entropy"}) {
    ASSERT_TRUE(ops.contains(op)) << op << " in " << ops.dump();
    EXPECT_GT(double(ops[op]["s"]), 0) << op;
    EXPECT_GE(int64_t(ops[op]["calls"]), 1) << op;
  }
  // tiny: hidden 64, intermediate 172; 2 x 64 tokens. The products by shape: gate/up's forward.
  ASSERT_TRUE(ops.contains("frozen_gemm/gemm_lowp 128x172x64 F8_E4M3xF8_E4M3")) << ops.dump();
  EXPECT_EQ(int64_t(ops["frozen_gemm/gemm_lowp 128x172x64 F8_E4M3xF8_E4M3"]["calls"]), 4) << "gate and up, 2 layers";
  const auto any_op = [&](const std::string& prefix) {
    return std::any_of(ops.items().begin(), ops.items().end(),
                       [&](const auto& kv) { return kv.key().rfind(prefix, 0) == 0; });
  };
  EXPECT_TRUE(any_op("adapter/gemm_lowp ")) << ops.dump();
  // The quantizer by shape, code type and transposed copy: gate's and up's dY.
  EXPECT_TRUE(any_op("quant_hadamard/quantize [128, 172] F8_E5M2 +t")) << ops.dump();
  EXPECT_EQ(int64_t(ops["attention/attention"]["calls"]), 2) << "one a layer, per profiled step";
  for (const auto& [part, seconds] : m["breakdown_s"].items()) {
    double sum = 0;
    for (const auto& [op, time] : ops.items())
      if (op.rfind(part + "/", 0) == 0) sum += double(time["s"]);
    EXPECT_NEAR(sum, double(seconds), 1e-6 + 1e-6 * double(seconds)) << part;
  }
  const CliResult text = test::run_cli_captured({"bench", "step", "--shape", "tiny", "--device", "cpu", "--method",
                                                 "lora", "--batch", "1", "--seq", "32", "--steps", "1", "--warmup",
                                                 "0", "--profile-steps", "1", "--profile-ops"});
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_TRUE(contains(text.out, "lora: ms per profiled step by op")) << text.out;
  EXPECT_TRUE(contains(text.out, "frozen_gemm/gemm 32x172x64 tb")) << text.out;  // 1 x 32 tokens, gate/up
  for (const auto& args : {std::vector<std::string>{"--profile-steps", "0", "--profile-ops"},
                           std::vector<std::string>{"--gpus", "1", "--profile-ops"}}) {
    std::vector<std::string> all = {"bench", "step", "--shape", "tiny", "--steps", "1"};
    all.insert(all.end(), args.begin(), args.end());
    const CliResult r = test::run_cli_captured(all);
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_TRUE(contains(r.err, "--profile-ops")) << r.err;
  }
}

// The previous method's model is freed before the next is built and the peak is reset per
// method, so the same method twice reports the same peak, not the sum.
TEST(BenchCommand, PeaksDoNotAddAcrossMethods) {
  const auto j = bench_json({"--shape", "tiny", "--method", "lora,lora", "--batch", "1", "--seq",
                             "32", "--steps", "1", "--warmup", "1", "--profile-steps", "0"});
  ASSERT_EQ(j["methods"].size(), 2u);
  EXPECT_EQ(j["methods"][0]["peak_bytes"], j["methods"][1]["peak_bytes"]);
  EXPECT_FALSE(j["methods"][0].contains("breakdown_s"));  // --profile-steps 0: no breakdown
  EXPECT_DOUBLE_EQ(double(j["methods"][0]["last_loss"]), double(j["methods"][1]["last_loss"]));
}

TEST(BenchCommand, StatisticsOverOddStepCountsAndRankOption) {
  const auto m = only_method(bench_json({"--shape", "tiny", "--batch", "2", "--seq", "24",
                                         "--steps", "3", "--warmup", "0", "--lora-rank", "4",
                                         "--lora-alpha", "8"}));
  auto times = m["step_times_s"].get<std::vector<double>>();
  ASSERT_EQ(times.size(), 3u);
  std::sort(times.begin(), times.end());
  EXPECT_DOUBLE_EQ(double(m["step_s"]), times[1]);
  EXPECT_NEAR(double(m["step_s_mean"]), (times[0] + times[1] + times[2]) / 3, 1e-12);
  EXPECT_EQ(m["trainable_parameters"], lora_params(*llama::bench_shape_config("tiny"), 4));
  EXPECT_EQ(m["options"]["alpha"], 8.0);
}

// bench takes finetune's --lora-rank/--lora-alpha; its earlier --rank/--alpha still work, hidden
// from --help, and one name with its old spelling is refused.
TEST(BenchCommand, OldRankAndAlphaSpellingsAreHiddenAliases) {
  const std::vector<std::string> shape{"--shape", "tiny", "--batch", "1", "--seq", "16", "--steps", "1", "--warmup", "0"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> a = shape;
    a.insert(a.end(), extra.begin(), extra.end());
    return only_method(bench_json(a));
  };
  const auto now = with({"--lora-rank", "4", "--lora-alpha", "8"}), old = with({"--rank", "4", "--alpha", "8"});
  EXPECT_EQ(now["options"], old["options"]);
  EXPECT_EQ(now["trainable_parameters"], old["trainable_parameters"]);
  const CliResult help = test::run_cli_captured({"bench", "step", "--help"});
  EXPECT_TRUE(test::contains(help.out, "--lora-rank"));
  EXPECT_EQ(help.out.find("--rank"), std::string::npos) << help.out;
  const CliResult both = test::run_cli_captured({"bench", "step", "--shape", "tiny", "--rank", "4", "--lora-rank", "8"});
  EXPECT_EQ(both.code, 2);
  EXPECT_TRUE(test::contains(both.err, "--rank is the old name of --lora-rank")) << both.err;
}

TEST(BenchCommand, GradCheckpointingSavesMemoryAndKeepsTheMath) {
  const std::vector<std::string> common = {"--shape", "tiny", "--batch", "2", "--seq", "256",
                                           "--steps", "1", "--warmup", "1"};
  auto with_gc = common;
  with_gc.push_back("--grad-checkpointing");
  const auto plain = bench_json(common), gc = bench_json(with_gc);
  EXPECT_EQ(gc["grad_checkpointing"], true);
  const auto pm = only_method(plain), gm = only_method(gc);
  EXPECT_LT(double(gm["peak_bytes"]), double(pm["peak_bytes"]));
  EXPECT_NEAR(double(gm["last_loss"]), double(pm["last_loss"]), 1e-6 * double(pm["last_loss"]));
}

TEST(BenchCommand, TextReportHasPlanAndTable) {
  const CliResult r =
      test::run_cli_captured({"bench", "step", "--shape", "tiny", "--device", "cpu", "--batch", "1",
                              "--seq", "16", "--steps", "1", "--warmup", "0", "--method",
                              "lora,halo"});
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* part : {"bench    tiny: 2 layers, hidden 64, intermediate 172, 8 heads / 4 KV",
                           "methods  lora, halo, each on a fresh model",
                           "method   lora r=64 alpha=16 on q,k,v,o,gate,up,down",
                           "method   halo r=64 alpha=16 halo_level=2 halo_format=fp8 backbone=dense halo_transposed=per-step on",
                           "batch    1 x 16 = 16 tokens/step",
                           "0 warm-up + 1 timed + 2 profiled steps", "device   cpu (cpu), F32",
                           "tiny, batch 1 x seq 16", "ms per profiled step", "s/step",
                           "tokens/s", "peak GiB", "\nlora ", "\nhalo "})
    EXPECT_TRUE(contains(r.out, part));
  for (int p = 0; p < prof::kParts; ++p)
    EXPECT_TRUE(contains(r.out, prof::part_name(prof::Part(p))));
  EXPECT_FALSE(contains(r.out, "\nfit ")) << "no device memory to fit into on the CPU";
}

// The step is finetune's: the grad norm is clipped at the method's default (lora 0.3, halo off)
// unless --max-grad-norm says otherwise, and the clip reaches the update (a clip far below the
// norm leaves AdamW's update at about lr·g/eps, so the next step's loss differs).
TEST(BenchCommand, ClipsTheGradNormAsFinetune) {
  const std::vector<std::string> common = {"--shape", "tiny", "--batch", "1", "--seq", "16",
                                           "--steps", "1", "--warmup", "1", "--profile-steps", "0"};
  auto with = [&](std::vector<std::string> extra) {
    extra.insert(extra.begin(), common.begin(), common.end());
    return bench_json(extra);
  };
  const auto defaults = with({"--method", "lora,halo,falqon"});
  ASSERT_EQ(defaults["methods"].size(), 3u);
  EXPECT_EQ(defaults["methods"][0]["max_grad_norm"], 0.3);
  EXPECT_EQ(defaults["methods"][1]["max_grad_norm"], 0.0);
  EXPECT_EQ(defaults["methods"][2]["max_grad_norm"], 3.0);
  const auto off = with({"--max-grad-norm", "0"}), tight = with({"--max-grad-norm", "1e-9"});
  EXPECT_EQ(only_method(tight)["max_grad_norm"], 1e-9);
  EXPECT_NE(double(only_method(off)["last_loss"]), double(only_method(tight)["last_loss"]));

  const CliResult r = test::run_cli_captured(
      {"bench", "step", "--device", "cpu", "--shape", "tiny", "--batch", "1", "--seq", "16", "--steps",
       "1", "--warmup", "0", "--profile-steps", "0", "--method", "lora,halo"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "method   lora r=64 alpha=16 on q,k,v,o,gate,up,down, grad-norm clip 0.3\n"));
  EXPECT_TRUE(contains(r.out, "backbone=dense halo_transposed=per-step on q,k,v,o,gate,up,down, grad-norm clip off\n"));
}

TEST(BenchCommand, RealCheckpointFolder) {
  const std::string dir = data_path("models/stories260K-hf").string();
  const auto j = bench_json({"--model", dir, "--batch", "1", "--seq", "16", "--steps", "1",
                             "--warmup", "0", "--lora-rank", "8"});
  const llama::LlamaConfig c = llama::load_llama_config(dir);
  EXPECT_EQ(j["model"], dir);
  EXPECT_TRUE(j["shape"].is_null());
  const auto m = only_method(j);
  EXPECT_EQ(m["trainable_parameters"], lora_params(c, 8));
  EXPECT_EQ(m["parameters"], llama::llama_parameter_count(c) + lora_params(c, 8));
  // A trained model on random tokens: the loss is finite and well above zero.
  EXPECT_GT(double(m["last_loss"]), 1.0);
}

TEST(BenchCommand, UsageErrorsNameTheValue) {
  struct Case {
    std::vector<std::string> args;
    std::vector<const char*> says;
  };
  const Case cases[] = {
      {{"--shape", "llama-65b"}, {"llama-65b"}},
      {{"--shape", "tiny", "--method", "qlora-nf4"}, {"--method", "qlora-nf4"}},
      {{"--shape", "tiny", "--method", "lora,bogus"}, {"--method", "bogus"}},
      {{"--shape", "tiny", "--method", "lora,,qlora"}, {"--method"}},
      {{"--shape", "tiny", "--method", "lora,"}, {"--method"}},
      {{"--shape", "tiny", "--method", ""}, {"--method"}},
      {{"--shape", "tiny", "--method", "lora,halo", "--halo-format", "fp16"}, {"--halo-format", "fp16"}},
      {{"--shape", "tiny", "--method", "halo", "--halo-level", "7"}, {"--halo-level", "7"}},
      {{}, {"--shape"}},
      {{"--shape", "tiny", "--model", "/tmp"}, {"--model"}},
      {{"--shape", "tiny", "--batch", "0"}, {"--batch"}},
      {{"--shape", "tiny", "--warmup", "-1"}, {"--warmup"}},
      {{"--shape", "tiny", "--profile-steps", "-1"}, {"--profile-steps"}},
      {{"--shape", "tiny", "--lora-alpha", "0"}, {"--lora-alpha"}},
      {{"--shape", "tiny", "--alpha", "0"}, {"--alpha"}},
      {{"--shape", "tiny", "--max-grad-norm", "-1"}, {"--max-grad-norm"}},
      {{"--shape", "tiny", "--max-grad-norm", "nan"}, {"--max-grad-norm"}},
      {{"--shape", "tiny", "--checkpoints-on-gpu=maybe"}, {"--checkpoints-on-gpu"}},
      {{"--shape", "tiny", "--prompt-fraction", "1"}, {"--prompt-fraction"}},
      {{"--shape", "tiny", "--prompt-fraction", "-0.1"}, {"--prompt-fraction"}},
      {{"--shape", "tiny", "--prompt-fraction", "nan"}, {"--prompt-fraction"}},
      {{"--shape", "tiny", "--prompt-fraction", "half"}, {"--prompt-fraction"}},
      {{"--model", "/nonexistent/model"}, {"/nonexistent/model"}},
      {{"--shape", "tiny", "--device", "tpu"}, {"tpu"}},
      {{"eval", "--shape", "tiny", "--task", "hellaswag"}, {"--task", "hellaswag"}},
      {{"eval", "--shape", "tiny"}, {"--task"}},
      {{"eval", "--task", "decode"}, {"--shape"}},
      {{"eval", "--shape", "tiny", "--task", "decode", "--slots", "0"}, {"--slots", "0"}},
      {{"eval", "--shape", "tiny", "--task", "decode", "--max-gen-toks", "-2"}, {"--max-gen-toks", "-2"}},
      {{"eval", "--shape", "tiny", "--task", "gsm8k", "--limit", "-5"}, {"--limit", "-5"}},
      {{"eval", "--shape", "tiny", "--task", "decode", "--batch", "0"}, {"--batch", "0"}},
      {{"eval", "--shape", "tiny", "--task", "mmlu"}, {"--tokenizer"}},
      {{"eval", "--shape", "tiny", "--task", "decode", "--method", "lora"}, {"--method"}},
      {{"kernels", "--shape", "tiny", "--method", "lora"}, {"--method"}},
      {{"kernels"}, {"--shape"}},
      {{"kernels", "--shape", "tiny", "--repeats", "0"}, {"--repeats"}},
      {{"kernels", "--shape", "tiny", "--repeats", "nan"}, {"--repeats"}},
      {{"kernels", "--shape", "tiny", "--only", "atention"}, {"--only", "'atention'", "attention_backward"}},
  };
  for (const Case& c : cases) {
    // A case names its subcommand first, else it is step's.
    const bool sub = !c.args.empty() && !c.args.front().starts_with("--");
    std::vector<std::string> args = {"bench", sub ? c.args.front() : "step"};
    args.insert(args.end(), c.args.begin() + (sub ? 1 : 0), c.args.end());
    if (std::find(c.args.begin(), c.args.end(), "--device") == c.args.end())
      args.insert(args.end(), {"--device", "cpu"});
    const CliResult r = test::run_cli_captured(args);
    EXPECT_EQ(r.code, 2) << c.says[0] << ": " << r.err;
    for (const char* s : c.says) EXPECT_TRUE(contains(r.err, s));
    EXPECT_FALSE(contains(r.err, "bench    ")) << "nothing ran: " << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
}

// --gpus: what does not go with it is named before anything runs, and so is a machine that
// cannot run it (a build without NCCL, fewer GPUs than asked for).
TEST(BenchCommand, GpusUsageErrors) {
  struct Case {
    std::vector<std::string> args;
    std::vector<const char*> says;
  };
  std::vector<Case> cases = {
      {{"--gpus", "2", "--device", "cpu"}, {"--device cpu", "--gpus 2"}},
      {{"kernels", "--gpus", "2"}, {"--gpus"}},
      {{"eval", "--task", "decode", "--gpus", "2"}, {"--gpus"}},
      {{"--gpus", "2", "--batch", "0"}, {"--batch"}},  // the options are checked first
      {{"--shard-backbone"}, {"--shard-backbone", "--gpus"}},
  };
  if (!nccl_compiled())
    cases.push_back({{"--gpus", "2"}, {"NCCL"}});
  else if (cuda_device_count() < 64)
    cases.push_back({{"--gpus", "64"}, {"--gpus 64", "this machine has"}});
  for (const Case& c : cases) {
    const bool sub = !c.args.front().starts_with("--");
    std::vector<std::string> args = {"bench", sub ? c.args.front() : "step", "--shape", "tiny"};
    args.insert(args.end(), c.args.begin() + (sub ? 1 : 0), c.args.end());
    const CliResult r = test::run_cli_captured(args);
    EXPECT_EQ(r.code, 2) << c.says[0] << ": " << r.err;
    for (const char* s : c.says) EXPECT_TRUE(contains(r.err, s)) << s << ": " << r.err;
    EXPECT_FALSE(contains(r.err, "bench    ")) << "nothing ran: " << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
}

// The one-device bench reports itself as a world of one.
TEST(BenchCommand, JsonSaysTheWorldSize) {
  const auto j = bench_json({"--shape", "tiny", "--batch", "1", "--seq", "16", "--steps", "1",
                             "--warmup", "0", "--profile-steps", "0"});
  EXPECT_TRUE(j["gpus"].is_null());
  EXPECT_EQ(j["world_size"], 1);
  EXPECT_EQ(j["shard_backbone"], false);
  EXPECT_EQ(only_method(j)["tokens_per_step"], 16);
}

// The data-side bench: encode throughput and the pipeline's tokens/s, reported per line (the
// figures themselves are timings and not checked).
TEST(BenchCommand, TokenizerAndDataPipeline) {
  const CliResult r = test::run_cli_captured({"bench", "data", "--tokenizer", data_path("models/stories260K-hf").string(),
                                              "--data", data_path("gsm8k/test_first1000.jsonl").string(),
                                              "--seq", "256", "--batch", "2"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "bpe sentencepiece-style"));
  EXPECT_TRUE(contains(r.out, "encode    1000 records"));
  EXPECT_TRUE(contains(r.out, "MB/s"));
  EXPECT_TRUE(contains(r.out, "of 2 x 256"));
  EXPECT_TRUE(contains(r.out, "tokens/s (template, ids, packing; 1 thread)"));
  const CliResult no_data = test::run_cli_captured({"bench", "data", "--tokenizer", data_path("models/stories260K-hf").string()});
  EXPECT_EQ(no_data.code, 2);
  EXPECT_TRUE(contains(no_data.err, "--data is required")) << no_data.err;
  const CliResult both = test::run_cli_captured({"bench", "data", "--tokenizer", "x", "--data", "y", "--shape", "tiny"});
  EXPECT_EQ(both.code, 2);
  EXPECT_TRUE(contains(both.err, "--shape")) << both.err;
}

// The one command bench was, spelled as before, runs the subcommand it is now (for one release)
// and says so; a command line that names a subcommand, and other commands, are left alone.
TEST(BenchCommand, OldSpellingsRunTheirSubcommand) {
  std::ostringstream note;
  using Args = std::vector<std::string>;
  EXPECT_EQ(app::legacy_bench_args({"loft", "bench", "--shape", "tiny"}, note), (Args{"loft", "bench", "step", "--shape", "tiny"}));
  EXPECT_EQ(app::legacy_bench_args({"loft", "bench", "--kernels", "--shape", "tiny"}, note),
            (Args{"loft", "bench", "kernels", "--shape", "tiny"}));
  EXPECT_EQ(app::legacy_bench_args({"loft", "bench", "--shape", "tiny", "--eval", "decode"}, note),
            (Args{"loft", "bench", "eval", "--shape", "tiny", "--task", "decode"}));
  EXPECT_EQ(app::legacy_bench_args({"loft", "bench", "--eval=mmlu"}, note), (Args{"loft", "bench", "eval", "--task=mmlu"}));
  EXPECT_EQ(app::legacy_bench_args({"loft", "bench", "--tokenizer", "t", "--data", "d"}, note),
            (Args{"loft", "bench", "data", "--tokenizer", "t", "--data", "d"}));
  EXPECT_EQ(app::legacy_bench_args({"loft", "bench", "--tokenizer", "t", "--shape", "tiny"}, note),
            (Args{"loft", "bench", "step", "--tokenizer", "t", "--shape", "tiny"}));
  EXPECT_TRUE(contains(note.str(), "'loft bench' without a subcommand is 'loft bench kernels' now")) << note.str();
  std::ostringstream quiet;
  for (const Args& same : {Args{"loft", "bench", "step", "--shape", "tiny"}, Args{"loft", "bench", "--help"},
                           Args{"loft", "bench"}, Args{"loft", "info", "--kernels"}})
    EXPECT_EQ(app::legacy_bench_args(same, quiet), same);
  EXPECT_TRUE(quiet.str().empty()) << quiet.str();
  // Through the CLI: the old spelling gives the new one's JSON, with the note on stderr.
  const Args tiny{"--shape", "tiny", "--device", "cpu", "--batch", "1", "--seq", "16", "--steps", "1", "--warmup", "0",
                  "--profile-steps", "0", "--lora-rank", "4", "--json"};
  Args old_args{"bench"}, new_args{"bench", "step"};
  old_args.insert(old_args.end(), tiny.begin(), tiny.end());
  new_args.insert(new_args.end(), tiny.begin(), tiny.end());
  const CliResult old_r = test::run_cli_captured(old_args), new_r = test::run_cli_captured(new_args);
  ASSERT_EQ(old_r.code, 0) << old_r.err;
  ASSERT_EQ(new_r.code, 0) << new_r.err;
  EXPECT_TRUE(contains(old_r.err, "is 'loft bench step' now"));
  EXPECT_FALSE(contains(new_r.err, "without a subcommand"));
  EXPECT_EQ(nlohmann::json::parse(old_r.out)["methods"][0]["trainable_parameters"],
            nlohmann::json::parse(new_r.out)["methods"][0]["trainable_parameters"]);
}

// Each subcommand runs: kernels prints its table, eval --task decode times a shape's decoding.
TEST(BenchCommand, KernelsAndEvalSubcommands) {
  const CliResult k = test::run_cli_captured({"bench", "kernels", "--shape", "tiny", "--device", "cpu", "--batch", "1",
                                              "--seq", "16", "--repeats", "1"});
  ASSERT_EQ(k.code, 0) << k.err;
  EXPECT_TRUE(contains(k.out, "kernels  tiny at 1 x 16 tokens on cpu (cpu), 1 calls each"));
  EXPECT_TRUE(contains(k.out, "attention_backward b=1 s=16"));  // a table op, named by its row's sizes
  const CliResult e = test::run_cli_captured({"bench", "eval", "--task", "decode", "--shape", "tiny", "--device", "cpu",
                                              "--batch", "2", "--seq", "8", "--max-gen-toks", "3", "--json"});
  ASSERT_EQ(e.code, 0) << e.err;
  const auto j = nlohmann::json::parse(e.out);
  EXPECT_EQ(j["task"], "decode");
  EXPECT_EQ(j["decode_steps"], 2);
}

}  // namespace
}  // namespace loft::test
