// MMLU as lm-evaluation-harness's `mmlu` task scores it (docs/evaluation.md): per subject a
// description line, the first k dev rows as shots, then the test question; the four continuations
// " A".." D" scored by summed log-likelihood (lm-eval's _encode_pair and left truncation, see
// harness.h); acc = argmax (ties to the lowest letter). Accuracy per subject, per lm-eval category
// (stem, humanities, social_sciences, other) and overall, micro-averaged over questions.
#pragma once
#include <array>
#include <filesystem>
#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

#include "models/llama/model.h"
#include "tokenizer/tokenizer.h"

namespace loft::eval {

struct MmluQuestion {
  std::string question;
  std::array<std::string, 4> choices;
  int answer = 0;     // 0..3
  int64_t line = 0;   // where its record starts in the file
};

// A subject's CSV in either layout: with the header `question,choice0,choice1,choice2,choice3,answer`
// (answer 0-3, as tests/data/mmlu), or the original headerless one (answer A-D). Every
// record has 6 fields; a wrong count or a bad answer is an Error naming file:line.
std::vector<MmluQuestion> read_mmlu_csv(const std::filesystem::path& file);

// lm-eval's group of a subject: "stem", "humanities", "social_sciences" or "other"; "" when the
// subject is not one of MMLU's 57.
std::string mmlu_category(const std::string& subject);

// The subjects of a data folder: every test/<subject>_test.csv, sorted.
std::vector<std::string> mmlu_subjects(const std::filesystem::path& dir);
// UsageError unless `subject` is a bare name (no slash or backslash, no leading '.'), so --subjects reads
// only files inside --data.
void check_subject_name(const std::string& subject);

// question.strip() + "\nA. " + c0 + ... + "\nD. " + c3 + "\nAnswer:"
std::string mmlu_doc_to_text(const MmluQuestion& q);
// The description line and the first `shots` dev rows, each doc_to_text + " " + letter + "\n\n".
std::string mmlu_fewshot_prefix(const std::string& subject, const std::vector<MmluQuestion>& dev,
                                int64_t shots);

struct MmluSample {
  std::string subject;
  int64_t index = 0;  // 0-based row of its subject's test file
  std::string context;
  std::vector<int32_t> context_ids;  // lm-eval's context_enc (before truncation)
  std::array<double, 4> loglikelihoods{};
  int gold = 0, pred = 0;
};

struct MmluOptions {
  std::filesystem::path data;          // holds dev/ and test/
  std::vector<std::string> subjects;   // empty: every subject of test/
  int64_t shots = 5;
  int64_t offset = 0;                  // per subject: questions offset..offset+limit-1
  int64_t limit = -1;                  // per subject; < 0: all
  int64_t max_length = 2048;           // the model's context length
  int64_t slots = 16;                  // KV-cache slots that score requests (two more hold prefixes)
  // Each question's context cached once on top of the subject's prefix and its four choices
  // forked from it (least compute: best on the CPU); otherwise `slots` questions are scored per
  // batch from the subject's prefix, one slot each (more parallel work per step: better on a GPU).
  bool per_question_prefix = true;
  std::ostream* progress = nullptr;    // a progress line with ETA
  std::function<void(const MmluSample&)> on_sample;  // each question, in order
};

struct GroupScore {
  std::string name;
  int64_t questions = 0, correct = 0;
  double acc() const { return questions ? double(correct) / double(questions) : 0.0; }
};

struct MmluResult {
  std::vector<GroupScore> subjects, categories;  // categories in lm-eval's order, non-empty only
  GroupScore overall{"mmlu"};
  int64_t requests = 0, shared_prefix_tokens = 0;
};

MmluResult run_mmlu(llama::LlamaModel& model, const Tokenizer& tok, const MmluOptions& opt);

}  // namespace loft::eval
