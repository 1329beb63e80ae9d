#include "export/gguf/gguf_vocab.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "engine/core/error.h"
#include "export/gguf/sha256.h"
#include "tokenizer/bpe_tokenizer.h"
#include "tokenizer/sentencepiece_tokenizer.h"
#include "tokenizer/tokenizer_json.h"

namespace loft::gguf {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// A JSON file's object, or an empty object when the file is absent.
json read_json_object(const fs::path& file) {
  std::error_code ec;
  if (!fs::exists(file, ec)) return json::object();
  std::ifstream in(file);
  try {
    json j = json::parse(in);
    if (!j.is_object()) throw Error(cat(file, ": expected a JSON object"));
    return j;
  } catch (const json::parse_error& e) {
    throw Error(cat(file, " is not valid JSON: ", e.what()));
  }
}

// convert_hf_to_gguf.py's does_token_look_special.
bool looks_special(const std::string& t) {
  const auto wrapped = [&](std::string_view open, std::string_view close) {
    return t.size() >= open.size() + close.size() && t.starts_with(open) && t.ends_with(close);
  };
  return t == "<pad>" || t == "<mask>" || t == "<2mass>" || t == "[@BOS@]" || wrapped("<|", "|>") ||
         wrapped("<\xEF\xBD\x9C", "\xEF\xBD\x9C>") || wrapped("<unused", ">");
}

// User-defined added tokens are stored with "▁" as a plain space (llama.cpp pre-normalizes them).
std::string metaspace_to_space(std::string s) {
  static const std::string kMeta = "\xE2\x96\x81";
  for (size_t p = s.find(kMeta); p != std::string::npos; p = s.find(kMeta, p)) s.replace(p, kMeta.size(), " ");
  return s;
}

void pad_to(Vocab& v, int64_t vocab_size, float score) {
  for (int64_t i = int64_t(v.tokens.size()); i < vocab_size; ++i) {
    v.tokens.push_back(cat("[PAD", i, "]"));
    if (v.model == "llama") v.scores.push_back(score);
    v.token_types.push_back(kUnused);
  }
}

// SentencePiece pieces as _create_vocab_sentencepiece takes them, with tokenizer_config.json's
// added_tokens_decoder applied.
void sentencepiece_vocab(Vocab& v, const fs::path& dir, int64_t vocab_size, const json& tok_config) {
  const SentencePieceTokenizer tok(dir / "tokenizer.model");
  const auto& sp = tok.processor();
  v.model = "llama";
  v.pre = "default";
  pad_to(v, vocab_size, -10000.0f);
  for (int id = 0; id < sp.GetPieceSize() && id < vocab_size; ++id) {
    v.tokens[size_t(id)] = sp.IdToPiece(id);
    v.scores[size_t(id)] = sp.GetScore(id);
    v.token_types[size_t(id)] = sp.IsUnknown(id) ? kUnknown : sp.IsControl(id) ? kControl : sp.IsUnused(id) ? kUnused
                                : sp.IsByte(id) ? kByte : kNormal;
  }
  if (!tok_config.contains("added_tokens_decoder") || !tok_config["added_tokens_decoder"].is_object()) return;
  for (const auto& [key, entry] : tok_config["added_tokens_decoder"].items()) {
    int64_t id = -1;
    try {
      id = std::stoll(key);
    } catch (const std::exception&) {
      throw Error(cat(dir / "tokenizer_config.json", ": added_tokens_decoder key '", key, "' is not a token id"));
    }
    if (id < 0 || id >= vocab_size || !entry.is_object() || !entry.contains("content") || !entry["content"].is_string()) continue;
    std::string content = entry["content"].get<std::string>();
    const bool special = entry.value("special", false) || looks_special(content);
    v.token_types[size_t(id)] = special ? kControl : kUserDefined;
    v.tokens[size_t(id)] = special ? content : metaspace_to_space(content);
    v.scores[size_t(id)] = -1000.0f;
  }
}

// gguf-py's LlamaHfVocab over a SentencePiece-style tokenizer.json.
void llama_hf_vocab(Vocab& v, const BpeTokenizer& tok, int64_t vocab_size) {
  v.model = "llama";
  v.pre = "default";
  const BpeModel& m = tok.model();
  std::vector<bool> special(size_t(std::max<int64_t>(tok.vocab_size(), 0)), false);
  for (const AddedToken& a : tok.added_tokens())
    if (a.special) special[size_t(a.id)] = true;
  static const std::regex kByteToken("<0x[0-9A-Fa-f]{2}>");
  for (int32_t id = 0; id < m.end_id(); ++id) {
    const std::string* t = m.token(id);
    v.tokens.push_back(t ? *t : cat("[PAD", id, "]"));
    v.scores.push_back(-1000.0f);
    v.token_types.push_back(!t ? kUnused : std::regex_match(*t, kByteToken) ? kByte : special[size_t(id)] ? kControl : kNormal);
  }
  for (int32_t id = m.end_id(); id < tok.vocab_size(); ++id) {  // added tokens beyond the model's
    const AddedTokenSpec* a = tok.added_vocabulary().by_id(id);
    v.tokens.push_back(a ? a->content : cat("[PAD", id, "]"));
    v.scores.push_back(-1000.0f);
    v.token_types.push_back(!a ? kUnused : a->special ? kControl : kUserDefined);
  }
  pad_to(v, vocab_size, -1000.0f);
}

// get_vocab_base + _set_vocab_gpt2 over a byte-level tokenizer.json.
void gpt2_vocab(Vocab& v, const BpeTokenizer& tok, int64_t vocab_size, const fs::path& file) {
  v.model = "gpt2";
  const std::string hash = pre_tokenizer_hash(pre_tokenizer_probe_ids(tok));
  // Fingerprints from convert_hf_to_gguf.py's table: the Llama 3 tokenizer with BOS added by the
  // post-processor (Meta-Llama-3) and without (as Smaug-Llama-3 ships it), which llama.cpp splits
  // the same way; Qwen's.
  if (hash == "0ef9807a4087ebef797fc749390439009c3b9eda9ad1a097abbe738f486c01e5") {
    v.pre = "llama-bpe";
  } else if (hash == "c136ed14d01c2745d4f60a9596ae66800e2b61fa45643e72436041855ad4089d") {
    v.pre = "smaug-bpe";
  } else if (hash == "e636dc30a262dcc0d8c323492e32ae2b70728f4df7dfe9737d9f920a282b8aea") {
    v.pre = "qwen2";  // Qwen 1.5's tokenizer, whose vocabulary and merges Qwen 2, 2.5 and 3 keep
  } else {
    throw Error(cat(file, ": llama.cpp does not know this byte-level pre-tokenizer (fingerprint ", hash,
                    "); loft writes GGUF vocabularies for Llama 3's ('llama-bpe'), Qwen's ('qwen2') and ",
                    "SentencePiece ones"));
  }
  const BpeModel& m = tok.model();
  const AddedVocabulary& added = tok.added_vocabulary();
  for (int32_t id = 0; id < vocab_size; ++id) {
    if (const AddedTokenSpec* a = added.by_id(id)) {
      const bool special = a->special || looks_special(a->content);
      v.tokens.push_back(special ? a->content : metaspace_to_space(a->content));
      v.token_types.push_back(special ? kControl : kUserDefined);
    } else if (const std::string* t = m.token(id)) {
      v.tokens.push_back(*t);
      v.token_types.push_back(kNormal);
    } else {
      v.tokens.push_back(cat("[PAD", id, "]"));
      v.token_types.push_back(kUnused);
    }
  }
  const auto part = [&](int32_t id) {
    std::string s = *m.token(id);
    for (size_t p = s.find(' '); p != std::string::npos; p = s.find(' ', p)) s.replace(p, 1, "\xC4\xA0");  // U+0120
    return s;
  };
  v.merges.reserve(m.merges().size());
  for (const auto& [a, b] : m.merges()) v.merges.push_back(part(a) + " " + part(b));
}

// SpecialVocab: named tokens of tokenizer_config.json among tokenizer.json's added tokens, then
// config.json's *_token_id (first set wins; ids past the vocabulary are skipped).
void special_tokens(Vocab& v, const fs::path& dir, const Tokenizer* tok_json, const json& tok_config) {
  const int64_t n = int64_t(v.tokens.size());
  const auto set = [&](std::optional<uint32_t>& slot, const json& id) {
    if (!slot && id.is_number_integer() && id.get<int64_t>() >= 0 && id.get<int64_t>() < n) slot = uint32_t(id.get<int64_t>());
  };
  const std::pair<const char*, std::optional<uint32_t>*> kinds[] = {{"bos", &v.bos}, {"eos", &v.eos}, {"unk", &v.unk}, {"pad", &v.pad}};
  if (tok_json) {
    for (auto [kind, slot] : kinds) {
      const std::string key = cat(kind, "_token");
      if (!tok_config.contains(key)) continue;
      const json& e = tok_config[key];
      const json content = e.is_string() ? e : e.is_object() ? e.value("content", json()) : json();
      if (!content.is_string()) continue;
      for (const AddedToken& a : tok_json->added_tokens())
        if (a.content == content.get<std::string>()) {
          set(*slot, a.id);
          break;
        }
    }
  }
  // Written when tokenizer_config.json sets the flag, or (true) when tokenizer.json's post-processor
  // adds the token; otherwise left to llama.cpp's default for the vocabulary type.
  const auto flag = [&](const char* key, bool adds, std::optional<bool>& out) {
    if (tok_config.contains(key) && tok_config[key].is_boolean()) {
      out = tok_json ? adds : tok_config[key].get<bool>();
    } else if (tok_json && adds) {
      out = true;
    }
  };
  flag("add_bos_token", tok_json && tok_json->adds_bos(), v.add_bos);
  flag("add_eos_token", tok_json && tok_json->adds_eos(), v.add_eos);
  const json config = read_json_object(dir / "config.json");
  for (auto [kind, slot] : kinds) {
    const std::string key = cat(kind, "_token_id");
    if (config.contains(key)) set(*slot, config[key]);
  }
}

void chat_template(Vocab& v, const fs::path& dir, const json& tok_config) {
  if (tok_config.empty()) return;
  std::error_code ec;
  std::string alt;
  if (fs::exists(dir / "chat_template.jinja", ec)) {
    std::ifstream in(dir / "chat_template.jinja", std::ios::binary);
    alt.assign(std::istreambuf_iterator<char>(in), {});
  }
  const json t = tok_config.value("chat_template", json());
  if (t.is_string()) {
    v.chat_template = t.get<std::string>();
  } else if (t.is_array()) {  // [{"name", "template"}]: the default one
    for (const json& e : t)
      if (e.is_object() && e.value("name", "") == "default" && e.contains("template") && e["template"].is_string())
        v.chat_template = e["template"].get<std::string>();
  } else {
    v.chat_template = alt;
  }
}

}  // namespace

std::vector<int32_t> pre_tokenizer_probe_ids(const Tokenizer& tok) {
  // convert_hf_to_gguf.py's chktxt, byte for byte.
  static const std::string kProbe =
      "\n \n\n \n\n\n \t \t\t \t\n  \n   \n    \n     \n\U0001F680 (normal) \U0001F636\u200D\U0001F32B\uFE0F "
      "(multiple emojis concatenated) \u2705 \U0001F999\U0001F999 3 33 333 3333 33333 333333 3333333 33333333 "
      "3.3 3..3 3...3 កាន់តែពិសេសអាច\U0001F601 ?我想在apple工作1314151天\uFF5E ------======= нещо на "
      "Български ''''''```````\"\"\"\"......!!!!!!?????? I've been 'told he's there, 'RE you sure? 'M not sure "
      "I'll make it, 'D you like some tea? We'Ve a'lL";
  return tok.encode_with_special(kProbe);
}

std::string pre_tokenizer_hash(const std::vector<int32_t>& ids) {
  std::string text = "[";
  for (size_t i = 0; i < ids.size(); ++i) text += cat(i ? ", " : "", ids[i]);
  text += "]";
  return sha256_hex(text);
}

Vocab read_vocab(const fs::path& dir, int64_t vocab_size) {
  std::error_code ec;
  const json tok_config = read_json_object(dir / "tokenizer_config.json");
  const bool has_json = fs::exists(dir / "tokenizer.json", ec);
  const std::unique_ptr<Tokenizer> tok_json = has_json ? load_tokenizer_json(dir) : nullptr;
  Vocab v;
  if (fs::exists(dir / "tokenizer.model", ec)) {
    sentencepiece_vocab(v, dir, vocab_size, tok_config);
  } else if (tok_json) {
    const auto* bpe = dynamic_cast<const BpeTokenizer*>(tok_json.get());
    LOFT_CHECK(bpe, "tokenizer.json in ", dir, " did not load as a BPE tokenizer");
    if (bpe->byte_level()) {
      gpt2_vocab(v, *bpe, vocab_size, dir / "tokenizer.json");
    } else {
      llama_hf_vocab(v, *bpe, vocab_size);
    }
  } else {
    throw Error(cat("model folder ", dir, " has no tokenizer (neither tokenizer.model nor tokenizer.json) to write into the GGUF file"));
  }
  special_tokens(v, dir, tok_json.get(), tok_config);
  chat_template(v, dir, tok_config);
  return v;
}

void set_vocab_metadata(Writer& w, const Vocab& v) {
  w.set("tokenizer.ggml.model", Value::string(v.model));
  w.set("tokenizer.ggml.pre", Value::string(v.pre));
  w.set("tokenizer.ggml.tokens", Value::string_array(v.tokens));
  if (!v.scores.empty()) w.set("tokenizer.ggml.scores", Value::array(v.scores));
  w.set("tokenizer.ggml.token_type", Value::array(v.token_types));
  if (!v.merges.empty()) w.set("tokenizer.ggml.merges", Value::string_array(v.merges));
  const std::pair<const char*, const std::optional<uint32_t>*> ids[] = {
      {"tokenizer.ggml.bos_token_id", &v.bos}, {"tokenizer.ggml.eos_token_id", &v.eos},
      {"tokenizer.ggml.unknown_token_id", &v.unk}, {"tokenizer.ggml.padding_token_id", &v.pad}};
  for (auto [key, id] : ids)
    if (*id) w.set(key, Value::of<uint32_t>(**id));
  if (v.add_bos) w.set("tokenizer.ggml.add_bos_token", Value::of<bool>(*v.add_bos));
  if (v.add_eos) w.set("tokenizer.ggml.add_eos_token", Value::of<bool>(*v.add_eos));
  if (!v.chat_template.empty()) w.set("tokenizer.chat_template", Value::string(v.chat_template));
}

}  // namespace loft::gguf
