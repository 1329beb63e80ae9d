// --gpu-memory-limit through the real CLI: one option on every command that computes (a bad SIZE
// is exit 2 naming it; export, CPU-only, has none), a recipe key, a CPU run's notice, and
// `loft info --card`'s verdicts against the estimate. The cap inside the allocator is
// tests/engine/test_caching_pool.cpp; on a GPU, tests/gpu/test_memory_limit_cuda.cpp.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "app/gpu_cards.h"
#include "engine/device/memory_limit.h"
#include "tests/common/cli_capture.h"
#include "tests/common/test_util.h"

namespace loft {
namespace {

namespace fs = std::filesystem;
using test::CliResult;
CliResult run(std::vector<std::string> args) { return test::run_cli_captured(std::move(args)); }

std::string stories() { return (test::source_dir() / "examples" / "stories260K").string(); }
std::string demo() { return (test::source_dir() / "examples" / "demo.jsonl").string(); }
std::string wide() { return test::data_path("models/wide-random").string(); }

constexpr int64_t kGiB = int64_t(1) << 30;

TEST(GpuMemoryLimit, BadSizeIsAUsageErrorOnEveryCommandThatComputes) {
  const std::vector<std::vector<std::string>> commands{
      {"finetune", "--model", stories(), "--data", demo()},
      {"bench", "step", "--shape", "tiny"},
      {"evaluate", "--model", stories(), "--task", "ppl", "--data", demo()},
      {"generate", "--model", stories(), "--prompt", "Once"}};
  for (const auto& cmd : commands) {
    for (const char* bad : {"lots", "0", "24XB", "-1GiB", "99999999999999TiB"}) {
      std::vector<std::string> args = cmd;
      args.insert(args.end(), {"--device", "cpu", "--gpu-memory-limit", bad});
      const CliResult r = run(args);
      EXPECT_EQ(r.code, 2) << cmd[0] << ' ' << bad << ": " << r.err;
      EXPECT_TRUE(test::contains(r.err, std::string("loft: error: --gpu-memory-limit: '") + bad + "'"))
          << cmd[0];
      EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "one line: " << r.err;
    }
  }
  // Export runs on the CPU only: it has no such option and says why in its help.
  test::TempDir dir;
  const CliResult e = run({"export", "--model", stories(), "--format", "bf16", "--out", (dir / "o").string(),
                           "--gpu-memory-limit", "24GiB"});
  EXPECT_EQ(e.code, 2) << e.err;
  EXPECT_FALSE(fs::exists(dir / "o"));
  EXPECT_TRUE(test::contains(run({"export", "--help"}).out, "--gpu-memory-limit do not apply"));
}

TEST(GpuMemoryLimit, HelpNamesTheOption) {
  for (const std::vector<std::string>& cmd : std::vector<std::vector<std::string>>{
           {"finetune"}, {"bench", "step"}, {"bench", "kernels"}, {"bench", "eval"}, {"evaluate"}, {"generate"}}) {
    std::vector<std::string> args = cmd;
    args.push_back("--help");
    EXPECT_TRUE(test::contains(run(args).out, "--gpu-memory-limit SIZE")) << cmd.back();
  }
}

TEST(GpuMemoryLimit, CpuRunSaysItAppliesToGpusOnlyAndTheNextCommandStartsUncapped) {
  test::TempDir dir;
  const CliResult r = run({"finetune", "--model", stories(), "--data", demo(), "--steps", "1", "--batch", "2",
                           "--seq", "128", "--out", (dir / "run").string(), "--device", "cpu", "--no-report",
                           "--gpu-memory-limit", "24GiB"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(test::contains(r.err, "notice: --gpu-memory-limit applies to GPUs only; this run is on the CPU"));
  EXPECT_EQ(gpu_memory_limit(), 24 * kGiB);
  // The run's config.yaml repeats the option, as a recipe key.
  EXPECT_TRUE(test::contains(test::read_text(dir / "run" / "config.yaml"), "gpu_memory_limit: 24GiB\n"));
  const CliResult again = run({"generate", "--model", stories(), "--prompt", "Once", "--max-new-tokens", "2",
                               "--device", "cpu"});
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_EQ(gpu_memory_limit(), 0) << "a command without the option runs uncapped";
  EXPECT_FALSE(test::contains(again.err, "--gpu-memory-limit"));
}

TEST(GpuMemoryLimit, RecipeKey) {
  test::TempDir dir;
  std::ofstream(dir / "r.yaml") << "base_model: " << stories() << "\ndatasets: [" << demo()
                                << "]\ngpu_memory_limit: 12 apples\n";
  const CliResult r = run({"finetune", "--config", (dir / "r.yaml").string(), "--device", "cpu",
                           "--out", (dir / "run").string()});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_TRUE(test::contains(r.err, "--gpu-memory-limit: '12 apples' has an unknown unit"));
  EXPECT_FALSE(fs::exists(dir / "run" / "metrics.jsonl"));
}

// Every method's verdict is the estimate plus the runtime allowance against the card.
void expect_verdicts(const nlohmann::json& est, int64_t card_bytes) {
  ASSERT_EQ(est["card"]["bytes"].get<int64_t>(), card_bytes);
  for (const auto& m : est["methods"]) {
    const int64_t headroom = card_bytes - m["total_bytes"].get<int64_t>() - app::kRuntimeAllowance;
    EXPECT_EQ(m["card_headroom_bytes"].get<int64_t>(), headroom) << m["method"];
    EXPECT_EQ(m["card_fits"].get<bool>(), headroom >= 0) << m["method"];
  }
}

TEST(InfoCard, VerdictsFollowTheEstimate) {
  LOFT_REQUIRE_DATA("models/wide-random");
  const CliResult big = run({"info", "--model", wide(), "--json", "--card", "rtx4090"});
  ASSERT_EQ(big.code, 0) << big.err;
  const auto jb = nlohmann::json::parse(big.out);
  EXPECT_EQ(jb["memory_estimate"]["card"]["card"], "rtx4090");
  expect_verdicts(jb["memory_estimate"], 24 * kGiB);
  for (const auto& m : jb["memory_estimate"]["methods"]) EXPECT_TRUE(m["card_fits"].get<bool>());

  // A card between the smallest and the largest estimate: some methods fit, some do not.
  const auto& methods = jb["memory_estimate"]["methods"];
  int64_t lo = INT64_MAX, hi = 0;
  for (const auto& m : methods) {
    lo = std::min(lo, m["total_bytes"].get<int64_t>());
    hi = std::max(hi, m["total_bytes"].get<int64_t>());
  }
  ASSERT_LT(lo, hi);
  const int64_t mid = app::kRuntimeAllowance + (lo + hi) / 2;
  const CliResult r = run({"info", "--model", wide(), "--json", "--card", std::to_string(mid)});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j["memory_estimate"]["card"]["card"].is_null());
  expect_verdicts(j["memory_estimate"], mid);
  int fits = 0;
  for (const auto& m : j["memory_estimate"]["methods"]) fits += m["card_fits"].get<bool>();
  EXPECT_GT(fits, 0);
  EXPECT_LT(fits, int(methods.size()));

  // Without --card: no verdicts.
  const auto plain = nlohmann::json::parse(run({"info", "--model", wide(), "--json"}).out);
  EXPECT_TRUE(plain["memory_estimate"]["card"].is_null());
  EXPECT_FALSE(plain["memory_estimate"]["methods"][0].contains("card_fits"));
}

TEST(InfoCard, TextSaysFitsOrShortPerMethod) {
  LOFT_REQUIRE_DATA("models/wide-random");
  const CliResult fits = run({"info", "--model", wide(), "--card", "RTX4060TI"});
  ASSERT_EQ(fits.code, 0) << fits.err;
  EXPECT_TRUE(test::contains(fits.out, "on RTX 4060 Ti 16 GB (16 GiB), keeping 0.75 GiB for the CUDA context"));
  EXPECT_TRUE(test::contains(fits.out, "lora-bf16   fits"));
  const CliResult small = run({"info", "--model", wide(), "--card", "300MiB"});
  ASSERT_EQ(small.code, 0) << small.err;
  EXPECT_TRUE(test::contains(small.out, "on 300 MiB card"));
  EXPECT_TRUE(test::contains(small.out, "lora-bf16   does not fit"));
  EXPECT_TRUE(test::contains(small.out, " short\n"));
}

TEST(InfoCard, BadCardsAreUsageErrors) {
  LOFT_REQUIRE_DATA("models/wide-random");
  const CliResult unknown = run({"info", "--model", wide(), "--card", "rtx9090"});
  EXPECT_EQ(unknown.code, 2);
  EXPECT_TRUE(test::contains(unknown.err, "--card: 'rtx9090' is not a card loft knows (rtx3090, rtx4090"));
  const CliResult size = run({"info", "--model", wide(), "--card", "24XB"});
  EXPECT_EQ(size.code, 2);
  EXPECT_TRUE(test::contains(size.err, "--card: '24XB' has an unknown unit"));
  const CliResult cpu = run({"info", "--model", wide(), "--card", "h100", "--estimate-for", "cpu"});
  EXPECT_EQ(cpu.code, 2);
  EXPECT_TRUE(test::contains(cpu.err, "--card plans for a GPU"));
}

TEST(GpuCards, NamedCardsAndSizes) {
  EXPECT_EQ(app::parse_gpu_card("rtx4090").bytes, 24 * kGiB);
  EXPECT_EQ(app::parse_gpu_card("rtx3090").bytes, 24 * kGiB);
  EXPECT_EQ(app::parse_gpu_card("rtx4080").bytes, 16 * kGiB);
  EXPECT_EQ(app::parse_gpu_card("rtx5090").bytes, 32 * kGiB);
  EXPECT_EQ(app::parse_gpu_card("rtx4060ti").bytes, 16 * kGiB);
  EXPECT_EQ(app::parse_gpu_card("a100-40").bytes, 40 * kGiB);
  EXPECT_EQ(app::parse_gpu_card("A100-80").bytes, 80 * kGiB);
  EXPECT_EQ(app::parse_gpu_card("h100").bytes, 80 * kGiB);
  EXPECT_EQ(app::parse_gpu_card("24GB").bytes, 24'000'000'000);
  EXPECT_EQ(app::parse_gpu_card("24GB").label, "24 GB card");
  const app::GpuCard c{"", "x", 10 * kGiB};
  EXPECT_TRUE(app::card_fit(10 * kGiB - app::kRuntimeAllowance, c).fits);
  EXPECT_EQ(app::card_fit(10 * kGiB - app::kRuntimeAllowance, c).headroom, 0);
  EXPECT_FALSE(app::card_fit(10 * kGiB - app::kRuntimeAllowance + 1, c).fits);
}

}  // namespace
}  // namespace loft
