#include "datasets/data_config.h"

#include <charconv>
#include <cmath>

#include "engine/core/error.h"

namespace loft::data {

DataSource parse_data_spec(std::string_view spec) {
  const auto colon = spec.rfind(':');
  if (colon != std::string_view::npos) {
    const std::string_view w = spec.substr(colon + 1);
    double weight = 0;
    const auto [end, ec] = std::from_chars(w.data(), w.data() + w.size(), weight);
    if (!w.empty() && ec == std::errc() && end == w.data() + w.size()) {
      if (!(weight > 0) || !std::isfinite(weight))
        throw UsageError(cat("--data ", spec, ": the weight must be a positive number"));
      return {std::filesystem::path(spec.substr(0, colon)), weight};
    }
  }
  return {std::filesystem::path(spec), 1.0};
}

BadRecordPolicy parse_bad_record_policy(std::string_view name) {
  if (name == "fail") return BadRecordPolicy::fail;
  if (name == "skip") return BadRecordPolicy::skip;
  throw UsageError(cat("--on-bad-record: expected skip or fail, not '", name, "'"));
}

void validate(const DataConfig& c) {
  if (c.train.empty()) throw UsageError("--data: at least one training data file is needed");
  for (const DataSource& s : c.train)
    if (!(s.weight > 0)) throw UsageError(cat("--data ", s.path.string(), ": the weight must be positive"));
  if (c.seq < 2 || c.seq > kMaxSeq)
    throw UsageError(cat("--seq: must be an integer from 2 to ", kMaxSeq, ", not ", c.seq));
  if (c.batch_rows < 1) throw UsageError(cat("--micro-batch: must be at least 1, not ", c.batch_rows));
  if (c.epochs < 1) throw UsageError(cat("--epochs: must be at least 1, not ", c.epochs));
  if (c.shuffle_buffer < 0 || c.shuffle_buffer > kMaxShuffleBuffer)
    throw UsageError(cat("--shuffle-buffer: must be an integer from 0 to ", kMaxShuffleBuffer, ", not ",
                         c.shuffle_buffer));
  if (c.eval_every < 0) throw UsageError(cat("--eval-every: must be 0 or more, not ", c.eval_every));
  if (!(c.val_fraction >= 0 && c.val_fraction < 1))
    throw UsageError(cat("--val-fraction: must be in [0, 1), not ", c.val_fraction));
  if (c.val_fraction > 0 && !c.val.empty())
    throw UsageError("--val-fraction and --val-data: give one way to choose validation data, not both");
  if (c.max_record_bytes < 1) throw UsageError("the record size limit must be positive");
}

ChatTemplate default_template(RecordFormat format, const Tokenizer& tok, std::optional<ChatTemplate> model_template) {
  switch (format) {
    case RecordFormat::text:
    case RecordFormat::prompt_completion: return ChatTemplate::plain;
    case RecordFormat::alpaca:
    case RecordFormat::gsm8k: return model_template.value_or(ChatTemplate::alpaca);
    case RecordFormat::messages:
    case RecordFormat::sharegpt:
      if (model_template) return *model_template;
      if (tok.special_id("<|start_header_id|>") >= 0) return ChatTemplate::llama3;
      if (tok.special_id("<|im_start|>") >= 0) return ChatTemplate::chatml;
      if (tok.special_id("[INST]") >= 0) return ChatTemplate::mistral_v3;  // Mistral's v3 control tokens
      return ChatTemplate::llama2;
  }
  return ChatTemplate::plain;
}

std::string_view template_origin_text(TemplateOrigin origin) {
  switch (origin) {
    case TemplateOrigin::option: return "from --template";
    case TemplateOrigin::model: return "auto-detected from the model's tokenizer_config.json";
    case TemplateOrigin::format: return "the record format's default";
  }
  return "?";
}

}  // namespace loft::data
