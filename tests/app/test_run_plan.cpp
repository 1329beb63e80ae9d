// The run plan (app/run_plan.h): what a finetune command line resolves to, the same for finetune,
// `finetune --plan` (the studio's preview) and bench. Checked against the registry's own defaults,
// so a method that changes its defaults changes what is expected here too.
#include <nlohmann/json.hpp>

#include "app/run_limits.h"
#include "app/run_plan.h"
#include "engine/core/error.h"
#include "engine/tensor/device.h"
#include "engine/peft/method_spec.h"
#include "models/llama/bench_model.h"
#include "models/llama/loading.h"
#include "tests/common/cli_capture.h"
#include "tests/common/every_method.h"
#include "tests/common/test_util.h"

namespace loft::test {
namespace {

using app::plan_run;
using app::RunPlan;
using app::RunRequest;

std::string stories() { return (source_dir() / "examples" / "stories260K").string(); }
std::string demo() { return (source_dir() / "examples" / "demo.jsonl").string(); }

// `finetune --model stories260K --data demo ... --plan` with `options` then `extra`: its JSON, or
// an empty object (and a failure naming its error) when it does not exit 0.
nlohmann::json plan_json(const std::vector<std::string>& options, const std::vector<std::string>& extra = {}) {
  std::vector<std::string> args = {"finetune", "--model", stories(), "--data", demo(), "--plan"};
  args.insert(args.end(), options.begin(), options.end());
  args.insert(args.end(), extra.begin(), extra.end());
  const CliResult r = run_cli_captured(args);
  EXPECT_EQ(r.code, 0) << r.err;
  return r.code == 0 ? nlohmann::json::parse(r.out) : nlohmann::json::object();
}

class RunPlanEveryMethod : public ::testing::TestWithParam<std::string> {};

// Left out, every value is the method's default; the micro-batch is the whole batch on the CPU
// and at most 4 rows on a GPU.
TEST_P(RunPlanEveryMethod, FillsTheMethodsDefaults) {
  const MethodDefaults d = method_defaults(GetParam());
  RunRequest r;
  r.method = GetParam();
  const RunPlan cpu = plan_run(r, Device::cpu()), gpu = plan_run(r, Device::cuda(0));
  EXPECT_EQ(cpu.method.method, GetParam());
  EXPECT_EQ(cpu.method.lora.rank, d.rank);
  if (GetParam() != "falqon") {  // FALQON fixes alpha = r
    EXPECT_EQ(cpu.method.lora.alpha, d.alpha);
  }
  EXPECT_EQ(cpu.lr, d.lr);
  EXPECT_EQ(cpu.schedule, d.schedule);
  EXPECT_EQ(cpu.warmup, d.warmup);
  EXPECT_EQ(cpu.max_grad_norm, d.max_grad_norm);
  EXPECT_EQ(cpu.batch, d.batch);
  EXPECT_EQ(cpu.micro_batch, d.batch);
  EXPECT_EQ(gpu.micro_batch, std::min<int64_t>(d.batch, 4));
  EXPECT_EQ(gpu.grad_accum() * gpu.micro_batch, d.batch);
  // Given, each value is kept.
  r.rank = 3;
  r.lr = 1e-3;
  r.schedule = "cosine";
  r.warmup = 2;
  r.max_grad_norm = 0;
  r.batch = 6;
  r.micro_batch = 2;
  const RunPlan given = plan_run(r, Device::cpu());
  EXPECT_EQ(given.method.lora.rank, 3);
  EXPECT_EQ(given.lr, 1e-3);
  EXPECT_EQ(given.schedule, "cosine");
  EXPECT_EQ(given.warmup, 2);
  EXPECT_EQ(given.max_grad_norm, 0);
  EXPECT_EQ(given.grad_accum(), 3);
}

INSTANTIATE_TEST_SUITE_P(All, RunPlanEveryMethod, every_method());

TEST(RunPlan, RefusesWhatCannotRun) {
  RunRequest r;
  r.method = "bogus";
  EXPECT_THROW(plan_run(r, Device::cpu()), UsageError);
  r.method = "lora";
  r.batch = 8;
  r.micro_batch = 3;
  try {
    plan_run(r, Device::cpu());
    ADD_FAILURE() << "8 rows in micro-batches of 3";
  } catch (const UsageError& e) {
    EXPECT_TRUE(contains(e.what(), "--batch 8 is not a multiple of --micro-batch 3")) << e.what();
  }
  r = {};
  r.method = "halo:nf4";  // a variant is bench's; finetune names the option
  EXPECT_THROW(plan_run(r, Device::cpu()), UsageError);
  r.variants = true;
  EXPECT_EQ(plan_run(r, Device::cpu()).method.method, "halo");
}

// A plan that does not fit says why instead of throwing: --seq beyond the model's positions.
TEST(RunPlan, JsonSaysWhetherItFits) {
  const llama::LlamaConfig cfg = llama::load_llama_config(stories());
  RunRequest r;
  r.seq = 64;
  const nlohmann::ordered_json ok = plan_run(r, Device::cpu()).to_json(cfg, Device::cpu());
  EXPECT_EQ(ok["fits"], true);
  EXPECT_TRUE(ok["fit_error"].is_null());
  EXPECT_GT(int64_t(ok["memory_estimate"]["total_bytes"]), 0);
  r.seq = cfg.max_position_embeddings + 1;
  const nlohmann::ordered_json no = plan_run(r, Device::cpu()).to_json(cfg, Device::cpu());
  EXPECT_EQ(no["fits"], false);
  EXPECT_TRUE(contains(no["fit_error"].get<std::string>(), "max_position_embeddings")) << no.dump();
}

// On the CPU nothing answers "out of memory": past the RAM the kernel kills the run. A llama-70b
// in f32 (276 GB of weights) is refused before anything is built, naming the bytes and the RAM;
// a small model fits; an unknown RAM size is no check.
TEST(RunPlan, RefusesACpuRunLargerThanTheRam) {
  const int64_t gib = int64_t(1) << 30;
  const MethodOptions m{"lora", {16, 16.0f}, parse_lora_targets("all"), 0};
  const llama::MethodMemory big =
      app::method_estimate(*llama::bench_shape_config("llama-70b"), m, 1, 512, true, Device::cpu());
  EXPECT_GT(big.frozen_weights, 250 * gib);
  try {
    app::check_cpu_fits(big, 64 * gib);
    ADD_FAILURE() << "a 70B f32 run accepted on a 64 GiB host";
  } catch (const UsageError& err) {
    EXPECT_TRUE(contains(err.what(), "more than this machine's 64 GiB of RAM")) << err.what();
    EXPECT_TRUE(contains(err.what(), "--device cuda")) << err.what();
  }
  app::check_cpu_fits(big, 0);  // unknown RAM: no check
  const llama::MethodMemory small =
      app::method_estimate(*llama::bench_shape_config("tiny"), m, 1, 64, false, Device::cpu());
  app::check_cpu_fits(small, 64 * gib);
}

// Checkpointed block inputs wait in pinned host memory: llama3-8b at 131,072 tokens keeps 32 GiB
// there (32 layers x 131,072 x 4,096 bf16), which a 32 GiB workstation cannot pin; refused before
// anything is loaded, naming the bytes and the way out.
TEST(RunPlan, RefusesCheckpointsTheHostCannotPin) {
  const llama::LlamaConfig cfg = *llama::bench_shape_config("llama3-8b");
  const MethodOptions m{"qlora", {64, 16.0f}, parse_lora_targets("all"), 0};
  const llama::MethodMemory e = app::method_estimate(cfg, m, 1, 131072, true, Device::cuda(0));
  EXPECT_EQ(e.host_checkpoints, int64_t(32) * 131072 * 4096 * 2);
  EXPECT_EQ(app::method_estimate(cfg, m, 1, 131072, true, Device::cuda(0), false).host_checkpoints, 0);
  EXPECT_EQ(app::method_estimate(cfg, m, 1, 131072, false, Device::cuda(0)).host_checkpoints, 0);
  const int64_t gib = int64_t(1) << 30;
  app::check_host_fits(e, 1, 131072, 64 * gib);
  app::check_host_fits(e, 1, 131072, 0);  // unknown: no check
  // Two replicas on a 64 GiB host pin 2 x 33 GiB: refused, saying so.
  try {
    app::check_host_fits(e, 1, 131072, 64 * gib, 2);
    ADD_FAILURE() << "two replicas' 66 GiB accepted on a 64 GiB host";
  } catch (const UsageError& err) {
    EXPECT_TRUE(contains(err.what(), "for 2 GPUs on this host")) << err.what();
  }
  try {
    app::check_host_fits(e, 1, 131072, 32 * gib);
    ADD_FAILURE() << "32 GiB of block inputs accepted on a 32 GiB host";
  } catch (const UsageError& err) {
    const std::string msg = err.what();
    for (const char* part : {"--seq 131072", "32 GiB of block inputs", "GiB embedding table",
                             "of RAM", "--checkpoints-on-gpu"})
      EXPECT_TRUE(contains(msg, part)) << msg;
  }
}

// `finetune --plan` prints the plan the run would use and touches nothing: no run folder.
TEST(RunPlan, FinetunePlanPrintsJsonAndWritesNothing) {
  TempDir dir;
  const std::string out = (dir / "run").string();
  const CliResult r = run_cli_captured({"finetune", "--model", stories(), "--data", demo(), "--out", out,
                                        "--device", "cpu", "--method", "qlora", "--lora-rank", "4",
                                        "--seq", "256", "--plan"});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  const MethodDefaults d = method_defaults("qlora");
  EXPECT_EQ(j["method"], "qlora");
  EXPECT_EQ(j["lora_rank"], 4);
  EXPECT_EQ(j["lr"], d.lr);
  EXPECT_EQ(j["batch"], d.batch);
  EXPECT_EQ(j["seq"], 256);
  EXPECT_TRUE(j["steps"].is_null());
  EXPECT_EQ(j["device"], "cpu");
  EXPECT_EQ(j["fits"], true);
  EXPECT_EQ(j["out"], out);
  EXPECT_FALSE(std::filesystem::exists(out));
  // The trainable count is the model's: a run with the same options reports the same one.
  const CliResult run = run_cli_captured({"finetune", "--model", stories(), "--data", demo(), "--out", out,
                                          "--device", "cpu", "--method", "qlora", "--lora-rank", "4",
                                          "--seq", "256", "--steps", "1", "--no-report"});
  ASSERT_EQ(run.code, 0) << run.err;
  EXPECT_TRUE(contains(run.out, std::to_string(j["trainable_parameters"].get<int64_t>()) + " trainable parameters"))
      << run.out;
  // A bad option is the usage error a run would give.
  const CliResult bad = run_cli_captured({"finetune", "--model", stories(), "--data", demo(), "--device", "cpu",
                                          "--batch", "8", "--micro-batch", "3", "--plan"});
  EXPECT_EQ(bad.code, 2);
  EXPECT_TRUE(contains(bad.err, "--micro-batch 3")) << bad.err;
  const CliResult flag = run_cli_captured({"finetune", "--model", stories(), "--data", demo(), "--plan=maybe"});
  EXPECT_EQ(flag.code, 2);
  EXPECT_TRUE(contains(flag.err, "--plan")) << flag.err;
  EXPECT_EQ(flag.err.find('\n'), flag.err.rfind("\n(run 'loft --help'")) << "one line, then the usage hint: " << flag.err;
}

// --plan with --gpus 2 --shard-backbone is each GPU's plan with its half of the frozen codes (and
// two layers' worth gathered), counted without claiming the GPUs; without ranks it is the run's
// usage error. The GPUs need not be on this machine (see the next test).
TEST(RunPlan, ThePlanOfAShardedRunCountsEachGpusShare) {
  const CliResult alone = run_cli_captured({"finetune", "--model", stories(), "--data", demo(), "--device",
                                            "cpu", "--shard-backbone", "--plan"});
  EXPECT_EQ(alone.code, 2);
  EXPECT_TRUE(contains(alone.err, "--shard-backbone spreads")) << alone.err;
  const std::vector<std::string> options = {"--method", "qlora", "--seq", "256", "--gpus", "2"};
  const auto whole = plan_json(options), sharded = plan_json(options, {"--shard-backbone"});
  ASSERT_TRUE(whole.contains("memory_estimate") && sharded.contains("memory_estimate"));
  const int64_t all = whole["memory_estimate"]["frozen_weights_bytes"];
  const int64_t share = sharded["memory_estimate"]["frozen_weights_bytes"];
  const int64_t layers = llama::load_llama_config(stories()).num_layers;
  EXPECT_LT(share, all);
  EXPECT_GE(share, all / 2) << "half, plus two layers' slots";
  EXPECT_LE(share, all / 2 + 2 * all / layers + 4096);
}

// A plan may be made for another machine: --gpus naming GPUs this one lacks (cuda:62 and cuda:63,
// which no machine here has) still gives each GPU's estimate. Whether it fits is null without a
// card to check against, and --gpu-memory-limit is that card; the model's limits still apply.
TEST(RunPlan, APlanForGpusThisMachineLacksChecksAgainstTheCap) {
  auto plan = [](const std::vector<std::string>& extra) {
    return plan_json({"--method", "lora", "--seq", "256", "--gpus", "62,63"}, extra);
  };
  const auto open = plan({});
  EXPECT_EQ(open["device"], "cuda:62");
  EXPECT_EQ(open["micro_batch"], 4) << "a GPU's default micro-batch";
  EXPECT_GT(open["memory_estimate"]["total_bytes"].get<int64_t>(), 0);
  EXPECT_TRUE(open["fits"].is_null()) << open.dump();
  for (const char* part : {"not checked", "cuda:62", "--gpu-memory-limit"})
    EXPECT_TRUE(contains(open["fit_error"].get<std::string>(), part)) << open["fit_error"];
  const auto roomy = plan({"--gpu-memory-limit", "24GiB"});
  EXPECT_EQ(roomy["fits"], true) << roomy.dump();
  EXPECT_TRUE(roomy["fit_error"].is_null());
  EXPECT_EQ(roomy["memory_estimate"], open["memory_estimate"]) << "the cap bounds nothing stories260K needs";
  const auto tight = plan({"--gpu-memory-limit", "64MiB"});
  EXPECT_EQ(tight["fits"], false) << tight.dump();
  EXPECT_TRUE(contains(tight["fit_error"].get<std::string>(), "more than --gpu-memory-limit 64 MiB")) << tight["fit_error"];
  const auto long_seq = plan_json({"--seq", "1000000", "--gpus", "62,63"});
  EXPECT_EQ(long_seq["fits"], false) << long_seq.dump();
  EXPECT_TRUE(contains(long_seq["fit_error"].get<std::string>(), "max_position_embeddings")) << long_seq["fit_error"];
}

// --falqon-transposed: auto stays per-step on the CPU (no GPU to fill); keep is carried, the
// plan's estimate counts the kept copy (one byte a weight more than the scratch) and names it.
TEST(RunPlan, FalqonTransposedCodesAreResolvedAndCounted) {
  auto plan = [](const std::vector<std::string>& extra) {
    return plan_json({"--device", "cpu", "--method", "falqon", "--seq", "256"}, extra);
  };
  const auto automatic = plan({}), keep = plan({"--falqon-transposed", "keep"}),
             per_step = plan({"--falqon-transposed", "per-step"});
  const auto& ea = automatic["memory_estimate"];
  EXPECT_EQ(ea["frozen_form"], per_step["memory_estimate"]["frozen_form"]);
  EXPECT_EQ(ea["frozen_weights_bytes"], per_step["memory_estimate"]["frozen_weights_bytes"]);
  EXPECT_TRUE(contains(keep["memory_estimate"]["frozen_form"].get<std::string>(), "kept"))
      << keep["memory_estimate"]["frozen_form"];
  EXPECT_GT(keep["memory_estimate"]["frozen_weights_bytes"].get<int64_t>(),
            ea["frozen_weights_bytes"].get<int64_t>());
  const CliResult bad = run_cli_captured({"finetune", "--model", stories(), "--data", demo(), "--device", "cpu",
                                          "--method", "falqon", "--falqon-transposed", "always", "--plan"});
  EXPECT_EQ(bad.code, 2);
  EXPECT_TRUE(contains(bad.err, "--falqon-transposed")) << bad.err;
}

// --token-tile: a multiple of the CPU GEMM's row block (so tiled equals untiled there), or 0; the
// plan carries it, and a bad value is a one-line usage error naming the option, for finetune and
// bench alike.
TEST(RunPlan, TokenTileIsCheckedAndCarried) {
  const CliResult plan = run_cli_captured({"finetune", "--model", stories(), "--data", demo(), "--device", "cpu",
                                           "--token-tile", "2048", "--plan"});
  ASSERT_EQ(plan.code, 0) << plan.err;
  EXPECT_EQ(nlohmann::json::parse(plan.out)["token_tile"], 2048);
  for (const char* bad : {"1000", "-1024", "lots"}) {
    SCOPED_TRACE(bad);
    for (const auto& args : {std::vector<std::string>{"finetune", "--model", stories(), "--data", demo(),
                                                      "--device", "cpu", "--token-tile", bad, "--plan"},
                             std::vector<std::string>{"bench", "step", "--shape", "tiny", "--device", "cpu",
                                                      "--token-tile", bad}}) {
      const CliResult r = run_cli_captured(args);
      EXPECT_EQ(r.code, 2);
      EXPECT_TRUE(contains(r.err, "--token-tile")) << r.err;
      // One line (CLI11's checks add the usage hint on a second).
      const std::string first = r.err.substr(0, r.err.find('\n'));
      EXPECT_TRUE(contains(first, "--token-tile")) << r.err;
      EXPECT_TRUE(r.err.find('\n') + 1 == r.err.size() || contains(r.err, "\n(run 'loft --help'")) << r.err;
    }
  }
  RunRequest r;
  r.token_tile = 1000;
  EXPECT_THROW(plan_run(r, Device::cpu()), UsageError);
  r.token_tile = 0;
  EXPECT_EQ(plan_run(r, Device::cpu()).token_tile, 0);
}

// bench plans each method as finetune does (at bench's r=64, alpha 16): the grad-norm clip and
// the memory estimate it reports are the plan's.
TEST(RunPlan, BenchUsesThePlan) {
  const CliResult b = run_cli_captured({"bench", "step", "--shape", "tiny", "--device", "cpu", "--batch", "1",
                                        "--seq", "16", "--steps", "1", "--warmup", "0", "--profile-steps", "0",
                                        "--method", "falqon", "--json"});
  ASSERT_EQ(b.code, 0) << b.err;
  const auto m = nlohmann::json::parse(b.out)["methods"][0];
  RunRequest r;
  r.method = "falqon";
  r.variants = true;
  r.rank = 64;
  r.alpha = 16;
  r.batch = r.micro_batch = 1;
  r.seq = 16;
  const RunPlan p = plan_run(r, Device::cpu());
  EXPECT_EQ(m["max_grad_norm"], p.max_grad_norm);
  EXPECT_EQ(m["estimated_peak_bytes"], p.memory(*llama::bench_shape_config("tiny"), Device::cpu()).total());
  EXPECT_EQ(m["trainable_parameters"], p.memory(*llama::bench_shape_config("tiny"), Device::cpu()).adapter_params);
}

}  // namespace
}  // namespace loft::test
