// README's "what fits on your card" table is the memory estimate's (models/llama/memory_fit.h),
// recomputed here: a change to the estimate or to a method's memory that moves a cell fails this
// test, which prints the table to paste. Cards keep loft info --card's runtime allowance; the host
// is a 64 GiB workstation (which decides whether attention tensors wait in host memory).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "app/gpu_cards.h"
#include "app/method_flags.h"
#include "models/llama/bench_model.h"
#include "models/llama/memory_fit.h"
#include "tests/common/test_util.h"

namespace loft {
namespace {

struct Model {
  const char* shape;
  int64_t window;  // the released model's context: Llama 2's 4096, Llama 3.1's 131072
};

std::string cell(int64_t b0, int64_t b1, int64_t longest) {
  const auto n = [](int64_t v) { return v == 0 ? std::string("—") : std::to_string(v); };
  return n(b0) + " / " + n(b1) + " / " + (longest == 0 ? std::string("—") : std::to_string(longest / 1024) + "k");
}

// host_gib: the host's RAM, which decides whether attention tensors may wait in host memory.
std::string fits_table(int64_t host_gib = 64) {
  const int64_t gib = int64_t(1) << 30;
  std::ostringstream out;
  out << "| model | method | 12 GiB | 16 GiB | 24 GiB |\n| --- | --- | --- | --- | --- |\n";
  for (const Model& m : {Model{"llama-7b", 4096}, Model{"llama-13b", 4096}, Model{"llama3-8b", 131072}}) {
    const llama::LlamaConfig cfg = *llama::bench_shape_config(m.shape);
    for (const char* item : {"lora", "qlora", "falqon", "halo", "halo:nf4", "hot"}) {
      MethodOptions method;
      const std::string name(item);
      method.method = name.substr(0, name.find(':'));
      method.lora = {64, 16.0f};
      method.targets = parse_lora_targets("all");
      app::apply_method_variants(name, method);
      apply_method_invariants(method);
      out << "| " << m.shape << " | " << item;
      for (int64_t card : {12, 16, 24}) {
        const int64_t budget = card * gib - app::kRuntimeAllowance;
        llama::MemoryEstimateOptions o{.batch = 1, .seq = 2048, .lora_rank = 64};
        o.host_bytes = host_gib * gib;
        const int64_t plain = llama::largest_batch_that_fits(cfg, o, method, budget);
        o.grad_checkpointing = true;
        const int64_t gc = llama::largest_batch_that_fits(cfg, o, method, budget);
        const int64_t longest = llama::longest_seq_that_fits(cfg, o, method, budget, m.window);
        out << " | " << cell(plain, gc, longest);
      }
      out << " |\n";
    }
  }
  return out.str();
}

// The lines of README.md between the fits-table markers.
std::string readme_table() {
  std::ifstream f(test::source_dir() / "README.md");
  std::string line, table;
  bool in = false;
  while (std::getline(f, line)) {
    if (line == "<!-- fits-table:end -->") break;
    if (in) table += line + "\n";
    if (line == "<!-- fits-table:begin -->") in = true;
  }
  return table;
}

TEST(ReadmeFits, TableIsTheEstimates) {
  const std::string want = fits_table();
  EXPECT_EQ(readme_table(), want) << "README's table should read:\n" << want;
}

// More host RAM never fits less: keeping each block's attention tensors in host memory (which a
// large host allows) brings one layer's back to the device, so a run keeps them only where the
// card has that room too. (A 512 GiB host once took llama3-8b qlora's 94 rows past 24 GiB.)
TEST(ReadmeFits, ALargerHostFitsAtLeastAsMuch) {
  const auto cells = [](const std::string& table) {
    std::vector<std::vector<int64_t>> out;
    std::istringstream in(table);
    std::string line;
    while (std::getline(in, line)) {
      std::vector<int64_t> nums;
      for (size_t i = 0; i < line.size(); ++i) {
        if (line.compare(i, 3, "—") == 0) nums.push_back(0), i += 2;
        else if (std::isdigit(static_cast<unsigned char>(line[i])) && (i == 0 || line[i - 1] == ' ')) nums.push_back(std::stoll(line.substr(i)));
      }
      out.push_back(nums);
    }
    return out;
  };
  const auto small = cells(fits_table(64)), large = cells(fits_table(512));
  ASSERT_EQ(small.size(), large.size());
  for (size_t r = 0; r < small.size(); ++r) {
    ASSERT_EQ(small[r].size(), large[r].size()) << "row " << r;
    for (size_t c = 0; c < small[r].size(); ++c) EXPECT_GE(large[r][c], small[r][c]) << "row " << r << " cell " << c;
  }
}

// The searches themselves: what they return fits, one more does not.
TEST(ReadmeFits, SearchesFindTheEdge) {
  const llama::LlamaConfig cfg = *llama::bench_shape_config("llama3-8b");
  MethodOptions qlora{"qlora", {64, 16.0f}, parse_lora_targets("all"), 0};
  apply_method_invariants(qlora);
  const int64_t budget = (int64_t(24) << 30) - app::kRuntimeAllowance;
  llama::MemoryEstimateOptions o{.batch = 1, .seq = 2048, .lora_rank = 64, .grad_checkpointing = true};
  o.host_bytes = int64_t(64) << 30;
  // Fits: the device peak within the budget and the pinned inputs within the host's limit (at
  // 24 GiB and 64 GiB of RAM, the host's limit is the one that binds for qlora).
  const auto fits = [&](int64_t batch, int64_t seq) {
    llama::MemoryEstimateOptions p = o;
    p.batch = batch;
    p.seq = seq;
    const llama::MethodMemory e = llama::estimate_method_memory(cfg, p, qlora);
    return e.total() <= budget && llama::pinned_fits_host(e.host_pinned(), o.host_bytes);
  };
  const int64_t seq = llama::longest_seq_that_fits(cfg, o, qlora, budget, int64_t(1) << 20);
  ASSERT_GT(seq, 0);
  EXPECT_TRUE(fits(1, seq));
  EXPECT_FALSE(fits(1, seq + 1024));
  const int64_t batch = llama::largest_batch_that_fits(cfg, o, qlora, budget);
  ASSERT_GT(batch, 0);
  EXPECT_TRUE(fits(batch, 2048));
  EXPECT_FALSE(fits(batch + 1, 2048));
  EXPECT_EQ(llama::largest_batch_that_fits(cfg, o, qlora, 1), 0);
  EXPECT_EQ(llama::longest_seq_that_fits(cfg, o, qlora, budget, 512), 0);  // below one step
}

}  // namespace
}  // namespace loft
