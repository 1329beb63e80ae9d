// Every `loft` subcommand registers itself on the root CLI11 app through one of these functions
// (one file per command). Callbacks throw loft::UsageError (exit 2) or loft::Error (exit 1).
#pragma once
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "app/cli_fwd.h"

namespace loft::app {

void add_info_command(CLI::App& root);
void add_finetune_command(CLI::App& root);
void add_evaluate_command(CLI::App& root);
void add_generate_command(CLI::App& root);
void add_data_command(CLI::App& root);
void add_tokenize_command(CLI::App& root);
void add_bench_command(CLI::App& root);
// `loft bench --kernels ...` (the one command bench was) -> `loft bench kernels ...`, and so on
// for --eval X (eval --task X), --tokenizer alone (data) and the rest (step), with a note on
// `note`; other command lines unchanged. Kept for one release.
std::vector<std::string> legacy_bench_args(std::vector<std::string> args, std::ostream& note);
void add_export_command(CLI::App& root);
void add_report_command(CLI::App& root);
void add_studio_command(CLI::App& root);

// Adds --device auto|cpu|cuda[:N] and --gpu-memory-limit SIZE (app/gpu_memory_limit.h) to a
// command that computes.
CLI::Option* add_device_option(CLI::App& cmd, std::string& device);

// Adds --grad-bucket-mib N (data parallel: the gradient sum's bucket cap; 0: every bucket after
// the backward) to finetune and bench.
CLI::Option* add_grad_bucket_option(CLI::App& cmd, int64_t& mib);

// Builds the root app with every command registered (main.cpp and the CLI tests share it).
void build_cli(CLI::App& root);
// Parses argv and runs the chosen command; returns the process exit code. Prints errors as
// "loft: error: ..." on stderr.
int run_cli(int argc, const char* const* argv);

}  // namespace loft::app
