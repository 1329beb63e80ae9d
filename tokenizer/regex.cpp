#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/regex.h"

#include <pcre2.h>

#include "engine/core/error.h"
#include "engine/io/json_read.h"
#include "tokenizer/utf8.h"

namespace loft {

namespace {

// Per-thread match state: one match data block (group 0 is all any caller reads) and a JIT stack
// large enough for long whitespace or letter runs.
struct MatchState {
  pcre2_match_data* data = pcre2_match_data_create(1, nullptr);
  pcre2_jit_stack* stack = pcre2_jit_stack_create(32 * 1024, 4 * 1024 * 1024, nullptr);
  pcre2_match_context* context = [this] {
    pcre2_match_context* c = pcre2_match_context_create(nullptr);
    pcre2_jit_stack_assign(c, nullptr, stack);
    return c;
  }();
  ~MatchState() {
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(stack);
    pcre2_match_data_free(data);
  }
};

MatchState& match_state() {
  thread_local MatchState state;
  return state;
}

std::string pcre2_message(int code) {
  PCRE2_UCHAR buf[256];
  pcre2_get_error_message(code, buf, sizeof buf);
  return reinterpret_cast<const char*>(buf);
}

}  // namespace

Regex::Regex(const std::string& pattern, const std::string& where) {
  int err = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP, &err, &offset, nullptr);
  if (!code)
    throw Error(cat(where, ": invalid regex ", brief(pattern), ": ", pcre2_message(err), " at offset ", offset));
  // Without JIT (e.g. an unsupported platform) matching still works through the interpreter.
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  code_ = code;
}

Regex Regex::literal(std::string_view literal, const std::string& where) {
  // \Q...\E quotes everything but "\E" itself, which is spelled out in pieces.
  std::string pattern;
  size_t from = 0;
  for (size_t at = literal.find("\\E"); at != std::string_view::npos; at = literal.find("\\E", from)) {
    pattern += "\\Q" + std::string(literal.substr(from, at - from)) + "\\E\\\\E";
    from = at + 2;
  }
  pattern += "\\Q" + std::string(literal.substr(from)) + "\\E";
  return Regex(pattern, where);
}

Regex::~Regex() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

Regex::Regex(Regex&& other) noexcept : code_(other.code_) { other.code_ = nullptr; }

int Regex::char_len(char lead) { return utf8::char_length(static_cast<unsigned char>(lead)); }

bool Regex::find(std::string_view text, size_t from, std::pair<size_t, size_t>* m) const {
  MatchState& st = match_state();
  const auto* code = static_cast<const pcre2_code*>(code_);
  const int rc = pcre2_match(code, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), from,
                             PCRE2_NO_UTF_CHECK, st.data, st.context);
  if (rc == PCRE2_ERROR_NOMATCH) return false;
  if (rc < 0) throw Error(cat("regex match failed: ", pcre2_message(rc)));
  const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(st.data);
  *m = {size_t(ov[0]), size_t(ov[1])};
  return true;
}

void Regex::find_ranges(std::string_view text, std::vector<Range>& out) const {
  out.clear();
  if (text.empty()) {
    out.push_back({0, 0, false});
    return;
  }
  size_t prev = 0;
  for_each_match(text, [&](size_t start, size_t end) {
    if (prev != start) out.push_back({prev, start, false});
    out.push_back({start, end, true});
    prev = end;
  });
  if (prev != text.size()) out.push_back({prev, text.size(), false});
}

}  // namespace loft
