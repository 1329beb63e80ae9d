#include "tokenizer/pre_tokenizers.h"

#include <algorithm>

#include "tokenizer/byte_level.h"
#include "tokenizer/normalizers.h"

namespace loft {

namespace {

// GPT-2's pre-tokenization pattern (openai/gpt-2 encoder.py), as tokenizers' ByteLevel uses it.
constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

}  // namespace

void split_pre_token(const PreToken& t, const Regex& pattern, SplitBehavior behavior, bool invert, PreTokens& out) {
  thread_local std::vector<Regex::Range> ranges;
  pattern.find_ranges(t.text, ranges);
  if (invert)
    for (Regex::Range& r : ranges) r.match = !r.match;
  // (start, end) of each piece, per behaviour; Removed drops the matches.
  thread_local std::vector<Regex::Range> cuts;
  cuts.clear();
  bool previous_match = false;
  switch (behavior) {
    case SplitBehavior::isolated:
      for (const Regex::Range& r : ranges) cuts.push_back({r.start, r.end, false});
      break;
    case SplitBehavior::removed:
      for (const Regex::Range& r : ranges) cuts.push_back({r.start, r.end, r.match});
      break;
    case SplitBehavior::contiguous:
      for (const Regex::Range& r : ranges) {
        if (r.match == previous_match && !cuts.empty()) cuts.back().end = r.end;
        else cuts.push_back({r.start, r.end, false});
        previous_match = r.match;
      }
      break;
    case SplitBehavior::merged_with_previous:
      for (const Regex::Range& r : ranges) {
        if (r.match && !previous_match && !cuts.empty()) cuts.back().end = r.end;
        else cuts.push_back({r.start, r.end, false});
        previous_match = r.match;
      }
      break;
    case SplitBehavior::merged_with_next:
      // Built from the end: a delimiter joins the piece after it.
      for (size_t i = ranges.size(); i-- > 0;) {
        const Regex::Range& r = ranges[i];
        if (r.match && !previous_match && !cuts.empty()) cuts.back().start = r.start;
        else cuts.push_back({r.start, r.end, false});
        previous_match = r.match;
      }
      std::reverse(cuts.begin(), cuts.end());
      break;
  }
  for (const Regex::Range& c : cuts)
    if (!c.match && c.end > c.start) out.push_back(slice(t, c.start, c.end));
}

void SplitPreTokenizer::pre_tokenize(PreTokens& pieces) const {
  thread_local PreTokens out;
  out.clear();
  for (const PreToken& t : pieces) split_pre_token(t, pattern_, behavior_, invert_, out);
  pieces.swap(out);
}

ByteLevelPreTokenizer::ByteLevelPreTokenizer(bool add_prefix_space, bool use_regex) : add_prefix_space_(add_prefix_space) {
  if (use_regex) gpt2_ = std::make_unique<Regex>(kGpt2Pattern, "ByteLevel pre-tokenizer");
}

void ByteLevelPreTokenizer::pre_tokenize(PreTokens& pieces) const {
  if (add_prefix_space_)
    for (PreToken& t : pieces)
      if (!t.text.starts_with(' ')) prepend(t, " ");
  if (gpt2_) {
    thread_local PreTokens out;
    out.clear();
    for (const PreToken& t : pieces) split_pre_token(t, *gpt2_, SplitBehavior::isolated, false, out);
    pieces.swap(out);
  }
  // Every byte becomes its printable character; bytes aligned to offset 0 stay so.
  thread_local std::string mapped;
  for (PreToken& t : pieces) {
    mapped.clear();
    byte_level::encode(t.text, mapped);
    if (t.zero_prefix > 0) {
      std::string head;
      byte_level::encode(std::string_view(t.text).substr(0, t.zero_prefix), head);
      t.zero_prefix = uint32_t(head.size());
    }
    t.text.swap(mapped);
  }
}

MetaspacePreTokenizer::MetaspacePreTokenizer(std::string replacement, PrependScheme scheme, bool split)
    : replacement_(std::move(replacement)),
      scheme_(scheme),
      split_(split),
      space_(Regex::literal(" ", "Metaspace pre-tokenizer")),
      replacement_re_(Regex::literal(replacement_, "Metaspace pre-tokenizer")) {}

void MetaspacePreTokenizer::pre_tokenize(PreTokens& pieces) const {
  PreTokens out;
  out.reserve(pieces.size());
  for (PreToken& t : pieces) {
    replace_matches(t, space_, replacement_);
    const bool prepends = scheme_ == PrependScheme::always || (scheme_ == PrependScheme::first && t.at_origin);
    if (prepends && !t.text.starts_with(replacement_)) prepend(t, replacement_);
    if (split_) split_pre_token(t, replacement_re_, SplitBehavior::merged_with_next, false, out);
    else if (!t.text.empty()) out.push_back(std::move(t));
  }
  pieces = std::move(out);
}

}  // namespace loft
