#include "studio/run_request.h"

#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <fstream>

#include "datasets/data_config.h"
#include "engine/core/error.h"
#include "engine/io/json_read.h"
#include "engine/tensor/device.h"
#include "studio/command_check.h"
#include "studio/http_error.h"

namespace loft::studio {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

void emit(YAML::Emitter& out, const json& v) {
  if (v.is_object()) {
    out << YAML::BeginMap;
    for (const auto& [k, e] : v.items()) {
      out << YAML::Key << k << YAML::Value;
      emit(out, e);
    }
    out << YAML::EndMap;
  } else if (v.is_array()) {
    out << YAML::BeginSeq;
    for (const json& e : v) emit(out, e);
    out << YAML::EndSeq;
  } else if (v.is_string()) {
    out << YAML::DoubleQuoted << v.get<std::string>();
  } else if (v.is_null()) {
    out << YAML::Null;
  } else {
    out << v.dump();  // numbers and booleans as JSON writes them
  }
}

// Every path the run reads must be under the roots (403 naming it otherwise).
void check_inputs(const ParsedCommand& p, const PathPolicy& paths) {
  for (const char* option : {"model", "init-adapter"})
    for (const std::string& v : p.values(option)) paths.resolve(v);
  for (const char* option : {"data", "val-data"})
    for (const std::string& spec : p.values(option)) {
      data::DataSource src;
      try {
        src = data::parse_data_spec(spec);
      } catch (const std::exception& e) {
        throw HttpError(400, e.what());
      }
      paths.resolve(src.path.string());
    }
}

}  // namespace

std::string json_to_yaml(const json& object) {
  YAML::Emitter out;
  emit(out, object);
  return std::string(out.c_str()) + "\n";
}

std::vector<std::string> job_devices(const std::string& device, const std::string& gpus) {
  std::vector<std::string> out;
  if (!gpus.empty()) {
    if (gpus.find(',') == std::string::npos && gpus.find_first_not_of("0123456789") == std::string::npos) {
      const int n = std::min(std::stoi(gpus.substr(0, 4)), 1024);
      for (int i = 0; i < n; ++i) out.push_back(cat("cuda:", i));
    } else {
      for (size_t at = 0; at <= gpus.size();) {
        const size_t comma = std::min(gpus.find(',', at), gpus.size());
        if (comma > at) out.push_back("cuda:" + gpus.substr(at, comma - at));
        at = comma + 1;
      }
    }
    return out;
  }
  if (device == "cpu") return {"cpu"};
  if (device == "cuda") return {"cuda:0"};
  if (device.starts_with("cuda:")) return {device};
  static const int gpu_count = cuda_device_count();
  return {gpu_count > 0 ? "cuda:0" : "cpu"};
}

ScratchRecipe::ScratchRecipe(const fs::path& dir, const std::string& text) {
  std::string name = (dir / ".studio-check-XXXXXX.yaml").string();
  const int fd = mkstemps(name.data(), 5);
  if (fd < 0) throw Error(cat("cannot write a scratch recipe in ", dir.string()));
  close(fd);
  path_ = name;
  std::ofstream(path_, std::ios::binary) << text;
}

ScratchRecipe::~ScratchRecipe() {
  std::error_code ec;
  fs::remove(path_, ec);
}

CheckedRun check_run_request(const json& body, const PathPolicy& paths, const std::string& fresh_name) {
  json recipe = body;
  std::optional<std::string> out;
  for (const char* key : {"output_dir", "out"})
    if (recipe.contains(key)) {
      if (out) throw HttpError(400, "give one of 'output_dir' and 'out'");
      if (!recipe[key].is_string()) throw HttpError(400, cat("'", key, "' must be a string, got ", brief(recipe[key])));
      out = recipe[key].get<std::string>();
      recipe.erase(key);
    }
  CheckedRun plan;
  plan.dir = out ? paths.resolve_in_runs(*out) : paths.runs() / fresh_name;
  if (plan.dir.parent_path() != paths.runs())
    throw HttpError(400, cat("output_dir ", brief(plan.dir.string()), ": a run folder lies directly in --runs ",
                             paths.runs().string()));
  recipe["output_dir"] = plan.dir.string();
  plan.recipe_yaml = json_to_yaml(recipe);
  const ScratchRecipe scratch(paths.runs(), plan.recipe_yaml);
  const ParsedCommand parsed("finetune", {"--config", scratch.path().string()});
  check_inputs(parsed, paths);
  plan.devices = job_devices(parsed.value_or_default("device"), parsed.value_or_default("gpus"));
  return plan;
}

std::vector<std::string> recipe_devices(const fs::path& recipe, const PathPolicy& paths) {
  const ParsedCommand parsed("finetune", {"--config", recipe.string()});
  check_inputs(parsed, paths);
  return job_devices(parsed.value_or_default("device"), parsed.value_or_default("gpus"));
}

}  // namespace loft::studio
