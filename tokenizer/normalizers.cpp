#include "tokenizer/normalizers.h"

#include <utf8proc.h>

#include <algorithm>
#include <cstdlib>

#include "engine/core/error.h"
#include "tokenizer/utf8.h"

namespace loft {

PreToken make_pre_token(std::string text, size_t offset) {
  PreToken t;
  t.at_origin = offset == 0;
  t.zero_prefix = t.at_origin && !text.empty() ? uint32_t(utf8::char_length(uint8_t(text[0]))) : 0;
  t.text = std::move(text);
  return t;
}

PreToken slice(const PreToken& t, size_t start, size_t end) {
  PreToken out;
  out.text = t.text.substr(start, end - start);
  out.at_origin = t.at_origin && start < t.zero_prefix;
  out.zero_prefix = out.at_origin ? uint32_t(std::min(t.zero_prefix - start, end - start)) : 0;
  return out;
}

void prepend(PreToken& t, const std::string& s) {
  if (t.text.empty()) return;
  t.text.insert(0, s);
  // The inserted bytes share the first character's alignment.
  if (t.zero_prefix > 0) t.zero_prefix += uint32_t(s.size());
}

void replace_matches(PreToken& t, const Regex& pattern, const std::string& content) {
  std::string out;
  out.reserve(t.text.size());
  // The new leading run of bytes aligned to original offset 0: old bytes keep their alignment,
  // inserted text takes that of the match's last byte (offset 0 for an empty match at the start).
  const size_t zero = t.zero_prefix;
  bool open = zero > 0;
  uint32_t new_zero = 0;
  const auto kept = [&](size_t from, size_t to) {
    if (!open || from >= to) return;
    const size_t z = from < zero ? std::min(zero, to) - from : 0;
    new_zero += uint32_t(z);
    if (from + z < to) open = false;
  };
  const auto inserted = [&](size_t n, bool at_zero) {
    if (!open || n == 0) return;
    if (at_zero) new_zero += uint32_t(n);
    else open = false;
  };
  size_t last = 0;
  pattern.for_each_match(t.text, [&](size_t start, size_t end) {
    kept(last, start);
    out.append(t.text, last, start - last);
    inserted(content.size(), end == 0 || end - 1 < zero);
    out += content;
    last = end;
  });
  kept(last, t.text.size());
  out.append(t.text, last, std::string::npos);
  t.text = std::move(out);
  t.zero_prefix = new_zero;
}

void PrependNormalizer::normalize(PreToken& t) const { prepend(t, prefix_); }

void ReplaceNormalizer::normalize(PreToken& t) const { replace_matches(t, pattern_, content_); }

void NfcNormalizer::normalize(PreToken& t) const {
  // ASCII is its own NFC: most text never reaches utf8proc.
  if (std::all_of(t.text.begin(), t.text.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; })) return;
  utf8proc_uint8_t* out = nullptr;
  const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(t.text.data()),
                                          utf8proc_ssize_t(t.text.size()), &out,
                                          utf8proc_option_t(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  if (n < 0) throw Error(cat("NFC normalizer: ", utf8proc_errmsg(n)));
  t.text.assign(reinterpret_cast<const char*>(out), size_t(n));
  std::free(out);
  // Composition can merge the first character with what follows; it stays aligned to offset 0.
  if (t.zero_prefix > 0 && !t.text.empty()) t.zero_prefix = uint32_t(utf8::char_length(uint8_t(t.text[0])));
}

}  // namespace loft
