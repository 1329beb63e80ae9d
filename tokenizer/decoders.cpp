#include "tokenizer/decoders.h"

#include <optional>

#include "tokenizer/byte_level.h"
#include "tokenizer/utf8.h"

namespace loft {

namespace {

using Kind = DecoderStep::Kind;

// "<0xAB>" -> 0xAB (ByteFallback's byte tokens).
std::optional<unsigned char> byte_token(const std::string& t) {
  if (t.size() != 6 || !t.starts_with("<0x") || t.back() != '>') return std::nullopt;
  unsigned value = 0;
  for (size_t i = 3; i < 5; ++i) {
    const char c = t[i];
    const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (d < 0) return std::nullopt;
    value = value * 16 + unsigned(d);
  }
  return static_cast<unsigned char>(value);
}

// ByteLevel: the bytes a token stands for when all its characters are in GPT-2's alphabet, else
// its own UTF-8 bytes.
std::string byte_level_bytes(const std::string& t) {
  std::string bytes;
  bytes.reserve(t.size());
  for (size_t i = 0; i < t.size();) {
    const int n = utf8::char_length(static_cast<unsigned char>(t[i]));
    const int b = byte_level::byte_of(utf8::decode_char(std::string_view(t).substr(i)));
    if (b < 0) return t;
    bytes += char(b);
    i += size_t(n);
  }
  return bytes;
}

std::string replace_all(const std::string& t, const Regex& pattern, const std::string& content) {
  std::string out;
  size_t last = 0;
  pattern.for_each_match(t, [&](size_t start, size_t end) {
    out.append(t, last, start - last);
    out += content;
    last = end;
  });
  out.append(t, last, std::string::npos);
  return out;
}

// Metaspace: the replacement becomes a space, or nothing in the first token.
std::string metaspace(const std::string& t, const DecoderStep& s, bool first) {
  std::string out;
  for (size_t at = 0;;) {
    const size_t hit = t.find(s.content, at);
    out.append(t, at, hit == std::string::npos ? std::string::npos : hit - at);
    if (hit == std::string::npos) return out;
    if (!(first && s.drop_first)) out += ' ';
    at = hit + s.content.size();
  }
}

// Strip: up to `start` leading and `stop` trailing `strip_char` characters.
std::string strip(const std::string& t, const DecoderStep& s) {
  std::vector<size_t> starts;  // byte offset of each character
  for (size_t i = 0; i < t.size(); i += size_t(utf8::char_length(static_cast<unsigned char>(t[i])))) starts.push_back(i);
  const auto is_strip = [&](size_t ci) { return utf8::decode_char(std::string_view(t).substr(starts[ci])) == s.strip_char; };
  size_t start_cut = 0, stop_cut = starts.size();
  for (size_t i = 0; i < s.start && i < starts.size() && is_strip(i); ++i) start_cut = i + 1;
  for (size_t i = 0; i < s.stop && i < starts.size() && is_strip(starts.size() - 1 - i); ++i) stop_cut = starts.size() - 1 - i;
  if (stop_cut <= start_cut) return {};
  const size_t from = starts[start_cut], to = stop_cut < starts.size() ? starts[stop_cut] : t.size();
  return t.substr(from, to - from);
}

// A ByteFallback run: its text when valid UTF-8, else one U+FFFD per byte.
void flush_byte_run(std::string& run, std::vector<std::string>& out) {
  if (run.empty()) return;
  if (!utf8::find_invalid(run)) {
    out.push_back(run);
  } else {
    for (size_t i = 0; i < run.size(); ++i) out.emplace_back(utf8::kReplacementChar);
  }
  run.clear();
}

// One step in streaming form. `fused` says an earlier step (Fuse, ByteLevel) made the token list
// a single token, which now arrives in pieces.
class Stage {
 public:
  Stage(const DecoderStep& step, bool fused) : s_(step), fused_(fused) {}

  void push(std::string item, std::vector<std::string>& out) {
    switch (s_.kind) {
      case Kind::replace:
        out.push_back(replace_all(item, *s_.pattern, s_.content));
        return;
      case Kind::metaspace:
        out.push_back(metaspace(item, s_, fused_ || index_ == 0));
        ++index_;
        return;
      case Kind::fuse:
        out.push_back(std::move(item));
        return;
      case Kind::byte_fallback:
        if (const auto b = byte_token(item)) {
          run_ += char(*b);
          return;
        }
        flush_byte_run(run_, out);
        out.push_back(std::move(item));
        return;
      case Kind::strip:
        if (!fused_) out.push_back(strip(item, s_));
        else push_fused_strip(item, out);
        return;
      case Kind::byte_level:
        bytes_ += byte_level_bytes(item);
        out.push_back(drain_bytes(false));
        return;
    }
  }

  void finish(std::vector<std::string>& out) {
    if (s_.kind == Kind::byte_fallback) flush_byte_run(run_, out);
    if (s_.kind == Kind::byte_level) out.push_back(drain_bytes(true));
    if (s_.kind == Kind::strip && fused_) {
      // The held trailing run loses its last `stop` characters.
      size_t n = 0, cut = tail_.size();
      while (n < s_.stop && cut > 0) {
        size_t p = cut - 1;
        while (p > 0 && (static_cast<unsigned char>(tail_[p]) & 0xC0) == 0x80) --p;
        cut = p;
        ++n;
      }
      out.push_back(tail_.substr(0, cut));
      tail_.clear();
    }
  }

 private:
  // Strip over one token that arrives in pieces: the leading characters are cut while still at
  // the start, the trailing run of strip characters is held until text follows it or it ends.
  void push_fused_strip(std::string item, std::vector<std::string>& out) {
    size_t i = 0;
    while (at_start_ && i < item.size()) {
      if (stripped_ >= s_.start || utf8::decode_char(std::string_view(item).substr(i)) != s_.strip_char) {
        at_start_ = false;
        break;
      }
      i += size_t(utf8::char_length(static_cast<unsigned char>(item[i])));
      ++stripped_;
    }
    item.erase(0, i);
    if (s_.stop == 0) {
      out.push_back(std::move(item));
      return;
    }
    tail_ += item;
    // Keep the trailing run of strip characters.
    size_t keep_from = tail_.size();
    while (keep_from > 0) {
      size_t p = keep_from - 1;
      while (p > 0 && (static_cast<unsigned char>(tail_[p]) & 0xC0) == 0x80) --p;
      if (utf8::decode_char(std::string_view(tail_).substr(p)) != s_.strip_char) break;
      keep_from = p;
    }
    out.push_back(tail_.substr(0, keep_from));
    tail_.erase(0, keep_from);
  }

  // The decided prefix of the pending bytes (Rust's from_utf8_lossy over all of them): an
  // incomplete character at the end waits for more bytes unless this is the end.
  std::string drain_bytes(bool at_end) {
    std::string out;
    bytes_.erase(0, utf8::append_decided(bytes_, at_end, /*per_subpart=*/true, out));
    return out;
  }

  const DecoderStep& s_;
  bool fused_;
  size_t index_ = 0;          // metaspace: tokens seen
  std::string run_;           // byte_fallback: the pending byte run
  std::string bytes_;         // byte_level: bytes of an incomplete character
  bool at_start_ = true;      // strip (fused): no kept character yet
  size_t stripped_ = 0;       // strip (fused): leading characters cut so far
  std::string tail_;          // strip (fused): held trailing strip characters
};

bool fuses(Kind k) { return k == Kind::fuse || k == Kind::byte_level; }

class ChainStream final : public TokenTextStream {
 public:
  ChainStream(const std::vector<DecoderStep>& steps, bool present) : present_(present) {
    bool fused = false;
    for (const DecoderStep& s : steps) {
      stages_.emplace_back(s, fused);
      fused = fused || fuses(s.kind);
    }
  }

  std::string push(std::string token) override {
    if (!present_) {
      std::string out = first_ ? token : " " + token;
      first_ = false;
      return out;
    }
    std::vector<std::string> items{std::move(token)};
    return run(items, 0, false);
  }

  std::string finish() override {
    std::vector<std::string> none;
    return present_ ? run(none, 0, true) : std::string();
  }

 private:
  // Feeds `items` to stage `i` (and, when finishing, finishes it), then the results onwards.
  std::string run(std::vector<std::string>& items, size_t i, bool finishing) {
    if (i == stages_.size()) {
      std::string out;
      for (const std::string& s : items) out += s;
      return out;
    }
    std::vector<std::string> next;
    for (std::string& item : items) stages_[i].push(std::move(item), next);
    if (finishing) stages_[i].finish(next);
    return run(next, i + 1, finishing);
  }

  bool present_, first_ = true;
  std::vector<Stage> stages_;
};

// A chain that cannot decide token by token: everything waits for finish().
class BufferedStream final : public TokenTextStream {
 public:
  explicit BufferedStream(const DecoderChain& chain) : chain_(chain) {}
  std::string push(std::string token) override {
    tokens_.push_back(std::move(token));
    return {};
  }
  std::string finish() override {
    std::string out = chain_.decode(std::move(tokens_));
    tokens_.clear();
    return out;
  }

 private:
  const DecoderChain& chain_;
  std::vector<std::string> tokens_;
};

}  // namespace

std::string DecoderChain::decode(std::vector<std::string> tokens) const {
  if (!present_) {
    std::string out;
    for (size_t i = 0; i < tokens.size(); ++i) out += (i ? " " : "") + tokens[i];
    return out;
  }
  for (const DecoderStep& s : steps_) {
    std::vector<std::string> next;
    next.reserve(tokens.size());
    switch (s.kind) {
      case Kind::byte_level: {
        std::string bytes;
        for (const std::string& t : tokens) bytes += byte_level_bytes(t);
        next.push_back(utf8::lossy(bytes));
        break;
      }
      case Kind::metaspace:
        for (size_t i = 0; i < tokens.size(); ++i) next.push_back(metaspace(tokens[i], s, i == 0));
        break;
      case Kind::replace:
        for (const std::string& t : tokens) next.push_back(replace_all(t, *s.pattern, s.content));
        break;
      case Kind::byte_fallback: {
        std::string run;
        for (std::string& t : tokens) {
          if (const auto b = byte_token(t)) {
            run += char(*b);
            continue;
          }
          flush_byte_run(run, next);
          next.push_back(std::move(t));
        }
        flush_byte_run(run, next);
        break;
      }
      case Kind::fuse: {
        std::string all;
        for (const std::string& t : tokens) all += t;
        next.push_back(std::move(all));
        break;
      }
      case Kind::strip:
        for (const std::string& t : tokens) next.push_back(strip(t, s));
        break;
    }
    tokens = std::move(next);
  }
  std::string out;
  for (const std::string& t : tokens) out += t;
  return out;
}

std::string DecoderChain::piece(const std::string& token) const {
  std::string t = token;
  bool raw = false;  // t holds raw bytes that may not be valid UTF-8
  for (const DecoderStep& s : steps_) {
    if (raw) break;
    switch (s.kind) {
      case Kind::byte_level:
        t = byte_level_bytes(t);
        raw = true;
        break;
      case Kind::byte_fallback:
        if (const auto b = byte_token(t)) {
          t = std::string(1, char(*b));
          raw = true;
        }
        break;
      case Kind::metaspace:
        t = metaspace(t, s, false);
        break;
      case Kind::replace:
        t = replace_all(t, *s.pattern, s.content);
        break;
      case Kind::fuse:
      case Kind::strip:
        break;
    }
  }
  return t;
}

bool DecoderChain::streamable() const {
  bool fused = false;
  for (const DecoderStep& s : steps_) {
    if (fused && (s.kind == Kind::byte_fallback || s.kind == Kind::byte_level ||
                  (s.kind == Kind::replace && !s.single_char_pattern)))
      return false;
    fused = fused || fuses(s.kind);
  }
  return true;
}

std::unique_ptr<TokenTextStream> DecoderChain::stream() const {
  if (!streamable()) return std::make_unique<BufferedStream>(*this);
  return std::make_unique<ChainStream>(steps_, present_);
}

}  // namespace loft
