#include "datasets/inspect.h"

#include <cstdio>

#include "datasets/source.h"
#include "engine/core/error.h"

namespace loft::data {
namespace {

// Control tokens decode to nothing; name them so the rendering shows where they are.
std::string control_label(int32_t id, const Tokenizer& tok) {
  if (id == tok.bos_id()) return "<bos>";
  if (id == tok.eos_id()) return "<eos>";
  return cat("<special:", id, ">");
}

std::string percent(int64_t part, int64_t whole) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f%%", whole ? 100.0 * double(part) / double(whole) : 0.0);
  return buf;
}

}  // namespace

std::vector<TextSegment> trained_segments(const TokenizedExample& ex, const Tokenizer& tok) {
  const auto decoder = tok.stream_decoder();
  std::vector<TextSegment> out;
  auto add = [&](std::string text, bool trained) {
    if (text.empty()) return;
    if (!out.empty() && out.back().trained == trained) out.back().text += text;
    else out.push_back({std::move(text), trained});
  };
  bool trained = false;
  for (size_t i = 0; i < ex.size(); ++i) {
    trained = ex.trained[i] != 0;
    add(decoder->push(ex.ids[i]), trained);
    if (tok.piece(ex.ids[i]).empty()) add(control_label(ex.ids[i], tok), trained);
  }
  add(decoder->finish(), trained);
  return out;
}

std::string marked_text(const std::vector<TextSegment>& segments) {
  std::string out;
  for (const TextSegment& s : segments) out += s.trained ? cat(kTrainedOpen, s.text, kTrainedClose) : s.text;
  return out;
}

std::string mark_trained(const TokenizedExample& ex, const Tokenizer& tok) {
  return marked_text(trained_segments(ex, tok));
}

FileInspection inspect_file(const std::filesystem::path& path, const InspectOptions& opt, const Tokenizer& tok) {
  if (opt.examples < 0) throw UsageError(cat("--examples: must be 0 or more, not ", opt.examples));
  DataConfig config;
  config.train = {{path}};
  config.format = opt.format;
  config.chat_template = opt.chat_template;
  config.model_template = opt.model_template;
  config.seq = opt.seq;
  config.train_on_inputs = opt.train_on_inputs;
  config.on_bad_record = opt.on_bad_record;
  validate(config);

  Source src(config.train[0], config, Split::all, 0, tok);
  FileInspection r;
  r.path = path;
  r.format = src.format();
  r.chat_template = src.chat_template();
  r.template_origin = src.template_origin();
  while (auto rec = src.next()) {
    TokenizedExample ex = tokenize_conversation(rec->conv, r.chat_template, tok, opt.train_on_inputs);
    const int64_t tokens = int64_t(ex.size()), trained = ex.trained_count();
    r.lengths.add(tokens);
    r.trained_tokens += trained;
    if (truncate_example(ex, size_t(opt.seq))) ++r.truncated;
    const int64_t kept_trained = ex.trained_count();
    r.kept_tokens += int64_t(ex.size());
    r.kept_trained += kept_trained;
    if (kept_trained == 0) ++r.no_trained_left;
    if (int64_t(r.shown.size()) < opt.examples) {
      std::vector<TextSegment> segments = trained_segments(ex, tok);
      std::string text = marked_text(segments);
      r.shown.push_back({cat(path.string(), ":", rec->start.stream.line), tokens, trained, std::move(segments),
                         std::move(text)});
    }
  }
  r.skipped_bad = src.skipped();
  r.first_skip_reason = src.first_skip_reason();
  return r;
}

void print_inspection(std::ostream& out, const FileInspection& r, const InspectOptions& opt) {
  out << "== " << r.path.string() << " (format " << record_format_name(r.format) << ", template "
      << chat_template_name(r.chat_template);
  if (r.template_origin == TemplateOrigin::model) out << ' ' << template_origin_text(r.template_origin);
  out << (opt.train_on_inputs ? ", training on inputs" : "") << ")\n";
  for (size_t i = 0; i < r.shown.size(); ++i) {
    const ShownExample& e = r.shown[i];
    out << "-- example " << i + 1 << " at " << e.where << ": " << e.tokens << " tokens, " << e.trained
        << " trained\n"
        << e.text << '\n';
    if (e.tokens > opt.seq)
      out << "-- (cut at --seq " << opt.seq << ": the last " << e.tokens - opt.seq << " tokens are not shown)\n";
  }
  const LengthStats& l = r.lengths;
  char mean[32];
  std::snprintf(mean, sizeof mean, "%.1f", l.mean());
  out << "examples       " << l.count() << '\n'
      << "tokens/example min " << l.min() << ", mean " << mean << ", p50 " << l.percentile(50) << ", p90 "
      << l.percentile(90) << ", p99 " << l.percentile(99) << ", max " << l.max() << '\n'
      << "tokens         " << l.total() << " total, " << r.trained_tokens << " trained\n"
      << "at --seq " << opt.seq << "   " << r.truncated << " examples truncated (" << percent(r.truncated, l.count())
      << "); " << r.kept_tokens << " tokens kept, " << r.kept_trained << " trained; " << r.no_trained_left
      << " examples left with no trained token\n"
      << "bad records    " << r.skipped_bad << " skipped";
  if (r.skipped_bad) out << " (first: " << r.first_skip_reason << ")";
  out << '\n';
}

}  // namespace loft::data
