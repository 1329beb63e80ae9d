// The report's tables, one column per run so runs compare at a glance: summary, method and its
// options, data statistics, evaluation results. Cells are HTML; "—" where a run lacks the value.
#pragma once
#include <string>
#include <vector>

#include "report/run_data.h"

namespace loft::report {

struct Row {
  std::string label;               // plain text (html_table escapes it: keys come from the run's files)
  std::vector<std::string> cells;  // one per run
};

std::vector<Row> summary_rows(const std::vector<RunData>& runs);
std::vector<Row> method_rows(const std::vector<RunData>& runs);
std::vector<Row> data_rows(const std::vector<RunData>& runs);
// One row per (task, metric): MMLU overall and per category (acc with correct/questions), GSM8K
// exact_match per filter, any other numeric metric a report holds.
std::vector<Row> eval_rows(const std::vector<RunData>& runs);

// A table with the runs' names as column headers; empty when `rows` is.
std::string html_table(const std::vector<RunData>& runs, const std::vector<Row>& rows);

}  // namespace loft::report
