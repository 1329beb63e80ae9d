#include "app/recipe.h"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <iterator>
#include <map>
#include <optional>
#include <sstream>

#include "app/option_checks.h"
#include "engine/core/checked.h"
#include "engine/core/error.h"
#include "engine/io/json_read.h"

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
  RecipeReader(const std::string& file, CLI::App& cmd) : file_(file), cmd_(cmd) {}

  std::vector<CLI::ConfigItem> read(const YAML::Node& root) {
    if (root.IsNull()) return {};
    if (!root.IsMap()) fail(root, "a recipe is a mapping of keys to values");
    for (const auto& kv : root) {
      const std::string key = key_of(kv.first);
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

  // A mapping key: a plain name (yaml-cpp would refuse to convert a list or mapping used as one).
  std::string key_of(const YAML::Node& k) const {
    if (!k.IsScalar()) fail(k, "a key must be a plain name, not a list or mapping");
    return k.Scalar();
  }

  // The value of `key` read whole as an integer of at least 1 ("4.5", "4abc" are errors).
  int64_t count(const std::string& value, const std::string& key, int line) const {
    const std::optional<int64_t> v = whole_integer(value);
    if (!v || *v < 1)
      throw UsageError(cat(file_, ":", line + 1, ": ", key, " must be an integer of at least 1, not ", brief(value, 40)));
    return *v;
  }

  // Each input through the option's own checks, so a bad value names this file, line and key
  // rather than only the option CLI11 would name later.
  void check_values(const std::string& option, const std::string& key, const YAML::Node& at,
                    const std::vector<std::string>& inputs) {
    CLI::Option* opt = cmd_.get_option_no_throw("--" + option);
    if (!opt) return;
    for (int i = 0;; ++i) {
      const CLI::Validator* v = nullptr;
      try {
        v = opt->get_validator(i);
      } catch (const CLI::OptionNotFound&) {  // CLI11's way to say there are no more
        return;
      }
      for (std::string in : inputs)
        if (const std::string err = (*v)(in); !err.empty()) fail(at, cat("'", key, "' (--", option, "): ", err));
    }
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
    if (option == "val-fraction" && !inputs.empty())
      if (const std::optional<double> v = whole_number(inputs[0]); v && *v >= 1)
        fail(at, cat("'", key, "' is a fraction of --data in [0, 1); loft does not take a count of examples"));
    check_values(option, key, at, inputs);
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
        const std::string k = key_of(kv.first);
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
    if (whole_number(v) != 0.0) fail(n, cat("lora_dropout ", v, ": loft trains without LoRA dropout; use 0 or leave it out"));
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
    const int64_t m = count(micro->second.inputs.at(0), micro->second.key, micro->second.line);
    const int64_t a = count(accumulation_->first, "gradient_accumulation_steps", accumulation_->second);
    const int64_t batch = checked_mul(m, a, cat(file_, ":", accumulation_->second + 1, ": ", micro->second.key,
                                                " x gradient_accumulation_steps"));
    std::string text = std::to_string(batch);
    if (const std::string err = rows_bound()(text); !err.empty())
      throw UsageError(cat(file_, ":", accumulation_->second + 1, ": ", micro->second.key,
                           " x gradient_accumulation_steps is --batch ", batch, ", which ", err));
    set_["batch"] = {"gradient_accumulation_steps", accumulation_->second, {text}};
  }

  const std::string& file_;
  CLI::App& cmd_;
  std::map<std::string, Value> set_;
  std::optional<std::pair<std::string, int>> accumulation_;  // value, line
};

// Where each document of a YAML stream starts; the events themselves are not needed.
struct DocumentStarts : YAML::EventHandler {
  std::vector<YAML::Mark> starts;
  void OnDocumentStart(const YAML::Mark& m) override { starts.push_back(m); }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
};

// The start of a second document, if `text` has one. The parser is asked for two documents at
// most: yaml-cpp 0.7's LoadAll never ends on some inputs (",r: 9\n---\x13..." yields empty
// documents for ever; found by tests/fuzz/fuzz_recipe).
std::optional<YAML::Mark> second_document(const std::string& text) {
  std::istringstream in(text);
  YAML::Parser parser(in);
  DocumentStarts docs;
  if (parser.HandleNextDocument(docs) && parser.HandleNextDocument(docs) && docs.starts.size() > 1)
    return docs.starts[1];
  return std::nullopt;
}

}  // namespace

bool is_run_control(std::string_view name) {
  return name == "help" || name == "config" || name == "resume" || name == "overwrite" || name == "plan";
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
  // Every yaml-cpp exception, while parsing or reading nodes, becomes one line naming the place.
  try {
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const YAML::Node root = YAML::Load(text);
    if (const std::optional<YAML::Mark> second = second_document(text))
      throw UsageError(cat(file_, second->is_null() ? std::string() : cat(":", second->line + 1),
                           ": holds a second YAML document (after '---'); a recipe is one document"));
    return RecipeReader(file_, *command_).read(root);
  } catch (const YAML::Exception& e) {
    if (e.mark.is_null()) throw UsageError(cat(file_, ": ", e.msg));
    throw UsageError(cat(file_, ":", e.mark.line + 1, ":", e.mark.column + 1, ": ", e.msg));
  }
}

std::string YamlRecipe::to_config(const CLI::App*, bool, bool, std::string) const {
  throw Error("YamlRecipe writes no config through CLI11; see resolved_config.h");
}

}  // namespace loft::app
