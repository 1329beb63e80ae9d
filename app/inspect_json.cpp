#include "app/inspect_json.h"

#include <algorithm>

namespace loft::app {

using nlohmann::json;

namespace {

json histogram_json(const data::LengthStats& l) {
  json bins = json::array();
  if (l.count() == 0) return bins;
  constexpr int64_t kBins = 20;
  const int64_t lo = l.min(), width = std::max<int64_t>(1, (l.max() - lo + kBins) / kBins);
  for (const auto& [length, count] : l.histogram()) {
    const int64_t from = lo + (length - lo) / width * width;
    if (bins.empty() || bins.back()["from"] != from) bins.push_back({{"from", from}, {"to", from + width - 1}, {"count", 0}});
    bins.back()["count"] = bins.back()["count"].get<int64_t>() + count;
  }
  return bins;
}

}  // namespace

json inspection_json(const data::FileInspection& r, const data::InspectOptions& opt) {
  json examples = json::array();
  for (const data::ShownExample& e : r.shown) {
    json segments = json::array();
    for (const data::TextSegment& s : e.segments) segments.push_back({{"text", s.text}, {"trained", s.trained}});
    examples.push_back({{"where", e.where}, {"tokens", e.tokens}, {"trained", e.trained}, {"segments", segments}});
  }
  const data::LengthStats& l = r.lengths;
  return {{"path", r.path.string()},
          {"format", data::record_format_name(r.format)},
          {"template", chat_template_name(r.chat_template)},
          {"template_origin", data::template_origin_text(r.template_origin)},
          {"seq", opt.seq},
          {"train_on_inputs", opt.train_on_inputs},
          {"examples", examples},
          {"lengths",
           {{"count", l.count()}, {"total", l.total()}, {"min", l.min()}, {"mean", l.mean()}, {"p50", l.percentile(50)},
            {"p90", l.percentile(90)}, {"p99", l.percentile(99)}, {"max", l.max()}}},
          {"histogram", histogram_json(l)},
          {"trained_tokens", r.trained_tokens},
          {"truncated", r.truncated},
          {"kept_tokens", r.kept_tokens},
          {"kept_trained", r.kept_trained},
          {"no_trained_left", r.no_trained_left},
          {"skipped_bad", r.skipped_bad},
          {"first_skip_reason", r.first_skip_reason}};
}

}  // namespace loft::app
