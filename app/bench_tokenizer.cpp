#include "app/bench_tokenizer.h"

#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "datasets/data_loader.h"
#include "engine/core/error.h"
#include "engine/io/json_read.h"
#include "tokenizer/tokenizer.h"

namespace loft::app {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The text of each JSONL record: its string fields in file order, joined by "\n" (for GSM8K the
// question and the answer).
std::vector<std::string> record_texts(const std::filesystem::path& data) {
  std::ifstream in(data);
  if (!in) throw UsageError(cat("--data ", data, ": cannot open"));
  std::vector<std::string> texts;
  size_t line_no = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_no;
    if (line.empty()) continue;
    const nlohmann::ordered_json j = parse_ordered_json(line, cat("--data ", data.string(), ":", line_no));
    std::string text;
    for (const auto& [key, value] : j.items())
      if (value.is_string()) text += (text.empty() ? "" : "\n") + value.get<std::string>();
    texts.push_back(std::move(text));
  }
  if (texts.empty()) throw UsageError(cat("--data ", data, ": no records"));
  return texts;
}

}  // namespace

void run_tokenizer_bench(const std::filesystem::path& tokenizer_dir, const std::filesystem::path& data,
                         int64_t seq, int64_t batch_rows, std::ostream& out) {
  if (data.empty()) throw UsageError("bench data needs --data FILE.jsonl (the records to encode)");
  auto t0 = std::chrono::steady_clock::now();
  const auto tok = load_tokenizer(tokenizer_dir);
  const double load_s = seconds_since(t0);
  const std::vector<std::string> texts = record_texts(data);
  size_t bytes = 0;
  for (const std::string& t : texts) bytes += t.size();

  char line[256];
  std::snprintf(line, sizeof line, "tokenizer %s (%s, vocabulary %d), loaded in %.2f s\n",
                tokenizer_dir.string().c_str(), tok->kind().c_str(), tok->vocab_size(), load_s);
  out << line;
  int64_t tokens = 0;
  for (const char* pass : {"cold", "warm"}) {
    tokens = 0;
    t0 = std::chrono::steady_clock::now();
    for (const std::string& t : texts) tokens += int64_t(tok->encode(t).size());
    const double s = seconds_since(t0);
    std::snprintf(line, sizeof line, "encode    %zu records, %.2f MB, %lld tokens: %.3f s, %.2f MB/s, %.0f tokens/s (%s cache, 1 thread)\n",
                  texts.size(), double(bytes) / 1e6, (long long)tokens, s, double(bytes) / 1e6 / s, double(tokens) / s, pass);
    out << line;
  }

  data::DataConfig config;
  config.train = {{data}};
  config.seq = seq;
  config.batch_rows = batch_rows;
  t0 = std::chrono::steady_clock::now();
  data::DataLoader loader = data::DataLoader::training(config, *tok);
  int64_t row_tokens = 0, batches = 0;
  while (auto b = loader.next()) {
    for (const int32_t d : b->doc_ids) row_tokens += d >= 0;
    ++batches;
  }
  const double s = seconds_since(t0);
  std::snprintf(line, sizeof line,
                "pipeline  %lld batches of %lld x %lld, %lld tokens in rows: %.3f s, %.0f tokens/s (template, ids, packing; 1 thread)\n",
                (long long)batches, (long long)batch_rows, (long long)seq, (long long)row_tokens, s, double(row_tokens) / s);
  out << line;
}

}  // namespace loft::app
