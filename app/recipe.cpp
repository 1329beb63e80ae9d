#include "app/recipe.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <map>
#include <optional>

#include "engine/core/error.h"

namespace loft::app {

namespace {

// axolotl's and Unsloth's (transformers TrainingArguments') names for options loft has under
// another name. Keys that are loft's own names need no entry.
const std::map<std::string, std::string, std::less<>> kAliases = {
    {"base_model", "model"},
    {"sequence_len", "seq"},
    {"max_seq_length", "seq"},
    {"micro_batch_size", "micro-batch"},
    {"per_device_train_batch_size", "micro-batch"},
    {"learning_rate", "lr"},
    {"lr_scheduler", "schedule"},
    {"lr_scheduler_type", "schedule"},
    {"num_epochs", "epochs"},
    {"num_train_epochs", "epochs"},
    {"max_steps", "steps"},
    {"warmup_steps", "warmup"},
    {"lora_r", "lora-rank"},
    {"lora_target_modules", "lora-targets"},
    {"target_modules", "lora-targets"},
    {"output_dir", "out"},
    {"val_set_size", "val-fraction"},
    {"eval_steps", "eval-every"},
    {"save_steps", "save-every"},
    {"logging_steps", "log-every"},
    {"gradient_checkpointing", "grad-checkpointing"},
    {"sample_packing", "packing"},
    {"chat_template", "template"},
    {"adapter", "method"},
    {"test_datasets", "val-data"},
};

// axolotl's dataset `type` -> loft's --format.
const std::map<std::string, std::string, std::less<>> kDatasetTypes = {
    {"alpaca", "alpaca"},         {"sharegpt", "sharegpt"},   {"chat_template", "messages"},
    {"messages", "messages"},     {"completion", "text"},     {"text", "text"},
    {"input_output", "prompt_completion"}, {"prompt_completion", "prompt_completion"},
};

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] != b[j - 1])});
      diag = up;
    }
  }
  return row[b.size()];
}

// Builds the config items of one recipe, checking every key against the command's options.
class RecipeReader {
 public:
  RecipeReader(const std::string& file, const CLI::App& cmd) : file_(file), cmd_(cmd) {}

  std::vector<CLI::ConfigItem> read(const YAML::Node& root) {
    if (root.IsNull()) return {};
    if (!root.IsMap()) fail(root, "a recipe is a mapping of keys to values");
    for (const auto& kv : root) {
      const std::string key = kv.first.as<std::string>();
      if (kv.second.IsNull()) continue;  // `key:` with no value leaves the option unset
      if (key == "datasets") datasets(kv.second, kv.first);
      else if (key == "gradient_accumulation_steps") accumulation_ = {scalar(kv.second, key), kv.first.Mark().line};
      else if (key == "lora_dropout") no_dropout(kv.second);
      else if (key == "lora_target_linear") target_linear(kv.second, kv.first);
      else set(option_for(key, kv.first), key, kv.first, values(kv.second, key));
    }
    if (accumulation_) accumulate();
    std::vector<CLI::ConfigItem> items;
    for (auto& [name, v] : set_) items.push_back({{cmd_.get_name()}, name, v.inputs});
    return items;
  }

 private:
  struct Value {
    std::string key;
    int line;
    std::vector<std::string> inputs;
  };

  [[noreturn]] void fail(const YAML::Node& at, const std::string& what) const {
    throw UsageError(cat(file_, ":", at.Mark().line + 1, ": ", what));
  }

  // The option (long name without dashes) a key sets; unknown keys are errors with a suggestion.
  std::string option_for(const std::string& key, const YAML::Node& at) const {
    if (auto a = kAliases.find(key); a != kAliases.end()) return a->second;
    std::string name = key;
    std::replace(name.begin(), name.end(), '_', '-');
    const CLI::Option* opt = cmd_.get_option_no_throw("--" + name);
    if (opt && opt->get_configurable() && !is_run_control(name)) return name;
    std::string best;
    size_t best_d = 3;  // suggest only close spellings
    for (const std::string& k : known_keys())
      if (const size_t d = edit_distance(key, k); d < best_d) best_d = d, best = k;
    fail(at, cat("unknown key '", key, "' for loft ", cmd_.get_name(),
                 best.empty() ? std::string() : cat(" (did you mean '", best, "'?)")));
  }

  std::vector<std::string> known_keys() const {
    std::vector<std::string> keys{"datasets", "gradient_accumulation_steps", "lora_dropout", "lora_target_linear"};
    for (const auto& [k, v] : kAliases) keys.push_back(k);
    for (const CLI::Option* o : cmd_.get_options())
      if (!o->get_lnames().empty() && !is_run_control(o->get_lnames().front()))
        keys.push_back(recipe_key(o->get_lnames().front()));
    return keys;
  }

  std::string scalar(const YAML::Node& n, const std::string& key) const {
    if (!n.IsScalar()) fail(n, cat("'", key, "' takes one value"));
    return n.Scalar();
  }

  // A scalar, or a list of scalars (joined with commas for lora-targets, one input each otherwise).
  std::vector<std::string> values(const YAML::Node& n, const std::string& key) const {
    if (n.IsScalar()) return {n.Scalar()};
    if (!n.IsSequence()) fail(n, cat("'", key, "' takes a value or a list of values"));
    std::vector<std::string> out;
    for (const auto& e : n) out.push_back(scalar(e, key));
    return out;
  }

  void set(const std::string& option, const std::string& key, const YAML::Node& at, std::vector<std::string> inputs) {
    if (auto it = set_.find(option); it != set_.end())
      fail(at, cat("'", key, "' sets --", option, ", which '", it->second.key, "' (line ", it->second.line + 1,
                   ") already sets"));
    if (option == "lora-targets" && inputs.size() > 1) {
      std::string joined;
      for (const auto& s : inputs) joined += (joined.empty() ? "" : ",") + s;
      inputs = {joined};
    }
    if (option == "val-fraction" && !inputs.empty()) {
      try {
        if (std::stod(inputs[0]) >= 1)
          fail(at, cat("'", key, "' is a fraction of --data in [0, 1); loft does not take a count of examples"));
      } catch (const std::logic_error&) {}  // not a number: --val-fraction's own check says so
    }
    set_[option] = {key, at.Mark().line, std::move(inputs)};
  }

  // axolotl's datasets: a list of {path, type[, weight]}; one --format for all of them.
  void datasets(const YAML::Node& list, const YAML::Node& key) {
    if (!list.IsSequence()) fail(list, "'datasets' is a list of {path, type}");
    std::vector<std::string> specs;
    std::optional<std::string> format;
    for (const auto& d : list) {
      if (d.IsScalar()) {
        specs.push_back(d.Scalar());
        continue;
      }
      if (!d.IsMap()) fail(d, "a 'datasets' entry is a path or a mapping with 'path'");
      std::string path, weight;
      for (const auto& kv : d) {
        const std::string k = kv.first.as<std::string>();
        if (k == "path") path = scalar(kv.second, k);
        else if (k == "weight") weight = scalar(kv.second, k);
        else if (k == "type") {
          const std::string t = scalar(kv.second, k);
          const auto f = kDatasetTypes.find(t);
          if (f == kDatasetTypes.end())
            fail(kv.second, cat("dataset type '", t, "' is not one loft reads (alpaca, sharegpt, chat_template, "
                                "completion, input_output)"));
          if (format && *format != f->second)
            fail(kv.second, cat("datasets of types that differ (", *format, ", ", f->second,
                                "): loft reads every file with one --format"));
          format = f->second;
        } else {
          fail(kv.first, cat("unknown key '", k, "' in a 'datasets' entry (path, type, weight)"));
        }
      }
      if (path.empty()) fail(d, "a 'datasets' entry needs 'path'");
      specs.push_back(weight.empty() ? path : path + ":" + weight);
    }
    set("data", "datasets", key, specs);
    if (format) set("format", "datasets", key, {*format});
  }

  void no_dropout(const YAML::Node& n) const {
    const std::string v = scalar(n, "lora_dropout");
    bool zero = false;
    try { zero = std::stod(v) == 0; } catch (const std::logic_error&) {}
    if (!zero) fail(n, cat("lora_dropout ", v, ": loft trains without LoRA dropout; use 0 or leave it out"));
  }

  void target_linear(const YAML::Node& n, const YAML::Node& key) {
    const std::string v = scalar(n, "lora_target_linear");
    if (v == "true" || v == "True") set("lora-targets", "lora_target_linear", key, {"all"});
    else if (v != "false" && v != "False") fail(n, "lora_target_linear is true or false");
  }

  // batch = micro_batch_size x gradient_accumulation_steps, as axolotl counts it.
  void accumulate() {
    const auto micro = set_.find("micro-batch");
    if (micro == set_.end())
      throw UsageError(cat(file_, ":", accumulation_->second + 1,
                           ": gradient_accumulation_steps needs micro_batch_size (batch = micro x accumulation)"));
    if (auto b = set_.find("batch"); b != set_.end())
      throw UsageError(cat(file_, ":", b->second.line + 1, ": 'batch' and gradient_accumulation_steps contradict: ",
                           "give one of them"));
    try {
      const long long m = std::stoll(micro->second.inputs.at(0)), a = std::stoll(accumulation_->first);
      if (a < 1 || m < 1) throw std::invalid_argument("");
      set_["batch"] = {"gradient_accumulation_steps", accumulation_->second, {std::to_string(m * a)}};
    } catch (const std::logic_error&) {
      throw UsageError(cat(file_, ":", accumulation_->second + 1,
                           ": micro_batch_size and gradient_accumulation_steps must be integers >= 1"));
    }
  }

  const std::string& file_;
  const CLI::App& cmd_;
  std::map<std::string, Value> set_;
  std::optional<std::pair<std::string, int>> accumulation_;  // value, line
};

}  // namespace

bool is_run_control(std::string_view name) {
  return name == "help" || name == "config" || name == "resume" || name == "overwrite";
}

bool is_yaml_config(std::string_view path) { return path.ends_with(".yaml") || path.ends_with(".yml"); }

std::string recipe_key(std::string_view long_name) {
  std::string k(long_name);
  std::replace(k.begin(), k.end(), '-', '_');
  return k;
}

std::vector<CLI::ConfigItem> YamlRecipe::from_config(std::istream& in) const {
  if (!command_->parsed())
    throw UsageError(cat("--config ", file_, ": a YAML recipe configures loft ", command_->get_name(),
                         "; other commands read TOML/INI"));
  YAML::Node root;
  try {
    root = YAML::Load(in);
  } catch (const YAML::Exception& e) {
    throw UsageError(cat(file_, ":", e.mark.line + 1, ":", e.mark.column + 1, ": ", e.msg));
  }
  return RecipeReader(file_, *command_).read(root);
}

std::string YamlRecipe::to_config(const CLI::App*, bool, bool, std::string) const {
  throw Error("YamlRecipe writes no config through CLI11; see resolved_config.h");
}

}  // namespace loft::app
