// `loft data inspect`: what training would see in a data file. A few examples rendered with their
// trained tokens marked, and statistics over the whole file, streamed record by record.
#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "datasets/data_config.h"
#include "datasets/length_stats.h"
#include "datasets/tokenize.h"

namespace loft::data {

// Trained tokens (loss targets) are shown between these markers; control tokens, which decode to
// no text, are shown as <bos>, <eos> or <special:ID>.
inline constexpr std::string_view kTrainedOpen = "[[", kTrainedClose = "]]";

struct InspectOptions {
  std::optional<RecordFormat> format;         // --format (default: detected)
  std::optional<ChatTemplate> chat_template;  // --template (default: per format)
  std::optional<ChatTemplate> model_template; // the model's chat template family (see DataConfig)
  int64_t seq = 512;                          // --seq
  int64_t examples = 3;                       // --examples: how many to render per file
  bool train_on_inputs = false;               // --train-on-inputs
  BadRecordPolicy on_bad_record = BadRecordPolicy::fail;
};

// A run of an example's text whose tokens are all trained (loss targets) or all not.
struct TextSegment {
  std::string text;
  bool trained = false;
};

struct ShownExample {
  std::string where;    // "file:line"
  int64_t tokens = 0;   // before truncation
  int64_t trained = 0;  // before truncation
  std::vector<TextSegment> segments;  // the first --seq tokens (see trained_segments)
  std::string text;     // the same, trained spans marked (see mark_trained)
};

struct FileInspection {
  std::filesystem::path path;
  RecordFormat format = RecordFormat::text;
  ChatTemplate chat_template = ChatTemplate::plain;
  TemplateOrigin template_origin = TemplateOrigin::format;
  LengthStats lengths;            // tokens per example, before truncation
  int64_t trained_tokens = 0;     // before truncation
  int64_t truncated = 0;          // examples longer than --seq
  int64_t kept_tokens = 0;        // after truncation to --seq
  int64_t kept_trained = 0;       // trained tokens after truncation
  int64_t no_trained_left = 0;    // examples with no trained token after truncation (never trained on)
  int64_t skipped_bad = 0;        // bad records skipped (--on-bad-record skip)
  std::string first_skip_reason;  // "file:line: ..." of the first one
  std::vector<ShownExample> shown;
};

// Streams every record of `path` through the same reader, template, tokenizer and truncation as
// training. Throws loft::UsageError for bad options or an unreadable/unsupported file, and
// loft::Error naming file and line for a bad record under --on-bad-record fail.
FileInspection inspect_file(const std::filesystem::path& path, const InspectOptions& opt, const Tokenizer& tok);

// The example's text (exactly as the tokenizer decodes its ids) in runs of trained and untrained
// tokens, control tokens named.
std::vector<TextSegment> trained_segments(const TokenizedExample& ex, const Tokenizer& tok);
// The same text with each run of trained tokens wrapped in kTrainedOpen/kTrainedClose.
std::string mark_trained(const TokenizedExample& ex, const Tokenizer& tok);
std::string marked_text(const std::vector<TextSegment>& segments);

// The human-readable report of one file.
void print_inspection(std::ostream& out, const FileInspection& r, const InspectOptions& opt);

}  // namespace loft::data
