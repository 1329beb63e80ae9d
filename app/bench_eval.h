// `loft bench eval --task mmlu|gsm8k|decode`: how fast the evaluator runs, on a random-init Llama of a
// named shape (or a checkpoint) with a real tokenizer and real task data, so the speed targets of
// the evaluator (docs/perf.md) are measured without a 13 GB download. The scores of random weights
// are meaningless; the prompts, their lengths, the prefix sharing and the decoding work are real.
//   mmlu:   every question of --data (dev/ + test/), 5-shot, as `loft evaluate --task mmlu`.
//   gsm8k:  --limit questions (default 1,319, GSM8K's test size; when the test file has fewer, the
//           train file serves as questions too), 5-shot, greedy, --max-gen-toks new tokens.
//   decode: --batch prompts of --seq random tokens, then --max-gen-toks greedy tokens each, all in
//           one batch: prefill time and decode tokens/s.
#pragma once
#include <cstdint>
#include <iosfwd>
#include <string>

#include "engine/tensor/device.h"

namespace loft::app {

struct EvalBenchOptions {
  std::string task;       // mmlu, gsm8k, decode
  std::string shape;      // a bench shape, or
  std::string model;      // a Hugging Face folder
  std::string tokenizer;  // folder of the tokenizer (default: --model)
  std::string data;       // mmlu: dev/ + test/; gsm8k: train.jsonl + a test JSONL
  int64_t limit = -1;     // mmlu: per subject; gsm8k: questions (default 1,319)
  int64_t slots = 64, batch = 64, seq = 512, max_gen_toks = 256;
  uint64_t seed = 0;
  bool json = false;
};

void run_eval_bench(const EvalBenchOptions& o, Device device, std::ostream& out);

}  // namespace loft::app
