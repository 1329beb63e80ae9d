#include "tokenizer/bpe_tokenizer.h"

#include <algorithm>

#include "engine/core/error.h"
#include "tokenizer/utf8.h"

namespace loft {

class BpeStreamDecoder final : public StreamDecoder {
 public:
  explicit BpeStreamDecoder(const BpeTokenizer& tok) : tok_(tok), stream_(tok.decoder_.stream()) {}
  std::string push(int32_t id) override {
    const std::string* t = tok_.token_of(id);
    return t ? stream_->push(*t) : std::string();
  }
  std::string finish() override { return stream_->finish(); }

 private:
  const BpeTokenizer& tok_;
  std::unique_ptr<TokenTextStream> stream_;
};

BpeTokenizer::BpeTokenizer(TokenizerJson tj, const TokenizerConfig& config)
    : file_(tj.file),
      model_(std::move(tj.model)),
      normalizer_(std::move(tj.normalizer)),
      pre_tokenizer_(std::move(tj.pre_tokenizer)),
      decoder_(std::move(tj.decoder)),
      byte_level_(tj.byte_level) {
  // transformers' LlamaTokenizer has default special tokens; other classes take them from the file.
  const bool llama_class = config.tokenizer_class == "LlamaTokenizer" || config.tokenizer_class == "LlamaTokenizerFast";
  std::optional<std::string> bos = config.bos, eos = config.eos, unk = config.unk;
  if (llama_class && !config.file.empty()) {
    if (!bos) bos = "<s>";
    if (!eos) eos = "</s>";
    if (!unk) unk = "<unk>";
  }

  // transformers adds the named special tokens it knows as special added tokens when the file
  // lacks them (here: only those the model's vocabulary has).
  std::vector<AddedTokenSpec> added = std::move(tj.added);
  std::vector<std::string> named;
  for (const std::optional<std::string>* s : std::initializer_list<const std::optional<std::string>*>{&bos, &eos, &unk, &config.pad})
    if (*s) named.push_back(**s);
  named.insert(named.end(), config.extra_special.begin(), config.extra_special.end());
  for (const std::string& content : named) {
    const bool present = std::any_of(added.begin(), added.end(), [&](const AddedTokenSpec& a) { return a.content == content; });
    const int32_t id = model_->id(content);
    if (!present && id >= 0 && !content.empty()) added.push_back({id, content, true, false, false, false, false});
  }
  std::vector<std::string> match_text;
  vocab_size_ = model_->end_id();
  for (const AddedTokenSpec& a : added) {
    PreToken t = make_pre_token(a.content, 0);
    if (a.normalized && normalizer_) normalizer_->normalize(t);
    match_text.push_back(t.text);
    vocab_size_ = std::max(vocab_size_, a.id + 1);
  }
  added_ = std::make_unique<AddedVocabulary>(std::move(added), match_text);

  const auto fail = [&](const std::string& msg) { throw Error(cat("tokenizer.json ", file_, ": ", msg)); };
  if (config.add_bos || config.add_eos) {
    // transformers rebuilds the post-processor from these flags (TokenizersBackend.update_post_processor).
    adds_bos_ = config.add_bos.value_or(false) && bos;
    adds_eos_ = config.add_eos.value_or(false) && eos;
  } else if (tj.template_prefix) {
    const auto& pre = *tj.template_prefix;
    const auto& post = *tj.template_suffix;
    if (pre.size() > 1 || post.size() > 1)
      fail("the post-processor adds more than one token before or after the text; loft supports BOS and EOS only");
    if (!pre.empty() && bos && *bos != pre[0])
      fail(cat("the post-processor adds '", pre[0], "' but tokenizer_config.json's bos_token is '", *bos, "'"));
    if (!post.empty() && eos && *eos != post[0])
      fail(cat("the post-processor adds '", post[0], "' but tokenizer_config.json's eos_token is '", *eos, "'"));
    if (!pre.empty()) bos = pre[0], adds_bos_ = true;
    if (!post.empty()) eos = post[0], adds_eos_ = true;
  }
  bos_id_ = bos ? id_of(*bos) : -1;
  eos_id_ = eos ? id_of(*eos) : -1;
  if ((adds_bos_ && bos_id_ < 0) || (adds_eos_ && eos_id_ < 0))
    fail(cat("BOS/EOS '", adds_bos_ && bos_id_ < 0 ? bos.value_or("") : eos.value_or(""),
             "' is added to every sequence but is not in the vocabulary"));
  unk_id_ = model_->unk_id().value_or(unk ? id_of(*unk) : -1);
  pad_id_ = config.pad ? id_of(*config.pad) : -1;
}

int32_t BpeTokenizer::id_of(const std::string& content) const {
  const int32_t a = added_->id(content);
  return a >= 0 ? a : model_->id(content);
}

const std::string* BpeTokenizer::token_of(int32_t id) const {
  if (id < 0 || id >= vocab_size_)
    throw Error(cat("token id ", id, " is out of range for tokenizer ", file_, " (vocabulary size ", vocab_size_, ")"));
  if (const AddedTokenSpec* a = added_->by_id(id)) return &a->content;
  return model_->token(id);
}

void BpeTokenizer::encode_text(PreToken text, std::vector<int32_t>& ids) const {
  thread_local PreTokens pieces;
  pieces.clear();
  pieces.push_back(std::move(text));
  if (pre_tokenizer_) pre_tokenizer_->pre_tokenize(pieces);
  for (const PreToken& p : pieces) model_->encode(p.text, ids);
}

std::vector<int32_t> BpeTokenizer::encode(std::string_view text) const {
  if (const auto bad = utf8::find_invalid(text))
    throw Error(cat("text is not valid UTF-8: ", bad->problem, " at byte offset ", bad->offset));
  std::vector<int32_t> ids;
  std::vector<AddedVocabulary::Span> spans, inner;
  added_->split(text, /*normalized_set=*/false, spans);
  for (const AddedVocabulary::Span& s : spans) {
    if (s.id >= 0) {
      ids.push_back(s.id);
      continue;
    }
    PreToken t = make_pre_token(std::string(text.substr(s.start, s.end - s.start)), s.start);
    if (normalizer_) normalizer_->normalize(t);
    inner.clear();
    added_->split(t.text, /*normalized_set=*/true, inner);
    for (const AddedVocabulary::Span& n : inner) {
      if (n.id >= 0) ids.push_back(n.id);
      else if (n.start == 0 && n.end == t.text.size()) encode_text(std::move(t), ids);
      else encode_text(slice(t, n.start, n.end), ids);
    }
  }
  return ids;
}

std::string BpeTokenizer::decode(const std::vector<int32_t>& ids) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (const int32_t id : ids)
    if (const std::string* t = token_of(id)) tokens.push_back(*t);
  return decoder_.decode(std::move(tokens));
}

std::string BpeTokenizer::piece(int32_t id) const {
  const std::string* t = token_of(id);
  return t ? decoder_.piece(*t) : std::string();
}

std::unique_ptr<StreamDecoder> BpeTokenizer::stream_decoder() const { return std::make_unique<BpeStreamDecoder>(*this); }

std::vector<AddedToken> BpeTokenizer::added_tokens() const {
  std::vector<AddedToken> out;
  for (const AddedTokenSpec& a : added_->tokens()) out.push_back({a.id, a.content, a.special});
  std::sort(out.begin(), out.end(), [](const AddedToken& a, const AddedToken& b) { return a.id < b.id; });
  return out;
}

int32_t BpeTokenizer::special_id(std::string_view piece) const { return added_->id(piece); }

std::unique_ptr<Tokenizer> load_tokenizer_json(const std::filesystem::path& dir) {
  TokenizerJson tj = read_tokenizer_json(dir / "tokenizer.json");
  const TokenizerConfig config = read_tokenizer_config(dir / "tokenizer_config.json");
  return std::make_unique<BpeTokenizer>(std::move(tj), config);
}

}  // namespace loft
