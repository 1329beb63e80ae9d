#include "app/tokenizer_info.h"

#include "engine/core/error.h"

namespace loft::app {

namespace {

constexpr size_t kSpecialShown = 5;  // special tokens listed in the text report

std::vector<AddedToken> special_tokens(const Tokenizer& tok) {
  std::vector<AddedToken> out;
  for (AddedToken& t : tok.added_tokens())
    if (t.special) out.push_back(std::move(t));
  return out;
}

nlohmann::json id_json(const Tokenizer& tok, int32_t id) {
  if (id < 0) return nullptr;
  return {{"id", id}, {"text", token_text(tok, id)}};
}

std::string id_text(const Tokenizer& tok, int32_t id) {
  return id < 0 ? "none" : cat(token_text(tok, id), " (", id, ")");
}

std::string template_text(const TokenizerInfo& info) {
  if (info.detection.family) return info.detection.summary();
  return cat(chat_template_name(info.chat_template), " for chat data, from the tokenizer's special tokens (",
             info.detection.summary(), ")");
}

}  // namespace

std::string token_text(const Tokenizer& tok, int32_t id) {
  for (const AddedToken& t : tok.added_tokens())
    if (t.id == id) return t.content;
  return tok.piece(id);
}

TokenizerInfo describe_tokenizer(const std::filesystem::path& model_dir) {
  TokenizerInfo info;
  info.detection = detect_chat_template(model_dir);
  try {
    info.tok = load_tokenizer(model_dir);
  } catch (const Error& e) {
    info.load_error = e.what();
    return info;
  }
  info.chat_template = data::default_template(data::RecordFormat::messages, *info.tok, info.detection.family);
  info.generation = llama::load_generation_settings(model_dir, *info.tok);
  return info;
}

void add_tokenizer_json(nlohmann::json& j, const TokenizerInfo& info) {
  j["chat_template"] = {{"name", info.tok || info.detection.family
                                     ? nlohmann::json(chat_template_name(info.chat_template))
                                     : nlohmann::json(nullptr)},
                        {"auto_detected", info.detection.family.has_value()},
                        {"has_chat_template", info.detection.has_chat_template},
                        {"detail", info.detection.summary()}};
  if (!info.tok) {
    j["tokenizer"] = {{"error", info.load_error}};
    j["stop_ids"] = nullptr;
    j["generation_config"] = nullptr;
    return;
  }
  const Tokenizer& tok = *info.tok;
  nlohmann::json specials = nlohmann::json::array();
  for (const AddedToken& t : special_tokens(tok)) specials.push_back({{"id", t.id}, {"text", t.content}});
  j["tokenizer"] = {{"kind", tok.kind()},
                    {"vocab_size", tok.vocab_size()},
                    {"bos", id_json(tok, tok.bos_id())},
                    {"eos", id_json(tok, tok.eos_id())},
                    {"pad", id_json(tok, tok.pad_id())},
                    {"unk", id_json(tok, tok.unk_id())},
                    {"adds_bos", tok.adds_bos()},
                    {"adds_eos", tok.adds_eos()},
                    {"special_tokens", {{"count", specials.size()}, {"tokens", specials}}}};
  nlohmann::json stops = nlohmann::json::array();
  for (const llama::StopId& s : info.generation->stops)
    stops.push_back({{"id", s.id}, {"text", token_text(tok, s.id)}, {"from", s.from}});
  j["stop_ids"] = stops;
  j["generation_config"] = info.generation->file ? info.generation->file->to_json() : nlohmann::json(nullptr);
}

void print_tokenizer_text(std::ostream& out, const TokenizerInfo& info) {
  if (!info.tok) {
    out << "tokenizer     cannot load: " << info.load_error << "\nchat template " << template_text(info) << '\n';
    return;
  }
  const Tokenizer& tok = *info.tok;
  out << "tokenizer     " << tok.kind() << ", vocab " << tok.vocab_size() << "; BOS " << id_text(tok, tok.bos_id())
      << (tok.adds_bos() ? ", added by default" : ", not added by default") << "; EOS " << id_text(tok, tok.eos_id())
      << "; pad " << id_text(tok, tok.pad_id()) << "; unk " << id_text(tok, tok.unk_id()) << '\n';
  const std::vector<AddedToken> specials = special_tokens(tok);
  out << "special       " << specials.size() << " tokens";
  for (size_t i = 0; i < specials.size() && i < kSpecialShown; ++i)
    out << (i ? ", " : ": ") << specials[i].content << " (" << specials[i].id << ")";
  if (specials.size() > kSpecialShown) out << ", ... (--json lists all)";
  out << "\nchat template " << template_text(info) << "\nstop ids      ";
  for (size_t i = 0; i < info.generation->stops.size(); ++i) {
    const llama::StopId& s = info.generation->stops[i];
    out << (i ? ", " : "") << s.id << ' ' << token_text(tok, s.id) << " (" << s.from << ")";
  }
  if (info.generation->stops.empty()) out << "none";
  out << '\n';
  if (info.generation->file) {
    const nlohmann::json g = info.generation->file->to_json();
    std::string defaults;
    for (const char* key : {"do_sample", "temperature", "top_p", "top_k", "max_new_tokens"})
      if (g.contains(key)) defaults += cat(defaults.empty() ? "" : ", ", key, " ", g[key].dump());
    if (!defaults.empty()) out << "generation    " << defaults << " (generation_config.json)\n";
  }
}

}  // namespace loft::app
