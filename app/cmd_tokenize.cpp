// loft tokenize: text -> token ids (or, with --decode, ids -> text) with a model folder's tokenizer;
// tokenizer files alone suffice. One input (--text, or the whole of stdin) gives one line of
// space-separated ids; --jsonl streams stdin line by line, one JSON object in, one out.
#include <charconv>
#include <CLI/CLI.hpp>
#include <iostream>
#include <nlohmann/json.hpp>

#include "app/commands.h"
#include "engine/io/json_read.h"
#include "engine/core/error.h"
#include "tokenizer/tokenizer.h"

namespace loft::app {

namespace {

struct TokenizeArgs {
  std::string model, text;
  bool text_given = false, jsonl = false, add_special = false, decode = false;
};

constexpr size_t kMaxLineBytes = size_t(64) << 20;  // one runaway line cannot exhaust memory

// The next line of `in` without its '\n' (and a '\r' before it); false when the input had ended.
bool read_line(std::streambuf& in, std::string& line, int64_t line_no) {
  constexpr int kEof = std::char_traits<char>::eof();
  line.clear();
  int c = in.sbumpc();
  if (c == kEof) return false;
  for (; c != kEof && c != '\n'; c = in.sbumpc()) {
    if (line.size() == kMaxLineBytes)
      throw Error(cat("stdin:", line_no, ": line longer than ", kMaxLineBytes >> 20, " MiB"));
    line.push_back(char(c));
  }
  if (!line.empty() && line.back() == '\r') line.pop_back();
  return true;
}

std::string ids_text(const std::vector<int32_t>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) s += (i ? " " : "") + std::to_string(ids[i]);
  return s;
}

// Ids written as "1 2 3", "1,2,3" or "[1, 2, 3]"; `bad` makes the exception for a bad word.
template <typename MakeError>
std::vector<int32_t> parse_ids(std::string_view s, MakeError bad) {
  std::vector<int32_t> ids;
  size_t i = 0;
  const auto separator = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == ',' || c == '[' || c == ']'; };
  while (i < s.size()) {
    if (separator(s[i])) {
      ++i;
      continue;
    }
    size_t end = i;
    while (end < s.size() && !separator(s[end])) ++end;
    int32_t id = 0;
    const auto [ptr, ec] = std::from_chars(s.data() + i, s.data() + end, id);
    if (ec != std::errc() || ptr != s.data() + end) throw bad(cat("'", s.substr(i, end - i), "' is not a token id"));
    ids.push_back(id);
    i = end;
  }
  return ids;
}

std::vector<int32_t> encode(const Tokenizer& tok, std::string_view text, bool add_special) {
  return add_special ? tok.encode_with_special(text) : tok.encode(text);
}

std::string dump(const nlohmann::json& j) { return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }

// One JSONL line: {"text": ...} -> {"ids": [...]}, or the other way with --decode.
std::string convert_line(const TokenizeArgs& a, const Tokenizer& tok, const std::string& line) {
  std::string error;
  const auto parsed = try_parse_json(line, error);
  if (!parsed) throw Error(error);
  const nlohmann::json& j = *parsed;
  const char* key = a.decode ? "ids" : "text";
  if (!j.is_object() || !j.contains(key))
    throw Error(cat("expected a JSON object with \"", key, "\"", a.decode ? " (a list of token ids)" : " (a string)"));
  const nlohmann::json& v = j[key];
  if (!a.decode) {
    if (!v.is_string()) throw Error(cat("\"text\" must be a string, not ", v.type_name()));
    return dump({{"ids", encode(tok, v.get_ref<const std::string&>(), a.add_special)}});
  }
  std::vector<int32_t> ids;
  for (const nlohmann::json& e : v.is_array() ? v : nlohmann::json::array({nullptr})) {
    if (!e.is_number_integer() || e.get<int64_t>() < INT32_MIN || e.get<int64_t>() > INT32_MAX)
      throw Error(cat("\"ids\" must be a list of token ids, got ", dump(v)));
    ids.push_back(e.get<int32_t>());
  }
  return dump({{"text", tok.decode(ids)}});
}

void run_jsonl(const TokenizeArgs& a, const Tokenizer& tok) {
  std::string line;
  for (int64_t n = 1; read_line(*std::cin.rdbuf(), line, n); ++n) {
    std::string out;
    try {
      out = convert_line(a, tok, line);
    } catch (const Error& e) {
      throw Error(cat("stdin:", n, ": ", e.what()));
    }
    std::cout << out << '\n' << std::flush;  // streaming: each result as soon as its line is read
  }
}

void run_tokenize(const TokenizeArgs& a) {
  if (a.jsonl && a.text_given) throw UsageError("tokenize: --jsonl reads stdin; it does not take --text");
  if (a.decode && a.add_special) throw UsageError("tokenize: --add-special applies to encoding, not --decode");
  if (!std::filesystem::is_directory(a.model)) throw UsageError(cat("--model ", a.model, ": not a folder"));
  const auto tok = load_tokenizer(a.model);
  if (a.jsonl) return run_jsonl(a, *tok);
  const std::string input = a.text_given ? a.text : std::string(std::istreambuf_iterator<char>(std::cin), {});
  if (!a.decode) {
    std::cout << ids_text(encode(*tok, input, a.add_special)) << '\n' << std::flush;
    return;
  }
  const auto ids = a.text_given ? parse_ids(input, [](const std::string& m) { return UsageError("--text: " + m); })
                                : parse_ids(input, [](const std::string& m) { return Error("stdin: " + m); });
  std::cout << tok->decode(ids) << std::flush;  // exactly the decoded text: no newline added
}

}  // namespace

void add_tokenize_command(CLI::App& root) {
  auto a = std::make_shared<TokenizeArgs>();
  CLI::App* cmd = root.add_subcommand("tokenize", "encode text to token ids, or decode ids to text");
  cmd->add_option("--model", a->model, "folder with tokenizer.json or tokenizer.model (config and weights not needed)")
      ->required();
  CLI::Option* text = cmd->add_option("--text", a->text, "the input (default: the whole of stdin)");
  cmd->add_flag("--jsonl", a->jsonl,
                "stream stdin: one {\"text\": ...} per line -> one {\"ids\": [...]} per line (--decode: the reverse)");
  cmd->add_flag("--add-special", a->add_special, "add the BOS/EOS the tokenizer adds by default (as transformers does)");
  cmd->add_flag("--decode", a->decode, "ids -> text: ids separated by spaces or commas (or a JSON list)");
  cmd->footer(
      "Encoding prints the ids separated by spaces on one line; special tokens spelled in the text "
      "(e.g. <|eot_id|>) become their ids, and nothing is added unless --add-special. Decoding prints "
      "the text exactly, with no newline added.");
  cmd->callback([a, text] {
    TokenizeArgs args = *a;
    args.text_given = text->count() > 0;
    run_tokenize(args);
  });
}

}  // namespace loft::app
