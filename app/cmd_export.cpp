// loft export: the trained model (or the base) as FP8/bf16 safetensors, a PEFT adapter, or
// llama.cpp GGUF (export/export.h, docs/export.md). Runs on the CPU, one tensor at a time: it has
// no --device or --gpu-memory-limit.
#include <CLI/CLI.hpp>
#include <iostream>

#include "app/commands.h"
#include "engine/core/byte_size.h"
#include "engine/peft/method_spec.h"
#include "export/export.h"

namespace loft::app {

void add_export_command(CLI::App& root) {
  CLI::App* cmd = root.add_subcommand(
      "export",
      "write the trained model as FP8 or bf16 safetensors, a PEFT adapter, or llama.cpp GGUF (on the CPU, "
      "one tensor at a time: no GPU is used, so --device and --gpu-memory-limit do not apply)");
  auto o = std::make_shared<exporter::ExportOptions>();
  auto model = std::make_shared<std::string>(), adapter = std::make_shared<std::string>(),
       out = std::make_shared<std::string>(), shard = std::make_shared<std::string>("5GB");
  cmd->add_option("--model", *model, "Hugging Face Llama folder (the base the adapter trained on)")
      ->required();
  cmd->add_option("--adapter", *adapter,
                  "adapter folder (finetune's RUN/adapter); without it the base is converted");
  cmd->add_option("--method", o->method,
                  "build the adapter with this method instead of its recorded one (" +
                      method_name_list() + ")");
  cmd->add_option("--format", o->format, "fp8, bf16, peft, gguf (llama.cpp model) or gguf-lora (llama.cpp adapter)")->required();
  cmd->add_option("--out", *out,
                  "output folder (must not exist unless --overwrite); gguf/gguf-lora: a path ending "
                  "in .gguf is the file itself, else the folder gets model.gguf / adapter.gguf")
      ->required();
  cmd->add_option("--fp8-layout", o->fp8_layout,
                  "fp8 weight scales: channel (compressed-tensors FP8_DYNAMIC), tensor "
                  "(compressed-tensors), block (transformers fp8, 128x128)")
      ->capture_default_str();
  cmd->add_option("--gguf-type", o->gguf_type,
                  "gguf/gguf-lora tensor type: f16 (gguf default), bf16, q8_0, f32 (gguf-lora default)");
  cmd->add_option("--max-shard-size", *shard, "largest safetensors shard (5GB, 500MB, 2GiB)")
      ->capture_default_str();
  cmd->add_flag("--overwrite", o->overwrite, "replace an existing --out folder (or .gguf file)");
  cmd->callback([o, model, adapter, out, shard] {
    o->model = *model;
    o->adapter = *adapter;
    o->out = *out;
    o->max_shard_bytes = uint64_t(parse_byte_size(*shard, "--max-shard-size"));
    exporter::run_export(*o, std::cout, &std::cerr);
  });
}

}  // namespace loft::app
