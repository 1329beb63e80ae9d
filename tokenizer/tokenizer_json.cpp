#include "tokenizer/tokenizer_json.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <system_error>

#include "engine/core/error.h"
#include "engine/io/json_fields.h"
#include "engine/io/json_read.h"
#include "tokenizer/utf8.h"

namespace loft {

namespace {

using json = nlohmann::json;

json parse_file(const std::filesystem::path& file, const char* what) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(file, ec))
    throw Error(cat(what, " ", file, " does not exist or is not a regular file"));
  return read_json_file(file);
}

// Field access that names the file and the JSON path on a wrong type.
class Reader {
 public:
  explicit Reader(std::filesystem::path file) : file_(std::move(file)) {}

  [[noreturn]] void fail(const std::string& where, const std::string& msg) const {
    throw Error(cat("tokenizer.json ", file_, ": ", where, ": ", msg));
  }
  const json& object(const json& j, const std::string& where) const {
    if (!j.is_object()) fail(where, "expected an object");
    return j;
  }
  std::string type(const json& j, const std::string& where) const {
    object(j, where);
    const auto it = j.find("type");
    if (it == j.end() || !it->is_string()) fail(where, "has no \"type\"");
    return it->get<std::string>();
  }
  // Typed reads of j's fields; errors name the field as "<where>.<key>".
  JsonFields fields(const json& j, const std::string& where) const {
    return JsonFields(object(j, where), cat("tokenizer.json ", file_), where + ".");
  }
  bool boolean(const json& j, const char* key, bool dflt, const std::string& where) const {
    return fields(j, where).boolean(key, dflt);
  }
  std::optional<std::string> opt_string(const json& j, const char* key, const std::string& where) const {
    const JsonFields f = fields(j, where);
    return f.has(key) ? std::optional(f.string(key)) : std::nullopt;
  }
  std::string string(const json& j, const char* key, const std::string& where) const {
    return fields(j, where).string(key);
  }
  size_t count(const json& j, const char* key, const std::string& where) const {
    return size_t(fields(j, where).integer(key, 0));
  }
  const json& array(const json& j, const char* key, const std::string& where) const {
    const auto it = j.find(key);
    if (it == j.end() || !it->is_array()) fail(where, cat("\"", key, "\" must be an array"));
    return *it;
  }
  // {"String": s} (a literal) or {"Regex": r}; `single` is set when it is one literal character.
  Regex pattern(const json& j, const std::string& where, bool* single = nullptr) const {
    const auto it = j.find("pattern");
    if (it == j.end() || !it->is_object() || it->size() != 1) fail(where, "\"pattern\" must be {\"String\": ...} or {\"Regex\": ...}");
    const std::string label = cat("tokenizer.json ", file_, ": ", where);
    if (const auto s = it->find("String"); s != it->end() && s->is_string()) {
      const std::string lit = s->get<std::string>();
      if (single) *single = !lit.empty() && size_t(utf8::char_length(uint8_t(lit[0]))) == lit.size();
      return Regex::literal(lit, label);
    }
    if (const auto r = it->find("Regex"); r != it->end() && r->is_string()) return Regex(r->get<std::string>(), label);
    fail(where, "\"pattern\" must be {\"String\": ...} or {\"Regex\": ...}");
  }
  const std::filesystem::path& file() const { return file_; }

 private:
  std::filesystem::path file_;
};

std::unique_ptr<Normalizer> normalizer(const Reader& r, const json& j, const std::string& where) {
  if (j.is_null()) return nullptr;
  const std::string t = r.type(j, where);
  if (t == "Sequence") {
    std::vector<std::unique_ptr<Normalizer>> parts;
    const json& list = r.array(j, "normalizers", where);
    for (size_t i = 0; i < list.size(); ++i) {
      auto p = normalizer(r, list[i], cat(where, ".normalizers[", i, "]"));
      if (p) parts.push_back(std::move(p));
    }
    return std::make_unique<SequenceNormalizer>(std::move(parts));
  }
  if (t == "NFC") return std::make_unique<NfcNormalizer>();
  if (t == "Prepend") return std::make_unique<PrependNormalizer>(r.string(j, "prepend", where));
  if (t == "Replace") return std::make_unique<ReplaceNormalizer>(r.pattern(j, where), r.string(j, "content", where));
  r.fail(where, cat("unsupported normalizer type ", brief(t), " (loft supports NFC, Prepend, Replace and Sequence",
                    t.starts_with("NF") ? "; of the Unicode normalization forms only NFC is implemented" : "", ")"));
}

PrependScheme prepend_scheme(const Reader& r, const json& j, const std::string& where) {
  PrependScheme scheme = PrependScheme::always;
  if (const auto s = r.opt_string(j, "prepend_scheme", where)) {
    if (*s == "always") scheme = PrependScheme::always;
    else if (*s == "first") scheme = PrependScheme::first;
    else if (*s == "never") scheme = PrependScheme::never;
    else r.fail(where, cat("unknown prepend_scheme ", brief(*s), " (expected always, first or never)"));
  }
  // Files from before prepend_scheme: add_prefix_space false means never.
  const auto add = j.find("add_prefix_space");
  if (add != j.end() && add->is_boolean() && !add->get<bool>()) {
    if (j.contains("prepend_scheme") && scheme != PrependScheme::never)
      r.fail(where, "add_prefix_space false contradicts prepend_scheme");
    scheme = PrependScheme::never;
  }
  return scheme;
}

std::string one_char(const Reader& r, const json& j, const char* key, const std::string& where) {
  const std::string s = r.string(j, key, where);
  if (s.empty() || size_t(utf8::char_length(uint8_t(s[0]))) != s.size()) r.fail(where, cat("\"", key, "\" must be one character"));
  return s;
}

std::unique_ptr<PreTokenizer> pre_tokenizer(const Reader& r, const json& j, const std::string& where, bool* byte_level) {
  if (j.is_null()) return nullptr;
  const std::string t = r.type(j, where);
  if (t == "Sequence") {
    std::vector<std::unique_ptr<PreTokenizer>> parts;
    const json& list = r.array(j, "pretokenizers", where);
    for (size_t i = 0; i < list.size(); ++i) {
      auto p = pre_tokenizer(r, list[i], cat(where, ".pretokenizers[", i, "]"), byte_level);
      if (p) parts.push_back(std::move(p));
    }
    return std::make_unique<SequencePreTokenizer>(std::move(parts));
  }
  if (t == "Split") {
    const std::string b = r.string(j, "behavior", where);
    SplitBehavior behavior;
    if (b == "Removed") behavior = SplitBehavior::removed;
    else if (b == "Isolated") behavior = SplitBehavior::isolated;
    else if (b == "MergedWithPrevious") behavior = SplitBehavior::merged_with_previous;
    else if (b == "MergedWithNext") behavior = SplitBehavior::merged_with_next;
    else if (b == "Contiguous") behavior = SplitBehavior::contiguous;
    else r.fail(where, cat("unknown Split behavior ", brief(b)));
    return std::make_unique<SplitPreTokenizer>(r.pattern(j, where), behavior, r.boolean(j, "invert", false, where));
  }
  if (t == "ByteLevel") {
    *byte_level = true;
    return std::make_unique<ByteLevelPreTokenizer>(r.boolean(j, "add_prefix_space", true, where),
                                                   r.boolean(j, "use_regex", true, where));
  }
  if (t == "Metaspace")
    return std::make_unique<MetaspacePreTokenizer>(one_char(r, j, "replacement", where), prepend_scheme(r, j, where),
                                                   r.boolean(j, "split", true, where));
  r.fail(where, cat("unsupported pre-tokenizer type ", brief(t), " (loft supports Split, ByteLevel, Metaspace and Sequence)"));
}

void decoder_steps(const Reader& r, const json& j, const std::string& where, std::vector<DecoderStep>& out) {
  const std::string t = r.type(j, where);
  using K = DecoderStep::Kind;
  DecoderStep s;
  s.kind = K::fuse;
  if (t == "Sequence") {
    const json& list = r.array(j, "decoders", where);
    for (size_t i = 0; i < list.size(); ++i) decoder_steps(r, list[i], cat(where, ".decoders[", i, "]"), out);
    return;
  } else if (t == "ByteLevel") {
    s.kind = K::byte_level;
  } else if (t == "Metaspace") {
    s.kind = K::metaspace;
    s.content = one_char(r, j, "replacement", where);
    s.drop_first = prepend_scheme(r, j, where) != PrependScheme::never;
  } else if (t == "Replace") {
    s.kind = K::replace;
    s.pattern = std::make_shared<const Regex>(r.pattern(j, where, &s.single_char_pattern));
    s.content = r.string(j, "content", where);
  } else if (t == "ByteFallback") {
    s.kind = K::byte_fallback;
  } else if (t == "Fuse") {
    s.kind = K::fuse;
  } else if (t == "Strip") {
    s.kind = K::strip;
    s.strip_char = utf8::decode_char(one_char(r, j, "content", where));
    s.start = r.count(j, "start", where);
    s.stop = r.count(j, "stop", where);
  } else {
    r.fail(where, cat("unsupported decoder type ", brief(t),
                      " (loft supports ByteLevel, Metaspace, Replace, ByteFallback, Fuse, Strip and Sequence)"));
  }
  out.push_back(std::move(s));
}

// Finds the TemplateProcessing (alone or in a Sequence) and reads its "single" template.
void post_processor(const Reader& r, const json& j, const std::string& where, TokenizerJson& tj) {
  if (j.is_null()) return;
  const std::string t = r.type(j, where);
  if (t == "ByteLevel") return;  // offsets only
  if (t == "Sequence") {
    const json& list = r.array(j, "processors", where);
    for (size_t i = 0; i < list.size(); ++i) post_processor(r, list[i], cat(where, ".processors[", i, "]"), tj);
    return;
  }
  if (t != "TemplateProcessing")
    r.fail(where, cat("unsupported post-processor type ", brief(t), " (loft supports TemplateProcessing, ByteLevel and Sequence)"));
  if (tj.template_prefix) r.fail(where, "more than one TemplateProcessing");
  const json& single = r.array(j, "single", where);
  const json specials = j.value("special_tokens", json::object());
  r.object(specials, where + ".special_tokens");
  std::vector<std::string> before, after;
  bool seen_sequence = false;
  for (const json& piece : single) {
    if (piece.contains("Sequence")) {
      if (seen_sequence) r.fail(where, "\"single\" has two sequences");
      seen_sequence = true;
      continue;
    }
    const auto st = piece.find("SpecialToken");
    if (st == piece.end() || !st->is_object()) r.fail(where, "\"single\" items must be SpecialToken or Sequence");
    const std::string name = r.string(*st, "id", where + ".single");
    const auto def = specials.find(name);
    if (def == specials.end()) r.fail(where, cat("special token ", brief(name), " is not in special_tokens"));
    const json& tokens = r.array(*def, "tokens", where + ".special_tokens");
    for (const json& tok : tokens) {
      if (!tok.is_string()) r.fail(where, "special_tokens tokens must be strings");
      (seen_sequence ? after : before).push_back(tok.get<std::string>());
    }
  }
  if (!seen_sequence) r.fail(where, "\"single\" has no Sequence");
  tj.template_prefix = std::move(before);
  tj.template_suffix = std::move(after);
}

std::unique_ptr<BpeModel> model(const Reader& r, const json& j) {
  const std::string where = "model";
  r.object(j, where);
  const auto type = j.find("type");
  if (type == j.end() || !type->is_string()) r.fail(where, "has no \"type\" (loft supports BPE)");
  if (*type != "BPE") r.fail(where, cat("unsupported model type ", brief(type->get<std::string>()), " (loft supports BPE)"));
  const auto dropout = j.find("dropout");
  if (dropout != j.end() && !dropout->is_null() && !(dropout->is_number() && dropout->get<double>() == 0.0))
    r.fail(where, "BPE dropout is not supported (it must be null)");
  BpeOptions opt;
  opt.unk_token = r.opt_string(j, "unk_token", where);
  opt.fuse_unk = r.boolean(j, "fuse_unk", false, where);
  opt.byte_fallback = r.boolean(j, "byte_fallback", false, where);
  opt.ignore_merges = r.boolean(j, "ignore_merges", false, where);
  opt.continuing_subword_prefix = r.opt_string(j, "continuing_subword_prefix", where).value_or("");
  opt.end_of_word_suffix = r.opt_string(j, "end_of_word_suffix", where).value_or("");

  const auto vocab = j.find("vocab");
  if (vocab == j.end() || !vocab->is_object()) r.fail(where, "\"vocab\" must be an object of token -> id");
  if (vocab->empty()) r.fail(where, "\"vocab\" is empty: a tokenizer needs tokens");
  std::vector<std::pair<std::string, int32_t>> entries;
  entries.reserve(vocab->size());
  for (auto it = vocab->begin(); it != vocab->end(); ++it) {
    if (!it.value().is_number_unsigned() || it.value().get<uint64_t>() > uint64_t(kMaxTokenId))
      r.fail(where, cat("vocab id of ", brief(it.key()), " is not an id from 0 to ", kMaxTokenId));
    if (const auto bad = utf8::find_invalid(it.key()))
      r.fail(where, cat("vocab token is not valid UTF-8 (", bad->problem, ")"));
    entries.emplace_back(it.key(), int32_t(it.value().get<uint64_t>()));
  }
  // Two tokens on one id would make the id decode to either: refused.
  std::vector<std::pair<int32_t, size_t>> by_id;
  by_id.reserve(entries.size());
  for (size_t i = 0; i < entries.size(); ++i) by_id.emplace_back(entries[i].second, i);
  std::sort(by_id.begin(), by_id.end());
  for (size_t i = 1; i < by_id.size(); ++i)
    if (by_id[i].first == by_id[i - 1].first)
      r.fail(where, cat("vocab tokens ", brief(entries[by_id[i - 1].second].first), " and ",
                        brief(entries[by_id[i].second].first), " both have id ", by_id[i].first));
  std::vector<std::pair<std::string, std::string>> merges;
  const json& list = r.array(j, "merges", where);
  merges.reserve(list.size());
  for (size_t i = 0; i < list.size(); ++i) {
    const json& m = list[i];
    if (m.is_string()) {
      const std::string s = m.get<std::string>();
      if (s.starts_with("#version")) continue;
      const size_t sp = s.find(' ');
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
        r.fail(where, cat("merge ", i, " ", brief(s), " is not two tokens separated by one space"));
      merges.emplace_back(s.substr(0, sp), s.substr(sp + 1));
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
    } else {
      r.fail(where, cat("merge ", i, " must be \"a b\" or [\"a\", \"b\"]"));
    }
  }
  const bool byte_fallback = opt.byte_fallback;
  auto bpe = std::make_unique<BpeModel>(std::move(entries), merges, std::move(opt), cat("tokenizer.json ", r.file().string()));
  // Byte fallback spells unknown characters with <0x00>..<0xFF>; with none of them it cannot.
  if (byte_fallback && !bpe->has_byte_tokens())
    r.fail(where, "byte_fallback is true but \"vocab\" has no byte token (<0x00> .. <0xFF>)");
  return bpe;
}

// tokenizers ignores the ids written in added_tokens and assigns them itself (the model's id of
// the content, else the next free one); a file whose ids differ is rejected rather than guessed.
std::vector<AddedTokenSpec> added_tokens(const Reader& r, const json& root, const BpeModel& m, size_t model_entries) {
  std::vector<AddedTokenSpec> out;
  const auto it = root.find("added_tokens");
  if (it == root.end() || it->is_null()) return out;
  if (!it->is_array()) r.fail("added_tokens", "must be an array");
  StringMap<size_t> seen;
  int64_t max_id = -1;
  for (size_t i = 0; i < it->size(); ++i) {
    const std::string where = cat("added_tokens[", i, "]");
    const json& t = r.object((*it)[i], where);
    AddedTokenSpec s;
    s.id = r.fields(t, where).int32("id", 0);
    s.content = r.string(t, "content", where);
    s.special = r.boolean(t, "special", false, where);
    s.lstrip = r.boolean(t, "lstrip", false, where);
    s.rstrip = r.boolean(t, "rstrip", false, where);
    s.single_word = r.boolean(t, "single_word", false, where);
    s.normalized = r.boolean(t, "normalized", !s.special, where);
    if (s.content.empty()) continue;
    int32_t expected;
    if (const auto prev = seen.find(s.content); prev != seen.end()) {
      expected = out[prev->second].id;
    } else if (const int32_t in_model = m.id(s.content); in_model >= 0) {
      expected = in_model;
    } else {
      const int64_t vocab = int64_t(model_entries);
      expected = int32_t(max_id < 0 ? vocab : (max_id >= vocab || vocab == 0 ? max_id + 1 : vocab));
    }
    if (s.id != expected)
      r.fail(where, cat("added token ", brief(s.content), " has id ", s.id, ", but tokenizers gives it id ", expected,
                        " (a duplicate, or an id out of order or out of range)"));
    max_id = std::max<int64_t>(max_id, s.id);
    if (const auto prev = seen.find(s.content); prev != seen.end()) {
      out[prev->second] = s;
    } else {
      seen[s.content] = out.size();
      out.push_back(std::move(s));
    }
  }
  return out;
}

}  // namespace

TokenizerJson read_tokenizer_json(const std::filesystem::path& file) {
  return tokenizer_json_from(parse_file(file, "tokenizer.json"), file);
}

TokenizerJson tokenizer_json_from(const nlohmann::json& root, const std::filesystem::path& file) {
  Reader r(file);
  r.object(root, "top level");
  TokenizerJson tj;
  tj.file = file;
  const auto version = root.find("version");
  if (version != root.end() && !(version->is_string() && *version == "1.0"))
    r.fail("version", "unknown tokenizer.json version (expected \"1.0\")");
  const auto m = root.find("model");
  if (m == root.end()) r.fail("model", "missing");
  tj.model = model(r, *m);
  tj.added = added_tokens(r, root, *tj.model, m->at("vocab").size());
  tj.normalizer = normalizer(r, root.value("normalizer", json()), "normalizer");
  tj.pre_tokenizer = pre_tokenizer(r, root.value("pre_tokenizer", json()), "pre_tokenizer", &tj.byte_level);
  const json dec = root.value("decoder", json());
  if (!dec.is_null()) {
    std::vector<DecoderStep> steps;
    decoder_steps(r, dec, "decoder", steps);
    tj.decoder = DecoderChain(std::move(steps));
  }
  post_processor(r, root.value("post_processor", json()), "post_processor", tj);
  return tj;
}

TokenizerConfig read_tokenizer_config(const std::filesystem::path& file) {
  TokenizerConfig c;
  std::error_code ec;
  if (!std::filesystem::exists(file, ec)) return c;
  return tokenizer_config_from(parse_file(file, "tokenizer_config.json"), file);
}

TokenizerConfig tokenizer_config_from(const nlohmann::json& j, const std::filesystem::path& file) {
  TokenizerConfig c;
  c.file = file;
  const auto fail = [&](const std::string& msg) { throw Error(cat("tokenizer_config.json ", file, ": ", msg)); };
  if (!j.is_object()) fail("expected an object");
  // A token is "text" or {"content": "text", ...} (a serialized AddedToken).
  const auto token = [&](const json& v, const std::string& key) -> std::optional<std::string> {
    if (v.is_null()) return std::nullopt;
    if (v.is_string()) return v.get<std::string>();
    if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
    fail(cat("\"", key, "\" must be a string or {\"content\": ...}"));
    return std::nullopt;
  };
  const auto named = [&](const char* key) { return j.contains(key) ? token(j[key], key) : std::nullopt; };
  c.bos = named("bos_token");
  c.eos = named("eos_token");
  c.unk = named("unk_token");
  c.pad = named("pad_token");
  for (const char* key : {"additional_special_tokens", "extra_special_tokens"}) {
    if (!j.contains(key) || j[key].is_null()) continue;
    if (!j[key].is_array()) continue;  // a dict of named extras (multimodal models): not special text
    for (const json& v : j[key])
      if (auto s = token(v, key)) c.extra_special.push_back(*s);
  }
  for (auto [key, out] : {std::pair{"add_bos_token", &c.add_bos}, std::pair{"add_eos_token", &c.add_eos}}) {
    if (!j.contains(key)) continue;
    if (!j[key].is_boolean() && !j[key].is_null()) fail(cat("\"", key, "\" must be true or false"));
    *out = j[key].is_boolean() && j[key].get<bool>();
  }
  if (j.contains("tokenizer_class") && j["tokenizer_class"].is_string())
    c.tokenizer_class = j["tokenizer_class"].get<std::string>();
  return c;
}

}  // namespace loft
