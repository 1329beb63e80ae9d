#include "models/llama/generation_config.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "engine/core/error.h"
#include "models/llama/config.h"
#include "engine/io/json_fields.h"
#include "engine/io/json_read.h"

namespace loft::llama {

namespace fs = std::filesystem;

GenerationConfig GenerationConfig::from_json_text(const std::string& text, const std::string& source) {
  const nlohmann::json j = parse_json(text, source);
  if (!j.is_object()) throw Error(cat(source, ": not a JSON object"));
  const JsonFields f(j, source);
  GenerationConfig g;
  const auto single_id = [&](const char* key) -> std::optional<int64_t> {
    const std::vector<int64_t> ids = f.id_list(key);
    if (ids.empty()) return std::nullopt;
    if (ids.size() != 1) f.fail(key, "must be a single token id");
    return ids[0];
  };
  g.bos_token_id = single_id("bos_token_id");
  g.pad_token_id = single_id("pad_token_id");
  g.eos_token_ids = f.id_list("eos_token_id");
  if (f.has("temperature")) {
    g.temperature = f.number("temperature");
    if (*g.temperature < 0) f.fail("temperature", cat("must be 0 or more, got ", *g.temperature));
  }
  if (f.has("top_p")) {
    g.top_p = f.number("top_p");
    if (!(*g.top_p > 0 && *g.top_p <= 1)) f.fail("top_p", cat("must be in (0, 1], got ", *g.top_p));
  }
  if (f.has("top_k")) {
    g.top_k = f.integer("top_k", 0, INT32_MAX);
  }
  if (f.has("max_new_tokens")) g.max_new_tokens = f.positive("max_new_tokens", INT32_MAX);
  if (f.has("do_sample")) g.do_sample = f.boolean("do_sample", false);
  return g;
}

nlohmann::json GenerationConfig::to_json() const {
  nlohmann::json j = nlohmann::json::object();
  if (bos_token_id) j["bos_token_id"] = *bos_token_id;
  if (eos_token_ids.size() == 1) j["eos_token_id"] = eos_token_ids[0];
  if (eos_token_ids.size() > 1) j["eos_token_id"] = eos_token_ids;
  if (pad_token_id) j["pad_token_id"] = *pad_token_id;
  if (do_sample) j["do_sample"] = *do_sample;
  if (temperature) j["temperature"] = *temperature;
  if (top_p) j["top_p"] = *top_p;
  if (top_k) j["top_k"] = *top_k;
  if (max_new_tokens) j["max_new_tokens"] = *max_new_tokens;
  return j;
}

std::vector<int32_t> GenerationSettings::stop_ids() const {
  std::vector<int32_t> ids;
  for (const StopId& s : stops) ids.push_back(s.id);
  return ids;
}

void GenerationSettings::add_stop(int32_t id, std::string from) {
  if (id < 0) return;
  if (std::none_of(stops.begin(), stops.end(), [&](const StopId& s) { return s.id == id; }))
    stops.push_back({id, std::move(from)});
}

nlohmann::json GenerationSettings::to_generation_config_json() const {
  GenerationConfig g = file.value_or(GenerationConfig{});
  g.eos_token_ids.assign(stops.size(), 0);
  std::transform(stops.begin(), stops.end(), g.eos_token_ids.begin(), [](const StopId& s) { return s.id; });
  return g.to_json();
}

namespace {

// Fails naming `source` and `field` when `id` cannot be a token of a vocabulary of `vocab` ids.
void check_in_vocab(int64_t id, int64_t vocab, const std::string& vocab_from, const std::string& source,
                    const char* field) {
  if (id >= vocab)
    throw Error(cat(source, ": field ", field, ": token id ", id, " is outside the vocabulary (", vocab,
                    " tokens in ", vocab_from, ")"));
}

}  // namespace

GenerationSettings load_generation_settings(const fs::path& model_dir, const Tokenizer& tok) {
  // The smaller vocabulary bounds every id: the tokenizer must decode it, the model must emit it.
  int64_t vocab = tok.vocab_size();
  std::string vocab_from = "the tokenizer";
  std::optional<LlamaConfig> cfg;
  const fs::path config_file = model_dir / "config.json";
  if (fs::exists(config_file)) {
    cfg = load_llama_config(config_file);
    if (cfg->vocab_size < vocab) vocab = cfg->vocab_size, vocab_from = "config.json vocab_size";
  }
  GenerationSettings s;
  const fs::path gen_file = model_dir / "generation_config.json";
  if (fs::exists(gen_file)) {
    s.file = GenerationConfig::from_json_text(read_json_text(gen_file), gen_file.string());
    const std::string src = gen_file.string();
    if (s.file->bos_token_id) check_in_vocab(*s.file->bos_token_id, vocab, vocab_from, src, "bos_token_id");
    if (s.file->pad_token_id) check_in_vocab(*s.file->pad_token_id, vocab, vocab_from, src, "pad_token_id");
    for (int64_t id : s.file->eos_token_ids) {
      check_in_vocab(id, vocab, vocab_from, src, "eos_token_id");
      s.add_stop(int32_t(id), "generation_config.json");
    }
  }
  if (cfg) {
    if (cfg->bos_token_id) check_in_vocab(*cfg->bos_token_id, vocab, vocab_from, config_file.string(), "bos_token_id");
    for (int64_t id : cfg->eos_token_ids) {
      check_in_vocab(id, vocab, vocab_from, config_file.string(), "eos_token_id");
      s.add_stop(int32_t(id), "config.json");
    }
  }
  if (tok.eos_id() >= 0) {
    check_in_vocab(tok.eos_id(), vocab, vocab_from, "the tokenizer", "eos");
    s.add_stop(tok.eos_id(), "tokenizer");
  }
  return s;
}

void add_adapter_stops(GenerationSettings& settings, const fs::path& adapter_dir, int64_t vocab) {
  const fs::path file = adapter_dir / "generation_config.json";
  if (!fs::exists(file)) return;
  const GenerationConfig g = GenerationConfig::from_json_text(read_json_text(file), file.string());
  for (int64_t id : g.eos_token_ids) {
    check_in_vocab(id, vocab, "the model", file.string(), "eos_token_id");
    settings.add_stop(int32_t(id), "adapter generation_config.json");
  }
}

}  // namespace loft::llama
