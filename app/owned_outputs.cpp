#include "app/owned_outputs.h"

#include <nlohmann/json.hpp>
#include <optional>

#include "engine/io/json_read.h"
#include "engine/io/output_paths.h"
#include "report/html_report.h"

namespace loft::app {

namespace {

// Reports and sample records are far smaller; a larger file is not read whole to be recognised.
constexpr size_t kMaxRecognisedBytes = size_t(1) << 20;

std::optional<nlohmann::json> json_object(std::string_view text) {
  std::string error;
  std::optional<nlohmann::json> j = try_parse_json(text, error);
  if (!j || !j->is_object()) return std::nullopt;
  return j;
}

}  // namespace

bool is_loft_report_html(const std::filesystem::path& file) {
  const std::string head = file_head(file, 4096);
  return head.find(report::kGeneratorMeta) != std::string::npos ||
         (head.starts_with("<!DOCTYPE html>") && head.find("<title>loft report: ") != std::string::npos);
}

bool is_loft_eval_report(const std::filesystem::path& file) {
  const std::optional<nlohmann::json> j = json_object(file_head(file, kMaxRecognisedBytes));
  if (!j || !j->contains("task") || !(*j)["task"].is_string()) return false;
  const auto p = j->find("protocol");
  return p != j->end() && p->is_object() && p->contains("lm_eval_commit");
}

bool is_loft_sample_log(const std::filesystem::path& file) {
  const std::string head = file_head(file, kMaxRecognisedBytes);
  const std::optional<nlohmann::json> j = json_object(std::string_view(head).substr(0, head.find('\n')));
  if (!j) return false;
  for (const char* k : {"task", "index", "context", "context_ids"})
    if (!j->contains(k)) return false;
  return true;
}

}  // namespace loft::app
