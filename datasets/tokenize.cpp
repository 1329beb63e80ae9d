#include "datasets/tokenize.h"

#include <algorithm>
#include <cstdint>

#include "engine/core/error.h"
#include "engine/io/json_fields.h"
#include "engine/io/json_read.h"

namespace loft::data {

int64_t TokenizedExample::trained_count() const {
  return std::count_if(trained.begin() + std::min<size_t>(1, trained.size()), trained.end(),
                       [](uint8_t t) { return t != 0; });
}

TokenizedExample tokenize_conversation(const Conversation& conv, ChatTemplate tmpl, const Tokenizer& tok,
                                       bool train_on_inputs, bool add_generation_prompt) {
  TokenizedExample ex;
  for (const TemplatePiece& p : render_template(tmpl, conv, tok, add_generation_prompt)) {
    const uint8_t trained = (p.response || train_on_inputs) ? 1 : 0;
    if (p.id >= 0) {
      ex.ids.push_back(p.id);
      ex.trained.push_back(trained);
      continue;
    }
    const std::vector<int32_t> ids = tok.encode(p.text);
    ex.ids.insert(ex.ids.end(), ids.begin(), ids.end());
    ex.trained.insert(ex.trained.end(), ids.size(), trained);
  }
  if (!ex.trained.empty()) ex.trained[0] = 0;  // nothing precedes the first token
  return ex;
}

bool truncate_example(TokenizedExample& ex, size_t max_tokens) {
  if (ex.ids.size() <= max_tokens) return false;
  ex.ids.resize(max_tokens);
  ex.trained.resize(max_tokens);
  return true;
}

nlohmann::json to_json(const TokenizedExample& ex) { return {{"ids", ex.ids}, {"trained", ex.trained}}; }

TokenizedExample tokenized_example_from_json(const nlohmann::json& j) {
  // A saved example is read back exactly or refused: an id of 2^40 or -3, or a flag of 300, is a
  // damaged state, never a token to truncate into range.
  const JsonFields f(j, "the saved data position", "example.");
  auto list = [&](const char* key) -> const nlohmann::json& {
    const nlohmann::json& v = f.at(key);
    if (!v.is_array()) f.fail(key, cat("must be a list, got ", brief(v)));
    return v;
  };
  const nlohmann::json& ids = list("ids");
  const nlohmann::json& trained = list("trained");
  if (ids.size() != trained.size())
    f.fail("trained", cat("has ", trained.size(), " flags for ", ids.size(), " ids"));
  TokenizedExample ex;
  ex.ids.reserve(ids.size());
  ex.trained.reserve(ids.size());
  for (const nlohmann::json& v : ids) {
    if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT32_MAX)) ||
        v.get<int64_t>() < 0 || v.get<int64_t>() > INT32_MAX)
      f.fail("ids", cat("holds ", brief(v), ", not a token id from 0 to ", INT32_MAX));
    ex.ids.push_back(int32_t(v.get<int64_t>()));
  }
  for (const nlohmann::json& v : trained) {
    if (!v.is_number_unsigned() || v.get<uint64_t>() > 1)
      f.fail("trained", cat("holds ", brief(v), ", not 0 or 1"));
    ex.trained.push_back(uint8_t(v.get<uint64_t>()));
  }
  return ex;
}

}  // namespace loft::data
