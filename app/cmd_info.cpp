// loft info: describes a Hugging Face Llama folder (architecture, exact parameter count, stored
// dtypes, an FP8 checkpoint's quantization, the tokenizer with its chat template and stop ids:
// app/tokenizer_info) and prints the per-method training memory estimate from
// models/llama/memory_estimate.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <optional>
#include <nlohmann/json.hpp>

#include "app/commands.h"
#include "app/gpu_cards.h"
#include "app/tokenizer_info.h"
#include "engine/core/byte_size.h"
#include "engine/core/error.h"
#include "engine/io/safetensors_checkpoint.h"
#include "models/llama/config.h"
#include "models/llama/family.h"
#include "models/llama/memory_estimate.h"

namespace loft::app {

namespace {

struct InfoOptions {
  std::string model;
  bool json = false;
  std::string estimate_for = "gpu";
  llama::MemoryEstimateOptions estimate;
  std::optional<GpuCard> card;  // --card: say whether each method fits it
};

constexpr const char* kEstimateNote =
    "estimate of the step's peak: weights, adapter state, what the forward keeps for the backward "
    "and the most a layer's backward or the loss head adds on top; excludes the CUDA context, "
    "cuBLAS workspaces, allocator rounding and small per-product temporaries";

std::string with_commas(int64_t n) {  // n >= 0
  const std::string digits = std::to_string(n);
  std::string s;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) s += ',';
    s += digits[i];
  }
  return s;
}

// CLI11's PositiveNumber prints its range as a 300-digit double; say it plainly instead.
const CLI::Validator kPositive(
    [](std::string& v) -> std::string {
      try {
        size_t used = 0;
        if (std::stoll(v, &used) > 0 && used == v.size()) return "";
      } catch (const std::exception&) {
      }
      return "must be a positive integer, got '" + v + "'";
    },
    "POSITIVE");

std::string human_bytes(int64_t b) {
  char buf[32];
  if (b >= (int64_t(1) << 30))
    std::snprintf(buf, sizeof buf, "%.2f GiB", double(b) / double(int64_t(1) << 30));
  else
    std::snprintf(buf, sizeof buf, "%.1f MiB", double(b) / double(1 << 20));
  return buf;
}

std::string dtype_list(const std::vector<DType>& ds) {
  std::string s;
  for (DType d : ds) s += (s.empty() ? "" : ", ") + std::string(dtype_name(d));
  return s;
}

nlohmann::json to_json(const InfoOptions& o, const llama::LlamaConfig& c,
                       const SafetensorsCheckpoint& ck,
                       const std::vector<llama::MethodMemory>& methods) {
  nlohmann::json dtypes = nlohmann::json::array();
  for (DType d : ck.dtypes()) dtypes.push_back(std::string(dtype_name(d)));
  nlohmann::json ms = nlohmann::json::array();
  for (const auto& m : methods)
    ms.push_back({{"method", m.method},
                  {"description", m.description},
                  {"frozen_weights_bytes", m.frozen_weights},
                  {"embeddings_bytes", m.embeddings},
                  {"adapter_bytes", m.adapter},
                  {"adapter_parameters", m.adapter_params},
                  {"host_embeddings_bytes", m.host_embeddings},
                  {"host_checkpoints_bytes", m.host_checkpoints},
                  {"activations_bytes", m.activations},
                  {"working_bytes", m.working},
                  {"logits_bytes", m.logits},
                  {"total_bytes", m.total()}});
  if (o.card)
    for (size_t i = 0; i < methods.size(); ++i) {
      const CardFit f = card_fit(methods[i].total(), *o.card);
      ms[i]["card_fits"] = f.fits;
      ms[i]["card_headroom_bytes"] = f.headroom;
    }
  return {{"model", o.model},
          {"architecture", c.architecture},
          {"model_type", c.model_type},
          {"family_differences", llama::family_differences(c)},
          {"sliding_window", c.sliding_window > 0 ? nlohmann::json(c.sliding_window) : nlohmann::json()},
          {"parameters", ck.parameter_count()},
          {"files", ck.files().size()},
          {"dtypes_on_disk", dtypes},
          {"quantization", c.quantization ? c.quantization->to_json() : nlohmann::json()},
          {"layers", c.num_layers},
          {"hidden_size", c.hidden_size},
          {"intermediate_size", c.intermediate_size},
          {"num_attention_heads", c.num_heads},
          {"num_key_value_heads", c.num_kv_heads},
          {"head_dim", c.head_dim},
          {"vocab_size", c.vocab_size},
          {"max_position_embeddings", c.max_position_embeddings},
          {"tie_word_embeddings", c.tie_word_embeddings},
          {"rope_theta", c.rope_theta},
          {"rope_type", c.rope_scaling.type},
          {"rms_norm_eps", c.rms_norm_eps},
          {"memory_estimate",
           {{"batch", o.estimate.batch},
            {"seq", o.estimate.seq},
            {"lora_rank", o.estimate.lora_rank},
            {"device", o.estimate.gpu ? "gpu" : "cpu"},
            {"activation_checkpointing", o.estimate.grad_checkpointing},
            {"note", kEstimateNote},
            {"card", o.card ? nlohmann::json{{"card", o.card->id.empty() ? nlohmann::json() : nlohmann::json(o.card->id)},
                                             {"label", o.card->label},
                                             {"bytes", o.card->bytes},
                                             {"runtime_allowance_bytes", kRuntimeAllowance}}
                            : nlohmann::json()},
            {"methods", ms}}}};
}

// --card: one line per method, whether its estimate and the runtime's allowance fit the card.
void print_card_fits(std::ostream& out, const GpuCard& card, const std::vector<llama::MethodMemory>& methods) {
  out << "\non " << card.label << ", keeping " << gib_text(kRuntimeAllowance)
      << " for the CUDA context and library workspaces:\n";
  char line[160];
  for (const auto& m : methods) {
    const CardFit f = card_fit(m.total(), card);
    std::snprintf(line, sizeof line, "  %-11s %-13s %s %s\n", m.method.c_str(), f.fits ? "fits" : "does not fit",
                  gib_text(f.fits ? f.headroom : -f.headroom).c_str(), f.fits ? "to spare" : "short");
    out << line;
  }
}

void print_text(std::ostream& out, const InfoOptions& o, const llama::LlamaConfig& c,
                const SafetensorsCheckpoint& ck, const std::vector<llama::MethodMemory>& methods,
                const TokenizerInfo& tok) {
  out << "model         " << o.model;
  if (!c.architecture.empty()) out << " (" << c.architecture << ")";
  const std::string differences = llama::family_differences(c);
  out << "\nfamily        " << c.model_type
      << (differences.empty() ? std::string() : ": Llama with " + differences);
  out << "\narchitecture  " << c.num_layers << " layers, hidden " << c.hidden_size
      << ", intermediate " << c.intermediate_size << ", " << c.num_heads << " heads / "
      << c.num_kv_heads << " KV heads, head_dim " << c.head_dim << ", vocab " << c.vocab_size
      << "\n              rope theta " << c.rope_theta << " (" << c.rope_scaling.type
      << "), rms_norm_eps " << c.rms_norm_eps << ", max positions " << c.max_position_embeddings
      << ", lm_head " << (c.tie_word_embeddings ? "tied to embeddings" : "untied")
      << "\nparameters    " << with_commas(ck.parameter_count()) << " (" << ck.files().size()
      << (ck.files().size() == 1 ? " file" : " files") << ")\non disk       "
      << dtype_list(ck.dtypes()) << "\n";
  if (c.quantization) {
    out << "weights       " << c.quantization->describe();
    if (!c.quantization->not_quantized.empty()) {
      out << "; not quantized:";
      for (const std::string& m : c.quantization->not_quantized) out << ' ' << m;
    }
    out << "\n";
  }
  print_tokenizer_text(out, tok);
  out << "\nmemory estimate for training: batch " << o.estimate.batch
      << " x seq " << o.estimate.seq << ", LoRA rank " << o.estimate.lora_rank
      << (o.estimate.gpu ? ", on a GPU (bf16)" : ", on the CPU (f32)") << ", grad checkpointing "
      << (o.estimate.grad_checkpointing ? "on" : "off") << "\n";
  char line[200];
  std::snprintf(line, sizeof line, "  %-11s %11s %11s %11s %12s %11s %11s  %s\n", "method",
                "frozen", "embed/head", "adapter", "activations", "working", "total",
                "adapter params");
  out << line;
  for (const auto& m : methods) {
    std::snprintf(line, sizeof line, "  %-11s %11s %11s %11s %12s %11s %11s  %s\n",
                  m.method.c_str(), human_bytes(m.frozen_weights).c_str(),
                  human_bytes(m.embeddings).c_str(), human_bytes(m.adapter).c_str(),
                  human_bytes(m.activations).c_str(), human_bytes(m.working).c_str(),
                  human_bytes(m.total()).c_str(), with_commas(m.adapter_params).c_str());
    out << line;
  }
  out << "frozen = the 7 projections as each method stores them (with the scratch one product "
         "decodes) + RMSNorm weights; adapter = fp32 params, grads and AdamW moments (16 B/param) "
         "+ compute-dtype copies; activations = what the forward keeps for the backward (with "
         "checkpointing: each block's input); working = one layer's backward (recomputed) or the "
         "loss head with a logits chunk of "
      << human_bytes(methods.empty() ? 0 : methods.front().logits) << "\n";
  if (!methods.empty() && methods.front().host_embeddings > 0)
    out << "the input embedding table (" << human_bytes(methods.front().host_embeddings)
        << ") stays in host memory: only a batch's rows go to the GPU\n";
  if (!methods.empty() && methods.front().host_checkpoints > 0)
    out << "the checkpointed block inputs (" << human_bytes(methods.front().host_checkpoints)
        << ") wait in pinned host memory: the host needs that much RAM free\n";
  out << kEstimateNote << '\n';
  if (o.card) print_card_fits(out, *o.card, methods);
}

void run_info(const InfoOptions& o) {
  if (!std::filesystem::is_directory(o.model))
    throw UsageError(cat("--model ", o.model, ": not a folder"));
  const auto cfg = llama::load_llama_config(o.model);
  const auto ck = SafetensorsCheckpoint::open(o.model);
  const auto methods = llama::estimate_training_memory(cfg, o.estimate);
  const TokenizerInfo tok = describe_tokenizer(o.model);
  if (o.json) {
    nlohmann::json j = to_json(o, cfg, ck, methods);
    add_tokenizer_json(j, tok);
    std::cout << j.dump(2) << '\n';
  } else {
    print_text(std::cout, o, cfg, ck, methods, tok);
  }
  std::cout.flush();
}

}  // namespace

void add_info_command(CLI::App& root) {
  CLI::App* cmd = root.add_subcommand("info", "describe a checkpoint and its memory needs");
  auto o = std::make_shared<InfoOptions>();
  cmd->add_option("--model", o->model, "Hugging Face Llama folder (config.json + safetensors)")
      ->required();
  cmd->add_flag("--json", o->json, "print one JSON object instead of text");
  cmd->add_option("--batch", o->estimate.batch, "sequences per step for the estimate")
      ->check(kPositive)
      ->capture_default_str();
  cmd->add_option("--seq", o->estimate.seq, "tokens per sequence for the estimate")
      ->check(kPositive)
      ->capture_default_str();
  cmd->add_option("--lora-rank", o->estimate.lora_rank, "adapter rank for the estimate")
      ->check(kPositive)
      ->capture_default_str();
  cmd->add_flag("--grad-checkpointing", o->estimate.grad_checkpointing,
                "estimate with activation checkpointing (finetune/bench --grad-checkpointing)");
  cmd->add_option("--estimate-for", o->estimate_for, "the estimate's device: gpu (bf16) or cpu (f32)")
      ->check(CLI::IsMember({"gpu", "cpu"}))
      ->capture_default_str();
  auto card = std::make_shared<std::string>();
  cmd->add_option("--card", *card,
                  "plan for a GPU: say per method whether the estimate fits it: " + gpu_card_ids() +
                      ", or its memory as a SIZE (24GiB, 16GB)")
      ->type_name("NAME|SIZE");
  cmd->callback([o, card] {
    o->estimate.gpu = o->estimate_for == "gpu";
    if (!card->empty()) {
      if (!o->estimate.gpu) throw UsageError("--card plans for a GPU; it does not go with --estimate-for cpu");
      o->card = parse_gpu_card(*card);
      // What the card leaves a run, as print_card_fits counts it: where restoring the attention
      // tensors would not fit, the estimate recomputes them, as training on that card would.
      o->estimate.device_budget = std::max<int64_t>(o->card->bytes - kRuntimeAllowance, 1);
    }
    run_info(*o);
  });
}

}  // namespace loft::app
