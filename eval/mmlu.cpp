#include "eval/mmlu.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <ostream>

#include "engine/core/error.h"
#include "engine/core/parallel.h"
#include "engine/core/progress.h"
#include "engine/io/json_read.h"
#include "eval/csv.h"
#include "eval/harness.h"
#include "models/llama/kv_cache.h"
#include "models/llama/score.h"

namespace loft::eval {

namespace {
const char* const kLetters[4] = {"A", "B", "C", "D"};

// How many leading tokens every request in [first, last) shares, short of the first position
// any of them predicts a target from (what a cached prefix may hold).
size_t shared_prefix(std::vector<llama::ScoreRequest>::const_iterator first,
                     std::vector<llama::ScoreRequest>::const_iterator last) {
  size_t common = first->tokens.size();
  for (auto r = first; r != last; ++r) {
    size_t k = 0;
    while (k < common && k < r->tokens.size() && r->tokens[k] == first->tokens[k]) ++k;
    common = std::min<size_t>(k, size_t(*std::min_element(r->positions.begin(), r->positions.end())) + 1);
  }
  return common;
}

// lm-eval's mmlu task groups (tasks/mmlu/default/*.yaml tags), the facts only.
const std::map<std::string, std::string>& categories() {
  static const std::map<std::string, std::string> m = [] {
    std::map<std::string, std::string> r;
    for (const char* s : {"abstract_algebra", "anatomy", "astronomy", "college_biology", "college_chemistry",
                          "college_computer_science", "college_mathematics", "college_physics",
                          "computer_security", "conceptual_physics", "electrical_engineering",
                          "elementary_mathematics", "high_school_biology", "high_school_chemistry",
                          "high_school_computer_science", "high_school_mathematics", "high_school_physics",
                          "high_school_statistics", "machine_learning"})
      r[s] = "stem";
    for (const char* s : {"formal_logic", "high_school_european_history", "high_school_us_history",
                          "high_school_world_history", "international_law", "jurisprudence",
                          "logical_fallacies", "moral_disputes", "moral_scenarios", "philosophy",
                          "prehistory", "professional_law", "world_religions"})
      r[s] = "humanities";
    for (const char* s : {"econometrics", "high_school_geography", "high_school_government_and_politics",
                          "high_school_macroeconomics", "high_school_microeconomics", "high_school_psychology",
                          "human_sexuality", "professional_psychology", "public_relations", "security_studies",
                          "sociology", "us_foreign_policy"})
      r[s] = "social_sciences";
    for (const char* s : {"business_ethics", "clinical_knowledge", "college_medicine", "global_facts",
                          "human_aging", "management", "marketing", "medical_genetics", "miscellaneous",
                          "nutrition", "professional_accounting", "professional_medicine", "virology"})
      r[s] = "other";
    return r;
  }();
  return m;
}
}  // namespace

std::string mmlu_category(const std::string& subject) {
  const auto it = categories().find(subject);
  return it == categories().end() ? std::string() : it->second;
}

std::vector<MmluQuestion> read_mmlu_csv(const std::filesystem::path& file) {
  if (!std::filesystem::exists(file)) throw Error(cat("MMLU file not found: ", file.string()));
  const std::vector<CsvRecord> records = read_csv(file, 6);
  const std::vector<std::string> header = {"question", "choice0", "choice1", "choice2", "choice3", "answer"};
  const bool has_header = !records.empty() && records[0].fields == header;
  std::vector<MmluQuestion> out;
  for (size_t r = has_header ? 1 : 0; r < records.size(); ++r) {
    const CsvRecord& rec = records[r];
    MmluQuestion q;
    q.question = rec.fields[0];
    for (int c = 0; c < 4; ++c) q.choices[size_t(c)] = rec.fields[size_t(c) + 1];
    q.line = rec.line;
    const std::string& a = rec.fields[5];
    if (has_header) {
      if (a.size() != 1 || a[0] < '0' || a[0] > '3')
        throw Error(cat(file.string(), ":", rec.line, ": answer '", a, "' is not 0-3 (a file with a header row)"));
      q.answer = a[0] - '0';
    } else {
      if (a.size() != 1 || a[0] < 'A' || a[0] > 'D')
        throw Error(cat(file.string(), ":", rec.line, ": answer '", a,
                        "' is not A-D (a headerless file, the original MMLU layout)"));
      q.answer = a[0] - 'A';
    }
    out.push_back(std::move(q));
  }
  if (out.empty()) throw Error(cat(file.string(), ": holds no question", has_header ? " (only the header row)" : ""));
  return out;
}

void check_subject_name(const std::string& subject) {
  // A subject names test/<subject>_test.csv inside --data: a bare name, never a path.
  if (subject.empty() || subject.find_first_of("/\\") != std::string::npos || subject.front() == '.' ||
      subject.find('\0') != std::string::npos)
    throw UsageError(cat("--subjects: ", brief(subject), " is not a subject name (a bare name such as ",
                         "abstract_algebra, naming test/<subject>_test.csv inside --data)"));
}

std::vector<std::string> mmlu_subjects(const std::filesystem::path& dir) {
  const auto test = dir / "test";
  if (!std::filesystem::is_directory(test))
    throw Error(cat("MMLU data folder ", dir.string(), " has no test/ folder"));
  std::vector<std::string> out;
  const std::string suffix = "_test.csv";
  for (const auto& e : std::filesystem::directory_iterator(test)) {
    const std::string name = e.path().filename().string();
    if (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
      out.push_back(name.substr(0, name.size() - suffix.size()));
  }
  std::sort(out.begin(), out.end());
  if (out.empty()) throw Error(cat("MMLU data folder ", test.string(), " holds no <subject>_test.csv"));
  return out;
}

std::string mmlu_doc_to_text(const MmluQuestion& q) {
  std::string s = strip(q.question);
  for (int c = 0; c < 4; ++c) s += cat("\n", kLetters[c], ". ", q.choices[size_t(c)]);
  return s + "\nAnswer:";
}

std::string mmlu_fewshot_prefix(const std::string& subject, const std::vector<MmluQuestion>& dev,
                                int64_t shots) {
  std::string name = subject;
  std::replace(name.begin(), name.end(), '_', ' ');
  std::string s = "The following are multiple choice questions (with answers) about " + name + ".\n\n";
  for (int64_t i = 0; i < shots; ++i)
    s += mmlu_doc_to_text(dev[size_t(i)]) + " " + kLetters[dev[size_t(i)].answer] + "\n\n";
  return s;
}

MmluResult run_mmlu(llama::LlamaModel& model, const Tokenizer& tok, const MmluOptions& opt) {
  if (opt.shots < 0) throw UsageError("--shots must be >= 0");
  if (opt.offset < 0) throw UsageError("--offset must be >= 0");
  for (const std::string& s : opt.subjects) check_subject_name(s);
  const std::vector<std::string> subjects = opt.subjects.empty() ? mmlu_subjects(opt.data) : opt.subjects;
  // Read and check every file before any model work.
  struct Subject {
    std::string name;
    std::vector<MmluQuestion> dev, test;
    int64_t begin = 0, end = 0;
  };
  std::vector<Subject> work;
  int64_t total = 0;
  for (const std::string& s : subjects) {
    Subject w;
    w.name = s;
    w.dev = read_mmlu_csv(opt.data / "dev" / (s + "_dev.csv"));
    w.test = read_mmlu_csv(opt.data / "test" / (s + "_test.csv"));
    if (opt.shots > int64_t(w.dev.size()))
      throw Error(cat("--shots ", opt.shots, " is more than the ", w.dev.size(), " dev questions of ", s,
                      " (", (opt.data / "dev" / (s + "_dev.csv")).string(), ")"));
    const int64_t size = int64_t(w.test.size());
    w.begin = std::min<int64_t>(opt.offset, size);
    w.end = opt.limit < 0 ? size : w.begin + std::min<int64_t>(size - w.begin, opt.limit);
    total += w.end - w.begin;
    work.push_back(std::move(w));
  }
  if (total == 0)
    throw UsageError(cat("--offset ", opt.offset, " is past the last test question of every subject (",
                         subjects.size() == 1 ? (opt.data / "test" / (subjects[0] + "_test.csv")).string()
                                              : cat(subjects.size(), " subjects"),
                         ")"));

  MmluResult result;
  std::map<std::string, GroupScore> by_category;
  Progress progress(opt.progress, "mmlu", total, "questions");
  int64_t done = 0;
  for (const Subject& w : work) {
    const std::string header = mmlu_fewshot_prefix(w.name, w.dev, opt.shots);
    // Tokenizing the prompts (5 encodes of ~800 tokens per question) costs more than scoring
    // them on a GPU: spread over the host's threads (the tokenizers are thread-safe).
    const std::vector<std::string> continuations = {" A", " B", " C", " D"};
    std::vector<MmluSample> samples(size_t(w.end - w.begin));
    std::vector<llama::ScoreRequest> requests(samples.size() * 4);
    parallel_for(w.end - w.begin, [&](int64_t k) {
      const int64_t i = w.begin + k;
      const MmluQuestion& q = w.test[size_t(i)];
      MmluSample& s = samples[size_t(k)];
      s.subject = w.name;
      s.index = i;
      s.context = header + mmlu_doc_to_text(q);
      s.gold = q.answer;
      const std::vector<EncodedPair> pairs = encode_pairs(tok, s.context, continuations);
      s.context_ids = pairs[0].context;
      for (size_t c = 0; c < 4; ++c) requests[size_t(k) * 4 + c] = loglikelihood_request(pairs[c], opt.max_length);
    });
    GroupScore subject_score{w.name};
    if (!requests.empty()) {
      // The subject's shared prefix: the tokens every request starts with, short of the first
      // position any target is predicted from.
      const size_t common = shared_prefix(requests.begin(), requests.end());
      int64_t max_len = 0;
      for (const llama::ScoreRequest& r : requests) max_len = std::max<int64_t>(max_len, int64_t(r.tokens.size()));
      // Slot 0: the subject's prefix; slot 1: one question's (per-question mode); then the work,
      // as many slots as the device's memory holds for this subject's longest prompt.
      const int64_t work_slots =
          std::max<int64_t>(1, llama::KvCache::slots_that_fit(model, opt.slots + 2, max_len, max_len - int64_t(common)) - 2);
      llama::KvCache cache = llama::KvCache::for_model(model, work_slots + 2, max_len);
      std::vector<int64_t> slots;
      for (int64_t s = 2; s < work_slots + 2; ++s) slots.push_back(s);
      // Questions per loglikelihood call: one (its own cached prefix, forked four times) or a
      // batch, each question one slot (its four single-token continuations read the same tokens).
      const int64_t chunk = opt.per_question_prefix ? 1 : work_slots;
      llama::CachedPrefix prefix;
      const bool use_prefix = common >= 1;
      if (use_prefix)
        prefix = llama::cache_prefix(model, cache, 0,
                                     std::vector<int32_t>(requests[0].tokens.begin(),
                                                          requests[0].tokens.begin() + int64_t(common)));
      result.shared_prefix_tokens += int64_t(common);
      for (size_t q0 = 0; q0 < samples.size(); q0 += size_t(chunk)) {
        const size_t q1 = std::min(samples.size(), q0 + size_t(chunk));
        const auto first = requests.begin() + int64_t(q0 * 4), last = requests.begin() + int64_t(q1 * 4);
        std::vector<llama::Score> scores;
        const size_t own = q1 - q0 == 1 ? shared_prefix(first, last) : 0;
        if (own > common) {  // the question's own prefix on top of the subject's, its 4 choices forked
          const llama::CachedPrefix question = llama::cache_prefix(
              model, cache, 1, std::vector<int32_t>(first->tokens.begin(), first->tokens.begin() + int64_t(own)),
              use_prefix ? &prefix : nullptr);
          scores = llama::loglikelihood(model, cache, std::vector<llama::ScoreRequest>(first, last), &question, slots);
        } else {
          scores = llama::loglikelihood(model, cache, std::vector<llama::ScoreRequest>(first, last), use_prefix ? &prefix : nullptr, slots);
        }
        for (size_t q = q0; q < q1; ++q) {
          MmluSample& s = samples[q];
          for (size_t c = 0; c < 4; ++c) s.loglikelihoods[c] = scores[(q - q0) * 4 + c].sum;
          s.pred = 0;
          for (int c = 1; c < 4; ++c)
            if (s.loglikelihoods[size_t(c)] > s.loglikelihoods[size_t(s.pred)]) s.pred = c;
          subject_score.questions += 1;
          subject_score.correct += s.pred == s.gold ? 1 : 0;
          if (opt.on_sample) opt.on_sample(s);
        }
        done += int64_t(q1 - q0);
        progress.update(done, w.name);
      }
    }
    result.requests += int64_t(requests.size());
    std::string category = mmlu_category(w.name);
    if (category.empty()) category = "unknown";
    GroupScore& g = by_category[category];
    g.name = category;
    g.questions += subject_score.questions;
    g.correct += subject_score.correct;
    result.overall.questions += subject_score.questions;
    result.overall.correct += subject_score.correct;
    result.subjects.push_back(subject_score);
  }
  progress.finish();
  for (const char* c : {"stem", "humanities", "social_sciences", "other", "unknown"})
    if (by_category.count(c)) result.categories.push_back(by_category[c]);
  return result;
}

}  // namespace loft::eval
