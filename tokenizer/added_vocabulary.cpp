#include "tokenizer/added_vocabulary.h"

#include <algorithm>

#include "tokenizer/utf8.h"

namespace loft {

namespace {

// Unicode White_Space (Rust's \s, which tokenizers uses for lstrip/rstrip).
bool is_white_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

// Start of the last character of non-empty valid UTF-8 `s`.
size_t last_char_start(std::string_view s) {
  size_t p = s.size() - 1;
  while (p > 0 && (static_cast<unsigned char>(s[p]) & 0xC0) == 0x80) --p;
  return p;
}

}  // namespace

void AddedVocabulary::Trie::add(std::string_view s, int32_t token) {
  int32_t node = 0;
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    auto& next = nodes[size_t(node)].next;
    const auto it = std::lower_bound(next.begin(), next.end(), std::pair<unsigned char, int32_t>{c, -1});
    if (it != next.end() && it->first == c) {
      node = it->second;
    } else {
      const int32_t child = int32_t(nodes.size());
      next.insert(it, {c, child});
      nodes.emplace_back();
      node = child;
    }
  }
  first[static_cast<unsigned char>(s[0])] = true;
  nodes[size_t(node)].token = token;  // a repeated content keeps the last token
}

std::pair<int32_t, size_t> AddedVocabulary::Trie::longest_at(std::string_view text, size_t pos) const {
  std::pair<int32_t, size_t> best{-1, pos};
  int32_t node = 0;
  for (size_t i = pos; i < text.size(); ++i) {
    const auto& next = nodes[size_t(node)].next;
    const auto c = static_cast<unsigned char>(text[i]);
    const auto it = std::lower_bound(next.begin(), next.end(), std::pair<unsigned char, int32_t>{c, -1});
    if (it == next.end() || it->first != c) break;
    node = it->second;
    if (nodes[size_t(node)].token >= 0) best = {nodes[size_t(node)].token, i + 1};
  }
  return best;
}

AddedVocabulary::AddedVocabulary(std::vector<AddedTokenSpec> tokens, const std::vector<std::string>& match_text)
    : tokens_(std::move(tokens)) {
  bool single_word = false;
  for (size_t i = 0; i < tokens_.size(); ++i) {
    const AddedTokenSpec& t = tokens_[i];
    if (!match_text[i].empty()) (t.normalized ? normalized_ : raw_).add(match_text[i], int32_t(i));
    by_content_[t.content] = int32_t(i);
    if (size_t(t.id) >= index_by_id_.size()) index_by_id_.resize(size_t(t.id) + 1, -1);
    index_by_id_[size_t(t.id)] = int32_t(i);
    single_word = single_word || t.single_word;
  }
  if (single_word) word_char_ = std::make_unique<Regex>("\\A\\w\\z", "added token single_word");
}

const AddedTokenSpec* AddedVocabulary::by_id(int32_t id) const {
  if (id < 0 || size_t(id) >= index_by_id_.size() || index_by_id_[size_t(id)] < 0) return nullptr;
  return &tokens_[size_t(index_by_id_[size_t(id)])];
}

int32_t AddedVocabulary::id(std::string_view content) const {
  const auto it = by_content_.find(content);
  return it == by_content_.end() ? -1 : tokens_[size_t(it->second)].id;
}

void AddedVocabulary::split(std::string_view text, bool normalized_set, std::vector<Span>& out) const {
  if (text.empty()) return;
  const Trie& trie = normalized_set ? normalized_ : raw_;
  const auto is_word_char = [&](std::string_view ch) {
    bool hit = false;
    word_char_->for_each_match(ch, [&](size_t, size_t) { hit = true; });
    return hit;
  };
  size_t start_offset = 0;
  for (size_t pos = 0; pos < text.size();) {
    if (!trie.first[static_cast<unsigned char>(text[pos])]) {
      ++pos;
      continue;
    }
    const auto [index, match_end] = trie.longest_at(text, pos);
    if (index < 0) {
      ++pos;
      continue;
    }
    const AddedTokenSpec& tok = tokens_[size_t(index)];
    size_t start = pos, stop = match_end;
    pos = match_end;
    if (tok.single_word) {
      const bool start_space = start == 0 || !is_word_char(text.substr(last_char_start(text.substr(0, start))));
      const bool stop_space =
          stop == text.size() || !is_word_char(text.substr(stop, size_t(utf8::char_length(uint8_t(text[stop])))));
      if (!start_space || !stop_space) continue;
    }
    if (tok.lstrip) {
      size_t s = start;
      while (s > 0) {
        const size_t p = last_char_start(text.substr(0, s));
        if (!is_white_space(utf8::decode_char(text.substr(p)))) break;
        s = p;
      }
      start = std::max(s, start_offset);
    }
    if (tok.rstrip) {
      while (stop < text.size() && is_white_space(utf8::decode_char(text.substr(stop))))
        stop += size_t(utf8::char_length(uint8_t(text[stop])));
    }
    if (start_offset < start) out.push_back({start_offset, start, -1});
    out.push_back({start, stop, tok.id});
    start_offset = stop;
  }
  if (start_offset < text.size()) out.push_back({start_offset, text.size(), -1});
}

}  // namespace loft
