// A compiled PCRE2 pattern in UTF mode with Unicode properties (UCP), JIT-compiled, for the
// tokenizer.json patterns (`Split` pre-tokenizers, `Replace` normalizers and decoders). PCRE2
// because the patterns Hugging Face ships need Unicode classes (\p{L}, \p{N}), scoped flags
// ((?i:...)) and lookahead (\s+(?!\S)), which std::regex lacks. Matching allocates nothing: match
// data and the JIT stack are per thread and reused.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace loft {

class Regex {
 public:
  // Throws loft::Error naming `where` (e.g. the file and the pre-tokenizer) and the offset in
  // the pattern when it does not compile.
  Regex(const std::string& pattern, const std::string& where);
  // A pattern matching `literal` exactly (as regex::escape does for tokenizer.json `String`).
  static Regex literal(std::string_view literal, const std::string& where);
  ~Regex();
  Regex(Regex&& other) noexcept;
  Regex& operator=(Regex&&) = delete;
  Regex(const Regex&) = delete;

  // Calls `on_match(start, end)` for each match, left to right, in `text` (valid UTF-8). After an
  // empty match the search resumes one character later, as Oniguruma's and Rust's iterators do.
  template <typename F>
  void for_each_match(std::string_view text, F&& on_match) const {
    size_t pos = 0;
    std::pair<size_t, size_t> m;
    while (pos <= text.size() && find(text, pos, &m)) {
      on_match(m.first, m.second);
      if (m.second > m.first) {
        pos = m.second;
      } else {
        if (m.second >= text.size()) break;
        pos = m.second + size_t(char_len(text[m.second]));
      }
    }
  }

  // The text split into (start, end, is_match) ranges covering all of it, as tokenizers' Pattern
  // find_matches does (an empty text gives one empty non-match).
  struct Range {
    size_t start, end;
    bool match;
  };
  void find_ranges(std::string_view text, std::vector<Range>& out) const;

 private:
  explicit Regex(void* code) : code_(code) {}
  bool find(std::string_view text, size_t from, std::pair<size_t, size_t>* m) const;
  static int char_len(char lead);
  void* code_ = nullptr;  // pcre2_code_8*
};

}  // namespace loft
