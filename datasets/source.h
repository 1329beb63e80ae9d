// One data file in the pipeline: its reader, its record format and template, the training or
// validation share of its records, and what was skipped.
#pragma once
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "datasets/data_config.h"
#include "datasets/record_reader.h"

namespace loft::data {

// Which records of a file a source yields. With --val-fraction a record is held out for validation
// when a hash of (seed, its byte offset) falls below the fraction: the same records every pass and
// after a resume, without any stored list.
enum class Split { all, train, val };

struct SourceRecord {
  Conversation conv;
  ReaderPos start;  // where the record starts (to read it again on restore)
  int source = 0;   // index of its source in the data loader
};

class Source {
 public:
  Source(const DataSource& spec, const DataConfig& config, Split split, int index, const Tokenizer& tok);

  // The next usable record of the current pass, or nullopt at the end of the pass. A bad record
  // throws loft::Error naming file and line, or is counted and skipped (--on-bad-record skip).
  std::optional<SourceRecord> next();
  // Starts the next pass from the beginning of the file.
  void restart();
  // The record starting at `pos` (restoring a shuffle buffer); throws when it is no longer usable.
  SourceRecord read_at(const ReaderPos& pos);

  const std::filesystem::path& path() const { return reader_->path(); }
  RecordFormat format() const { return format_; }
  ChatTemplate chat_template() const { return template_; }
  TemplateOrigin template_origin() const { return template_origin_; }
  int64_t passes_done() const { return passes_done_; }
  void finish_pass() { ++passes_done_; }
  int64_t records_in_pass() const { return records_in_pass_; }
  int64_t skipped() const { return skipped_; }
  const std::string& first_skip_reason() const { return first_skip_reason_; }

  nlohmann::json state() const;
  void restore(const nlohmann::json& state);

 private:
  bool in_split(const ReaderPos& start) const;
  // The conversation of a raw record; throws BadRecord.
  Conversation parse(const RawRecord& raw) const;
  RecordFormat detect(const DataConfig& config);

  std::unique_ptr<RecordReader> reader_;
  int index_;
  Split split_;
  double val_fraction_;
  uint64_t seed_;
  BadRecordPolicy on_bad_;
  RecordFormat format_ = RecordFormat::text;
  ChatTemplate template_ = ChatTemplate::plain;
  TemplateOrigin template_origin_ = TemplateOrigin::format;
  int64_t passes_done_ = 0, records_in_pass_ = 0, skipped_ = 0;
  std::string first_skip_reason_;
};

}  // namespace loft::data
