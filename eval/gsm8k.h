// GSM8K as lm-evaluation-harness's `gsm8k` (5 shots drawn from train with random.Random(1234),
// one sample() per test question in order) and `gsm8k_cot` (8 fixed exemplars) score it
// (docs/evaluation.md): greedy generation of up to max_gen_toks tokens, stopped at lm-eval's stop
// strings (checked on the decoded text) and the model's EOS; the text cut at the first stop
// string; exact_match after the strict-match and flexible-extract filters and lm-eval's
// normalisation.
#pragma once
#include <filesystem>
#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

#include "models/llama/model.h"
#include "tokenizer/tokenizer.h"

namespace loft::eval {

struct Gsm8kQuestion {
  std::string question, answer;  // answer: the full solution, ending in "#### N"
  int64_t line = 0;
};
// One {"question", "answer"} object per non-empty line; a bad line, or an answer without "####",
// is an Error naming file:line.
std::vector<Gsm8kQuestion> read_gsm8k_jsonl(const std::filesystem::path& file);

// A data folder's files: train.jsonl, and test.jsonl or else the only other *.jsonl.
struct Gsm8kFiles {
  std::filesystem::path train, test;
};
Gsm8kFiles gsm8k_files(const std::filesystem::path& dir);

// The prompts. gsm8k: "Question: " + q + "\nAnswer:", shots with their full solutions.
// gsm8k_cot: "Q: " + q + "\nA:", the first `shots` of lm-eval's 8 exemplars.
std::string gsm8k_prompt(const std::vector<Gsm8kQuestion>& train, const std::vector<int64_t>& shots,
                         const std::string& question);
std::string gsm8k_cot_prompt(int64_t shots, const std::string& question);
inline constexpr int64_t kGsm8kCotExemplars = 8;

// The filters (each gives "[invalid]" when nothing matches) and exact_match's normalisation.
std::string gsm8k_strict_match(const std::string& generation, bool cot);
std::string gsm8k_flexible_extract(const std::string& generation);
std::string gsm8k_normalise(const std::string& s);  // regexes_to_ignore in order, lower-cased
// The reference answer exact_match compares with: gsm8k the full solution, gsm8k_cot its number.
std::string gsm8k_reference(const Gsm8kQuestion& q, bool cot);

struct Gsm8kSample {
  int64_t index = 0;  // 0-based line of the test file
  std::string context;
  std::vector<int32_t> context_ids;  // before truncation
  std::vector<int64_t> fewshot_indices;
  std::string generation;  // after the stop-string cut
  int64_t generated_tokens = 0;
  std::string stop_reason;  // "eos", "max_gen_toks", "until"
  std::string strict, flexible, target;
  bool strict_correct = false, flexible_correct = false;
};

struct Gsm8kOptions {
  std::filesystem::path train, test;
  bool cot = false;
  int64_t shots = -1;      // < 0: the task's (gsm8k 5, gsm8k_cot 8)
  int64_t seed = 1234;     // the few-shot sampler's
  int64_t offset = 0, limit = -1;
  int64_t max_gen_toks = 256;
  int64_t max_length = 2048;  // the model's context length
  int64_t slots = 16;
  std::vector<int32_t> eos_ids;
  std::ostream* progress = nullptr;
  std::function<void(const Gsm8kSample&)> on_sample;  // each question, in order
};

struct Gsm8kResult {
  int64_t questions = 0, strict_correct = 0, flexible_correct = 0, generated_tokens = 0, shots = 0;
  std::vector<std::string> until;
};

Gsm8kResult run_gsm8k(llama::LlamaModel& model, const Tokenizer& tok, const Gsm8kOptions& opt);

}  // namespace loft::eval
