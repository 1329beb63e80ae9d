// `loft report` and the report.html every finetune run writes: one self-contained HTML page (inline
// SVG charts and CSS, no scripts, nothing fetched) for one run or several side by side: loss
// curves (training smoothed and raw, validation), learning rate, grad norm, tokens/s and memory
// over steps; a summary; the method and its options; data statistics; `loft evaluate` results
// saved in the run folders; each run's resolved configuration. Light and dark themes follow the
// reader's prefers-color-scheme.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include "report/run_data.h"

namespace loft::report {

// Every report's <head> carries `<meta name="generator" content="loft VERSION">`: how `loft
// report --out` knows a file it wrote (app/owned_outputs.h).
inline constexpr const char* kGeneratorMeta = "<meta name=\"generator\" content=\"loft";

std::string render_report(const std::vector<RunData>& runs);
// Loads every run folder and writes the page to `out` (atomically). Throws loft::Error naming a
// folder that is not a run.
void write_report(const std::vector<std::filesystem::path>& run_dirs, const std::filesystem::path& out);
// Loads every run folder, each run's warnings (a torn last metrics line) to stderr. Throws
// loft::Error naming a folder that is not a run.
std::vector<RunData> load_runs(const std::vector<std::filesystem::path>& run_dirs);

}  // namespace loft::report
