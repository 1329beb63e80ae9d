// POST /api/runs: a request body of recipe keys (every key the YAML recipe reader takes, as in
// `loft finetune --config FILE.yaml`) turned into the studio-recipe.yaml the run's child reads,
// checked before the studio answers: the recipe is parsed by finetune's own CLI definition and
// recipe reader (an unknown key is a 400 naming it), every path it reads must lie under the roots
// and its output_dir directly under --runs.
#pragma once
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "studio/paths.h"

namespace loft::studio {

struct CheckedRun {
  std::filesystem::path dir;         // the run folder (output_dir)
  std::string recipe_yaml;           // what studio-recipe.yaml holds
  std::vector<std::string> devices;  // what the run computes on
};

// `fresh_name` picks the folder under --runs when the body has no output_dir (or out).
CheckedRun check_run_request(const nlohmann::json& body, const PathPolicy& paths, const std::string& fresh_name);

// A recipe file for a parse or a plan, removed again; in `dir` (the runs folder, which the
// studio may write).
class ScratchRecipe {
 public:
  ScratchRecipe(const std::filesystem::path& dir, const std::string& text);
  ~ScratchRecipe();
  ScratchRecipe(const ScratchRecipe&) = delete;
  ScratchRecipe& operator=(const ScratchRecipe&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// Checks a recipe file already in a run folder (for --resume) and returns the devices it runs on.
std::vector<std::string> recipe_devices(const std::filesystem::path& recipe, const PathPolicy& paths);

// The devices a command computes on from its --device (auto, cpu, cuda, cuda:N) and --gpus
// (N or a list) values: "cpu" or "cuda:N" each; auto is cuda:0 when this machine has a GPU.
std::vector<std::string> job_devices(const std::string& device, const std::string& gpus = "");

// A JSON object as YAML text (a mapping of its keys, strings quoted).
std::string json_to_yaml(const nlohmann::json& object);

}  // namespace loft::studio
