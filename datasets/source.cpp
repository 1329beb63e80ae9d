#include "datasets/source.h"

#include "engine/core/error.h"
#include "engine/io/json_fields.h"

namespace loft::data {
namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

std::string keys_of(const nlohmann::json& j) {
  std::string keys;
  if (!j.is_object()) return cat("a JSON ", j.type_name());
  for (const auto& [k, v] : j.items()) keys += (keys.empty() ? "" : ", ") + k;
  return cat("keys: ", keys.empty() ? "none" : keys);
}

}  // namespace

Source::Source(const DataSource& spec, const DataConfig& config, Split split, int index, const Tokenizer& tok)
    : reader_(open_record_reader(spec.path, config.max_record_bytes)),
      index_(index),
      split_(split),
      val_fraction_(config.val_fraction),
      seed_(config.seed),
      on_bad_(config.on_bad_record) {
  format_ = detect(config);
  template_ = config.chat_template.value_or(default_template(format_, tok, config.model_template));
  const bool plain_format = format_ == RecordFormat::text || format_ == RecordFormat::prompt_completion;
  template_origin_ = config.chat_template                      ? TemplateOrigin::option
                     : config.model_template && !plain_format ? TemplateOrigin::model
                                                              : TemplateOrigin::format;
}

RecordFormat Source::detect(const DataConfig& config) {
  if (reader_->kind() == RecordKind::text) return RecordFormat::text;  // .txt: always text records
  if (config.format) return *config.format;
  // The first record that is valid JSON decides; bad records are reported on the real pass.
  RawRecord raw;
  std::optional<RecordFormat> found;
  while (reader_->next(raw)) {
    nlohmann::json j;
    try {
      j = parse_json_record(raw.text);
    } catch (const BadRecord&) {
      continue;
    }
    found = detect_format(j);
    if (!found)
      throw UsageError(cat(path().string(), ":", raw.line(), ": cannot tell the record format (", keys_of(j),
                           "); pass --format alpaca|messages|sharegpt|prompt_completion|text|gsm8k"));
    break;
  }
  reader_->seek({});
  return found.value_or(RecordFormat::text);  // no valid record at all: every record fails as bad JSON
}

bool Source::in_split(const ReaderPos& start) const {
  if (split_ == Split::all || val_fraction_ <= 0) return split_ != Split::val;
  const uint64_t h = splitmix64(seed_ ^ splitmix64(start.stream.offset));
  const bool held_out = double(h >> 11) * 0x1.0p-53 < val_fraction_;
  return held_out == (split_ == Split::val);
}

Conversation Source::parse(const RawRecord& raw) const {
  if (reader_->kind() == RecordKind::text) return text_conversation(raw.text);
  return to_conversation(parse_json_record(raw.text), format_);
}

std::optional<SourceRecord> Source::next() {
  RawRecord raw;
  while (reader_->next(raw)) {
    if (!in_split(raw.start)) continue;
    try {
      SourceRecord rec{parse(raw), raw.start, index_};
      ++records_in_pass_;
      return rec;
    } catch (const BadRecord& e) {
      const std::string where = cat(path().string(), ":", raw.line(), ": bad ", record_format_name(format_),
                                    " record: ", e.what());
      if (on_bad_ == BadRecordPolicy::fail) throw Error(cat(where, " (--on-bad-record skip skips such records)"));
      if (skipped_++ == 0) first_skip_reason_ = where;
    }
  }
  return std::nullopt;
}

void Source::restart() {
  reader_->seek({});
  records_in_pass_ = 0;
}

SourceRecord Source::read_at(const ReaderPos& pos) {
  reader_->seek(pos);
  RawRecord raw;
  if (!reader_->next(raw) || raw.start != pos)
    throw Error(cat(path().string(), ":", pos.stream.line, ": no record starts at byte ", pos.stream.offset,
                    " any more (was the file changed since the checkpoint?)"));
  try {
    return {parse(raw), raw.start, index_};
  } catch (const BadRecord& e) {
    throw Error(cat(path().string(), ":", raw.line(), ": the record saved in the checkpoint is now bad: ", e.what()));
  }
}

nlohmann::json Source::state() const {
  return {{"path", path().string()},      {"pos", to_json(reader_->position())},
          {"passes_done", passes_done_}, {"records_in_pass", records_in_pass_},
          {"skipped", skipped_},         {"first_skip_reason", first_skip_reason_}};
}

void Source::restore(const nlohmann::json& s) {
  reader_->seek(reader_pos_from_json(s.at("pos")));
  const JsonFields f(s, "the saved data position", "sources.");
  passes_done_ = f.integer("passes_done", 0);
  records_in_pass_ = f.integer("records_in_pass", 0);
  skipped_ = f.integer("skipped", 0);
  first_skip_reason_ = s.at("first_skip_reason").get<std::string>();
}

}  // namespace loft::data
