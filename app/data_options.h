// The data options shared by every command that reads a dataset (finetune, data inspect,
// evaluate): registered on a CLI11 command, then resolved into a data::DataConfig.
#pragma once
#include <string>
#include <vector>

#include "app/cli_fwd.h"
#include "datasets/data_config.h"
#include "tokenizer/chat_template_detect.h"

namespace loft::app {

struct DataOptions {
  std::vector<std::string> data, val_data;
  double val_fraction = 0.0;
  std::string format, chat_template, on_bad_record = "fail";
  int64_t seq = 512;
  bool packing = true, train_on_inputs = false;
  int64_t shuffle_buffer = 1000;
  int64_t epochs = 0;  // 0 = not given: 1, or as many as --steps needs when that is given
  int64_t eval_every = 0;
};

// Who reads the data: training takes files as --data FILE[:WEIGHT] and adds what only training
// uses (validation split, packing, shuffle, epochs); inspection takes plain file arguments.
enum class DataUse { training, inspection };
void add_data_options(CLI::App& cmd, DataOptions& o, DataUse use);
// Validated DataConfig (UsageError naming the option at fault).
// `steps_given`: with --steps and no --epochs, the data repeats until the steps are done.
data::DataConfig resolve_data_config(const DataOptions& o, int64_t batch_rows, uint64_t seed,
                                     bool steps_given = false);

// Sets c.model_template from MODEL_DIR/tokenizer_config.json's chat_template (what --template auto
// uses), noting on stderr a chat template of no known family. Throws loft::Error for a bad file.
ChatTemplateDetection use_model_chat_template(data::DataConfig& c, const std::filesystem::path& model_dir);

}  // namespace loft::app
