#include "eval/gsm8k.h"

#include <fstream>
#include <memory>
#include <regex>

#include <nlohmann/json.hpp>

#include "engine/core/error.h"
#include "engine/core/parallel.h"
#include "engine/core/progress.h"
#include "engine/io/json_read.h"
#include "eval/harness.h"
#include "eval/python_random.h"
#include "models/llama/generate.h"
#include "models/llama/kv_cache.h"

namespace loft::eval {

namespace {
// lm-eval's gsm8k-cot.yaml fewshot samples (YAML-folded onto single lines).
const char* const kCot[kGsm8kCotExemplars][2] = {
    {"There are 15 trees in the grove. Grove workers will plant trees in the grove today. After they are done, there will be 21 trees. How many trees did the grove workers plant today?",
     "There are 15 trees originally. Then there were 21 trees after some more were planted. So there must have been 21 - 15 = 6. The answer is 6."},
    {"If there are 3 cars in the parking lot and 2 more cars arrive, how many cars are in the parking lot?",
     "There are originally 3 cars. 2 more cars arrive. 3 + 2 = 5. The answer is 5."},
    {"Leah had 32 chocolates and her sister had 42. If they ate 35, how many pieces do they have left in total?",
     "Originally, Leah had 32 chocolates. Her sister had 42. So in total they had 32 + 42 = 74. After eating 35, they had 74 - 35 = 39. The answer is 39."},
    {"Jason had 20 lollipops. He gave Denny some lollipops. Now Jason has 12 lollipops. How many lollipops did Jason give to Denny?",
     "Jason started with 20 lollipops. Then he had 12 after giving some to Denny. So he gave Denny 20 - 12 = 8. The answer is 8."},
    {"Shawn has five toys. For Christmas, he got two toys each from his mom and dad. How many toys does he have now?",
     "Shawn started with 5 toys. If he got 2 toys each from his mom and dad, then that is 4 more toys. 5 + 4 = 9. The answer is 9."},
    {"There were nine computers in the server room. Five more computers were installed each day, from monday to thursday. How many computers are now in the server room?",
     "There were originally 9 computers. For each of 4 days, 5 more computers were added. So 5 * 4 = 20 computers were added. 9 + 20 is 29. The answer is 29."},
    {"Michael had 58 golf balls. On tuesday, he lost 23 golf balls. On wednesday, he lost 2 more. How many golf balls did he have at the end of wednesday?",
     "Michael started with 58 golf balls. After losing 23 on tuesday, he had 58 - 23 = 35. After losing 2 more, he had 35 - 2 = 33 golf balls. The answer is 33."},
    {"Olivia has $23. She bought five bagels for $3 each. How much money does she have left?",
     "Olivia had 23 dollars. 5 bagels for 3 dollars each will be 5 x 3 = 15 dollars. So she has 23 - 15 dollars left. 23 - 15 is 8. The answer is 8."},
};

bool ends_with(const std::string& s, const std::string& t) {
  return s.size() >= t.size() && s.compare(s.size() - t.size(), t.size(), t) == 0;
}

// RegexFilter: findall, the match at group_select, a tuple's first non-empty group, strip().
std::string regex_filter(const std::string& text, const std::regex& re, bool last) {
  std::string found;
  bool any = false;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator(); ++it) {
    const std::smatch& m = *it;
    std::string v;
    if (m.size() == 2) {
      v = m[1].str();
    } else {
      for (size_t g = 1; g < m.size(); ++g)
        if (m[g].matched && m[g].length() > 0) {
          v = m[g].str();
          break;
        }
      if (v.empty()) v = "[invalid]";
    }
    if (!any || last) found = v;
    any = true;
    if (!last) break;
  }
  return any ? strip(found) : "[invalid]";
}
}  // namespace

std::vector<Gsm8kQuestion> read_gsm8k_jsonl(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw Error(cat("cannot open GSM8K file ", file.string()));
  std::vector<Gsm8kQuestion> out;
  int64_t line_no = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (strip(line).empty()) continue;
    const nlohmann::json j = parse_json(line, cat(file.string(), ":", line_no));
    if (!j.is_object() || !j.contains("question") || !j.contains("answer") || !j["question"].is_string() ||
        !j["answer"].is_string())
      throw Error(cat(file.string(), ":", line_no, ": needs string fields \"question\" and \"answer\""));
    Gsm8kQuestion q{j["question"], j["answer"], line_no};
    if (q.answer.find("####") == std::string::npos)
      throw Error(cat(file.string(), ":", line_no, ": the answer has no '####' before its final number"));
    out.push_back(std::move(q));
  }
  if (out.empty()) throw Error(cat("GSM8K file ", file.string(), " holds no question"));
  return out;
}

Gsm8kFiles gsm8k_files(const std::filesystem::path& dir) {
  if (!std::filesystem::is_directory(dir)) throw Error(cat("GSM8K data folder not found: ", dir.string()));
  Gsm8kFiles f{dir / "train.jsonl", dir / "test.jsonl"};
  if (!std::filesystem::exists(f.train)) throw Error(cat("GSM8K data folder ", dir.string(), " has no train.jsonl"));
  if (std::filesystem::exists(f.test)) return f;
  std::vector<std::filesystem::path> others;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().extension() == ".jsonl" && e.path().filename() != "train.jsonl") others.push_back(e.path());
  if (others.size() != 1)
    throw Error(cat("GSM8K data folder ", dir.string(), " needs test.jsonl or exactly one other *.jsonl besides ",
                    "train.jsonl (found ", others.size(), "); or give --train FILE --test FILE"));
  f.test = others[0];
  return f;
}

std::string gsm8k_prompt(const std::vector<Gsm8kQuestion>& train, const std::vector<int64_t>& shots,
                         const std::string& question) {
  std::string s;
  for (int64_t i : shots)
    s += "Question: " + train[size_t(i)].question + "\nAnswer: " + train[size_t(i)].answer + "\n\n";
  return s + "Question: " + question + "\nAnswer:";
}

std::string gsm8k_cot_prompt(int64_t shots, const std::string& question) {
  std::string s;
  for (int64_t i = 0; i < shots; ++i) s += cat("Q: ", kCot[i][0], "\nA: ", kCot[i][1], "\n\n");
  return s + "Q: " + question + "\nA:";
}

std::string gsm8k_strict_match(const std::string& generation, bool cot) {
  static const std::regex plain("#### (-?[0-9.,]+)");
  static const std::regex chain("The answer is (-?[0-9.,]+).");
  return regex_filter(generation, cot ? chain : plain, false);
}

std::string gsm8k_flexible_extract(const std::string& generation) {
  static const std::regex re("(-?[$0-9.,]{2,})|(-?[0-9]+)");
  return regex_filter(generation, re, true);
}

std::string gsm8k_normalise(const std::string& in) {
  std::string s;
  for (char c : in)
    if (c != ',' && c != '$') s += c;  // ",", "\$"
  const size_t hashes = s.rfind("#### ");  // "(?s).*#### "
  if (hashes != std::string::npos) s = s.substr(hashes + 5);
  if (ends_with(s, ".")) s.pop_back();  // "\.$" ($ also matches before a final newline)
  else if (ends_with(s, ".\n")) s.erase(s.size() - 2, 1);
  for (char& c : s)
    if (c >= 'A' && c <= 'Z') c = char(c - 'A' + 'a');
  return s;
}

std::string gsm8k_reference(const Gsm8kQuestion& q, bool cot) {
  if (!cot) return q.answer;
  return strip(q.answer.substr(q.answer.rfind("####") + 4));
}

Gsm8kResult run_gsm8k(llama::LlamaModel& model, const Tokenizer& tok, const Gsm8kOptions& opt) {
  if (opt.offset < 0) throw UsageError("--offset must be >= 0");
  const std::vector<Gsm8kQuestion> test = read_gsm8k_jsonl(opt.test);
  std::vector<Gsm8kQuestion> train;
  if (!opt.cot) train = read_gsm8k_jsonl(opt.train);
  Gsm8kResult result;
  result.shots = opt.shots < 0 ? (opt.cot ? kGsm8kCotExemplars : 5) : opt.shots;
  if (opt.cot && result.shots > kGsm8kCotExemplars)
    throw Error(cat("--shots ", result.shots, " is more than gsm8k_cot's ", kGsm8kCotExemplars, " exemplars"));
  if (!opt.cot && result.shots > int64_t(train.size()))
    throw Error(cat("--shots ", result.shots, " is more than the ", train.size(), " training questions of ",
                    opt.train.string()));
  result.until = {opt.cot ? "Q:" : "Question:", "</s>", "<|im_end|>"};
  if (tok.eos_id() >= 0) {  // lm-eval appends the EOS text when it is not there yet
    const std::string eos = tok.decode({tok.eos_id()});
    if (!eos.empty() && std::find(result.until.begin(), result.until.end(), eos) == result.until.end())
      result.until.push_back(eos);
  }
  const int64_t size = int64_t(test.size());
  if (opt.offset >= size)
    throw UsageError(cat("--offset ", opt.offset, " is past the last of the ", size, " questions of ", opt.test.string()));
  const int64_t begin = opt.offset;
  const int64_t end = opt.limit < 0 ? size : begin + std::min<int64_t>(size - begin, opt.limit);

  // Prompts, with the sampler walked over the skipped questions too.
  PythonRandom rnd(opt.seed);
  std::vector<Gsm8kSample> samples;
  for (int64_t i = 0; i < end; ++i) {
    std::vector<int64_t> shots;
    if (!opt.cot) shots = rnd.sample(int64_t(train.size()), result.shots);
    if (i < begin) continue;
    Gsm8kSample s;
    s.index = i;
    s.fewshot_indices = shots;
    s.context = opt.cot ? gsm8k_cot_prompt(result.shots, test[size_t(i)].question)
                        : gsm8k_prompt(train, shots, test[size_t(i)].question);
    s.target = gsm8k_reference(test[size_t(i)], opt.cot);
    samples.push_back(std::move(s));
  }
  std::vector<std::vector<int32_t>> prompts(samples.size());
  parallel_for(int64_t(samples.size()), [&](int64_t q) {  // the tokenizers are thread-safe
    samples[size_t(q)].context_ids = tok.encode_with_special(samples[size_t(q)].context);
    prompts[size_t(q)] = generation_context(samples[size_t(q)].context_ids, opt.max_length, opt.max_gen_toks);
  });

  Progress progress(opt.progress, opt.cot ? "gsm8k_cot" : "gsm8k", int64_t(samples.size()), "questions");
  int64_t max_prompt = 1;
  for (const auto& p : prompts) max_prompt = std::max<int64_t>(max_prompt, int64_t(p.size()));
  const int64_t slots = llama::KvCache::slots_that_fit(
      model, std::max<int64_t>(1, std::min<int64_t>(opt.slots, int64_t(prompts.size()))), max_prompt + opt.max_gen_toks,
      max_prompt);
  llama::KvCache cache = llama::KvCache::for_model(model, slots, max_prompt + opt.max_gen_toks);
  llama::GenerateOptions go;
  go.max_new_tokens = opt.max_gen_toks;
  go.eos_ids = opt.eos_ids;
  std::vector<std::vector<int32_t>> generated(prompts.size());
  // The text so far of each sequence, decoded incrementally (a stream decoder per sequence), so a
  // step checks the stop strings on its new bytes instead of re-decoding the whole generation.
  std::vector<std::unique_ptr<StreamDecoder>> decoders(prompts.size());
  std::vector<std::string> texts(prompts.size());
  size_t longest_stop = 0;
  for (const std::string& u : result.until) longest_stop = std::max(longest_stop, u.size());
  std::vector<bool> hit_stop(prompts.size(), false);
  // Emitting in order as questions finish (generation finishes them out of order).
  std::vector<bool> finished(prompts.size(), false);
  std::vector<llama::StopReason> reasons(prompts.size(), llama::StopReason::MaxTokens);
  size_t next_out = 0;
  int64_t done = 0;
  auto finish = [&](size_t q) {
    Gsm8kSample& s = samples[q];
    decoders[q].reset();
    texts[q] = std::string();
    std::string text = tok.decode_skip_special(generated[q]);
    for (const std::string& u : result.until) {
      const size_t at = text.find(u);
      if (at != std::string::npos) text.resize(at);
    }
    s.generation = text;
    s.generated_tokens = int64_t(generated[q].size());
    s.stop_reason = hit_stop[q] ? "until" : reasons[q] == llama::StopReason::Eos ? "eos" : "max_gen_toks";
    s.strict = gsm8k_strict_match(text, opt.cot);
    s.flexible = gsm8k_flexible_extract(text);
    const std::string ref = gsm8k_normalise(s.target);
    s.strict_correct = gsm8k_normalise(s.strict) == ref;
    s.flexible_correct = gsm8k_normalise(s.flexible) == ref;
    finished[q] = true;
    progress.update(++done);
    while (next_out < samples.size() && finished[next_out]) {
      const Gsm8kSample& o = samples[next_out++];
      result.questions += 1;
      result.strict_correct += o.strict_correct ? 1 : 0;
      result.flexible_correct += o.flexible_correct ? 1 : 0;
      result.generated_tokens += o.generated_tokens;
      if (opt.on_sample) opt.on_sample(o);
    }
  };
  auto on_token = [&](size_t q, int32_t t) {
    generated[q].push_back(t);
    bool stop = false;
    if (std::find(opt.eos_ids.begin(), opt.eos_ids.end(), t) == opt.eos_ids.end()) {
      if (!decoders[q]) decoders[q] = tok.stream_decoder_skip_special();
      std::string& text = texts[q];
      const size_t before = text.size();
      text += decoders[q]->push(t);
      // A stop string ending in the new bytes starts at most longest_stop - 1 bytes before them.
      const size_t from = before >= longest_stop ? before - longest_stop + 1 : 0;
      for (const std::string& u : result.until) stop = stop || text.find(u, from) != std::string::npos;
      if (stop) hit_stop[q] = true;
      if (!stop && int64_t(generated[q].size()) < opt.max_gen_toks) return true;
    }
    if (!stop && std::find(opt.eos_ids.begin(), opt.eos_ids.end(), t) != opt.eos_ids.end())
      reasons[q] = llama::StopReason::Eos;
    finish(q);
    return false;
  };
  if (!prompts.empty()) llama::generate(model, cache, prompts, go, on_token);
  progress.finish();
  return result;
}

}  // namespace loft::eval
