#include "tokenizer/sentencepiece_tokenizer.h"

#include <system_error>

#include "engine/core/error.h"
#include "tokenizer/utf8.h"

namespace loft {

namespace {

constexpr std::string_view kSpaceSymbol = "\xE2\x96\x81";  // U+2581 "▁", SentencePiece's space

std::string replace_space_symbol(std::string_view piece) {
  std::string out;
  out.reserve(piece.size());
  for (size_t i = 0; i < piece.size();) {
    if (piece.substr(i, kSpaceSymbol.size()) == kSpaceSymbol) {
      out += ' ';
      i += kSpaceSymbol.size();
    } else {
      out += piece[i++];
    }
  }
  return out;
}

// libsentencepiece messages may span lines; loft errors are one line.
std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  return s;
}

}  // namespace

// Mirrors SentencePieceProcessor::Decode one id at a time: byte-fallback runs become UTF-8
// characters (U+FFFD per invalid byte, decided only once enough bytes are known), and the
// leading-space drop applies until text has appeared or a leading "▁" was dropped. A model with
// a denormalizer (none of the Llama tokenizers has one) would differ: decode() applies it last.
class SentencePieceStreamDecoder final : public StreamDecoder {
 public:
  explicit SentencePieceStreamDecoder(const SentencePieceTokenizer& tok) : tok_(tok) {}

  std::string push(int32_t id) override {
    tok_.check_id(id);
    if (tok_.kind_[size_t(id)] == SentencePieceTokenizer::Kind::kByte) {
      pending_ += char(tok_.byte_[size_t(id)]);
      return drain(/*end_of_run=*/false);
    }
    std::string out = drain(/*end_of_run=*/true);
    if (dropped_space_ || emitted_any_) at_start_ = false;
    const std::string text = tok_.text_of(id, at_start_, &dropped_space_);
    emitted_any_ = emitted_any_ || !text.empty();
    return out + text;
  }

  std::string finish() override { return drain(/*end_of_run=*/true); }

 private:
  // Emits the complete characters at the front of the pending bytes; at the end of a byte run an
  // incomplete character is invalid too.
  std::string drain(bool end_of_run) {
    std::string out;
    pending_.erase(0, utf8::append_decided(pending_, end_of_run, /*per_subpart=*/false, out));
    emitted_any_ = emitted_any_ || !out.empty();
    return out;
  }

  const SentencePieceTokenizer& tok_;
  std::string pending_;  // bytes of an incomplete byte-fallback character
  bool at_start_ = true, dropped_space_ = false, emitted_any_ = false;
};

SentencePieceTokenizer::SentencePieceTokenizer(const std::filesystem::path& model_file)
    : file_(model_file) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(file_, ec))
    throw Error(cat("SentencePiece model ", file_, " does not exist or is not a regular file"));
  const auto status = sp_.Load(file_.string());
  if (!status.ok())
    throw Error(cat("cannot load SentencePiece model ", file_, ": ", one_line(status.ToString())));
  vocab_size_ = sp_.GetPieceSize();
  if (vocab_size_ <= 0) throw Error(cat("SentencePiece model ", file_, " has an empty vocabulary"));
  bos_id_ = sp_.bos_id();
  eos_id_ = sp_.eos_id();
  unk_id_ = sp_.unk_id();
  pad_id_ = sp_.pad_id();

  kind_.assign(size_t(vocab_size_), Kind::kText);
  byte_.assign(size_t(vocab_size_), 0);
  for (int32_t id = 0; id < vocab_size_; ++id) {
    if (sp_.IsControl(id)) {
      kind_[size_t(id)] = Kind::kControl;
    } else if (sp_.IsUnknown(id)) {
      kind_[size_t(id)] = Kind::kUnknown;
    } else if (sp_.IsByte(id)) {
      // The library accepts only "<0xNN>" as a byte piece.
      kind_[size_t(id)] = Kind::kByte;
      const int value = std::stoi(sp_.IdToPiece(id).substr(3, 2), nullptr, 16);
      byte_[size_t(id)] = static_cast<unsigned char>(value);
    }
  }
  if (unk_id_ >= 0) unk_surface_ = sp_.DecodeIds({unk_id_});
  probe_leading_space_rules();
}

// The model's normalizer flags are not reachable through the installed headers (no protobuf
// definitions), so they are read off the library's own decode of two probe sequences.
void SentencePieceTokenizer::probe_leading_space_rules() {
  int32_t word = -1;  // a text piece "▁x…"
  for (int32_t id = 0; id < vocab_size_ && word < 0; ++id) {
    const std::string& p = sp_.IdToPiece(id);
    if (kind_[size_t(id)] == Kind::kText && p.size() > kSpaceSymbol.size() &&
        p.starts_with(kSpaceSymbol))
      word = id;
  }
  if (word < 0) return;  // no piece starts with "▁": the rules never apply
  const std::string word_text = replace_space_symbol(sp_.IdToPiece(word));  // " x…"
  drops_leading_space_ = sp_.DecodeIds({word}) == word_text.substr(1);
  const int32_t space = sp_.PieceToId(kSpaceSymbol);
  if (drops_leading_space_ && space >= 0 && sp_.IdToPiece(space) == kSpaceSymbol &&
      kind_[size_t(space)] == Kind::kText)
    drops_while_empty_ = sp_.DecodeIds({space, word}) == sp_.DecodeIds({word});
}

void SentencePieceTokenizer::check_id(int32_t id) const {
  if (id < 0 || id >= vocab_size_)
    throw Error(cat("token id ", id, " is out of range for tokenizer ", file_, " (vocabulary size ",
                    vocab_size_, ")"));
}

std::vector<int32_t> SentencePieceTokenizer::encode(std::string_view text) const {
  if (const auto bad = utf8::find_invalid(text))
    throw Error(cat("text is not valid UTF-8: ", bad->problem, " at byte offset ", bad->offset));
  std::vector<int> ids;
  const auto status = sp_.Encode(text, &ids);
  if (!status.ok()) throw Error(cat("SentencePiece encode failed: ", one_line(status.ToString())));
  return std::vector<int32_t>(ids.begin(), ids.end());
}

std::string SentencePieceTokenizer::decode(const std::vector<int32_t>& ids) const {
  for (const int32_t id : ids) check_id(id);
  std::string text;
  const auto status = sp_.Decode(std::vector<int>(ids.begin(), ids.end()), &text);
  if (!status.ok()) throw Error(cat("SentencePiece decode failed: ", one_line(status.ToString())));
  return text;
}

std::string SentencePieceTokenizer::text_of(int32_t id, bool at_start, bool* dropped_space) const {
  *dropped_space = false;
  switch (kind_[size_t(id)]) {
    case Kind::kControl:
      return "";
    case Kind::kUnknown:
      return unk_surface_;
    case Kind::kByte:
      return std::string(1, char(byte_[size_t(id)]));
    case Kind::kText:
      break;
  }
  std::string_view p = sp_.IdToPiece(id);
  if (at_start && drops_leading_space_ && p.starts_with(kSpaceSymbol)) {
    p.remove_prefix(kSpaceSymbol.size());
    *dropped_space = !drops_while_empty_;
  }
  return replace_space_symbol(p);
}

std::string SentencePieceTokenizer::piece(int32_t id) const {
  check_id(id);
  bool dropped;
  return text_of(id, /*at_start=*/false, &dropped);
}

std::unique_ptr<StreamDecoder> SentencePieceTokenizer::stream_decoder() const {
  return std::make_unique<SentencePieceStreamDecoder>(*this);
}

int32_t SentencePieceTokenizer::special_id(std::string_view piece) const {
  const int id = sp_.PieceToId(piece);
  if (id < 0 || id >= vocab_size_ || sp_.IdToPiece(id) != piece) return -1;
  const Kind k = kind_[size_t(id)];
  return k == Kind::kControl || k == Kind::kUnknown ? id : -1;
}

std::vector<AddedToken> SentencePieceTokenizer::added_tokens() const {
  std::vector<AddedToken> out;
  for (int32_t id = 0; id < vocab_size_; ++id) {
    const Kind k = kind_[size_t(id)];
    if (k == Kind::kControl || k == Kind::kUnknown) out.push_back({id, sp_.IdToPiece(id), true});
  }
  return out;
}

std::unique_ptr<Tokenizer> load_sentencepiece(const std::filesystem::path& model_file) {
  return std::make_unique<SentencePieceTokenizer>(model_file);
}

}  // namespace loft
