// The files `loft report` and `loft evaluate` write, recognised again: an existing --out, --report
// or --log-samples file is replaced without --overwrite only when it is one of these
// (engine/io/output_paths.h, check_output_file).
#pragma once
#include <filesystem>

namespace loft::app {

// An HTML report loft wrote: its head carries loft's generator meta tag (or, in reports written
// before the tag, the title "loft report: ...").
bool is_loft_report_html(const std::filesystem::path& file);
// `evaluate --report`'s JSON: an object with loft's "task" and "protocol"."lm_eval_commit".
bool is_loft_eval_report(const std::filesystem::path& file);
// `evaluate --log-samples`' JSONL: its first line a sample record (task, index, context, context_ids).
bool is_loft_sample_log(const std::filesystem::path& file);

}  // namespace loft::app
