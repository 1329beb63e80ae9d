// loft generate: text from a base model or base + adapter, through the KV-cache decoder
// (models/llama/generate.h). Streams each prompt's tokens to stdout as they are chosen (a
// StreamDecoder, holding back text that could still become a --stop string); --json writes one
// object per prompt instead, all prompts decoded as one batch. Stops at any stop id (the model's:
// generation_config.json, config.json and the tokenizer's EOS; an adapter's generation_config.json
// adds the end-of-turn token it was trained on), at --max-new-tokens, or once the decoded text
// holds a --stop string (the text is cut before it).
#include <CLI/CLI.hpp>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "app/chat_prompt.h"
#include "app/commands.h"
#include "engine/io/json_read.h"
#include "app/model_loading.h"
#include "app/option_checks.h"
#include "engine/core/checked.h"
#include "models/llama/generate.h"
#include "models/llama/generation_config.h"
#include "models/llama/kv_cache.h"
#include "tokenizer/tokenizer.h"

namespace loft::app {

namespace {
using nlohmann::json;

struct GenerateCmdOptions {
  std::string model, adapter, method, device, prompt, prompts, chat_template = "auto", system;
  bool chat = false;
  std::vector<std::string> stop;
  int64_t max_new_tokens = 256;
  double temperature = 0.0, top_p = 1.0;
  int64_t top_k = 0;
  uint64_t seed = 0;
  int64_t slots = 16;
  bool json = false;
  bool stream_json = false;  // streaming as JSON lines (the studio's chat)
};

// A prompt as given: its JSON (a string, {"prompt": ...}, or with --chat any chat record) and where
// it came from, for errors.
struct PromptEntry {
  json value;
  std::string where;
};

std::vector<PromptEntry> read_prompts(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw Error(cat("cannot open --prompts ", file));
  std::vector<PromptEntry> out;
  int64_t n = 0;
  for (std::string line; std::getline(in, line);) {
    ++n;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    json j = parse_json(line, cat(file, ":", n));
    out.push_back({std::move(j), cat(file, ":", n)});
  }
  if (out.empty()) throw Error(cat("--prompts ", file, " holds no prompt"));
  return out;
}

// The prompt's text (shown before the generation) and ids: plain text encoded as the model's
// tokenizer does by default, or with --chat the conversation in the chat template.
struct Prompt {
  std::string text;
  std::vector<int32_t> ids;
};

Prompt make_prompt(const PromptEntry& e, const std::optional<ChatChoice>& chat, const std::string& system,
                   const Tokenizer& tok) {
  if (chat) {
    const std::vector<int32_t> ids = chat_prompt_ids(chat_conversation(e.value, system, e.where), chat->tmpl, tok);
    return {tok.decode(ids), ids};
  }
  std::string text;
  if (e.value.is_string()) text = e.value.get<std::string>();
  else if (e.value.is_object() && e.value.contains("prompt") && e.value["prompt"].is_string()) text = e.value["prompt"];
  else throw Error(cat(e.where, ": expected {\"prompt\": \"...\"} or a JSON string (chat records need --chat)"));
  return {text, tok.encode_with_special(text)};
}

// How many bytes at the end of `text` could be the start of a stop string (held back while
// streaming).
size_t stop_holdback(const std::string& text, const std::vector<std::string>& stops) {
  size_t hold = 0;
  for (const std::string& s : stops)
    for (size_t k = std::min(s.size() - 1, text.size()); k > hold; --k)
      if (text.compare(text.size() - k, k, s, 0, k) == 0) {
        hold = k;
        break;
      }
  return hold;
}

size_t first_stop(const std::string& text, const std::vector<std::string>& stops) {
  size_t at = std::string::npos;
  for (const std::string& s : stops) at = std::min(at, text.find(s));
  return at;
}

// One sequence's decoded text, streamed or collected.
struct TextState {
  std::unique_ptr<StreamDecoder> decoder;
  std::string text;     // decoded so far (final bytes only)
  size_t shown = 0;     // bytes written to the terminal
  bool stopped = false;
};

// A stream decoder that has seen the prompt, so the generated text is what follows the prompt in
// the decoded whole (e.g. the space a SentencePiece-style first token carries).
std::unique_ptr<StreamDecoder> primed_decoder(const Tokenizer& tok, const std::vector<int32_t>& prompt) {
  auto d = tok.stream_decoder_skip_special();
  for (int32_t id : prompt) d->push(id);
  return d;
}

void run_generate(const GenerateCmdOptions& o) {
  if (o.prompt.empty() == o.prompts.empty()) throw UsageError("give one of --prompt TEXT or --prompts FILE.jsonl");
  for (const std::string& s : o.stop)
    if (s.empty()) throw UsageError("--stop needs a non-empty string");
  llama::GenerateOptions go;
  go.max_new_tokens = o.max_new_tokens;
  go.sampling.temperature = o.temperature;
  go.sampling.top_k = o.top_k;
  go.sampling.top_p = o.top_p;
  go.sampling.seed = o.seed;  // the options' validators (add_generate_command) bound each value
  if (!o.chat && (!o.system.empty() || o.chat_template != "auto"))
    throw UsageError("--system and --template go with --chat");
  const std::vector<PromptEntry> entries =
      o.prompts.empty() ? std::vector<PromptEntry>{{json(o.prompt), "--prompt"}} : read_prompts(o.prompts);

  const Device device = resolve_device(o.device, &std::cerr);
  const auto tok = load_tokenizer(o.model);
  check_tokenizer_fits(*tok, llama::load_llama_config(o.model), o.model);
  LoadedModel m = load_model_with_adapter(o.model, o.adapter, o.method, device, std::cerr);
  llama::GenerationSettings stops = llama::load_generation_settings(o.model, *tok);
  if (!o.adapter.empty()) llama::add_adapter_stops(stops, o.adapter, m.model->config().vocab_size);
  std::optional<ChatChoice> chat;
  if (o.chat) {
    chat = resolve_chat_template(o.chat_template, o.model, o.adapter, *tok);
    stops.add_stop(end_of_turn_id(chat->tmpl, *tok), cat("chat template ", chat_template_name(chat->tmpl)));
    std::cerr << "chat template " << chat_template_name(chat->tmpl) << " (" << chat->origin << ")\n";
  }
  go.eos_ids = stops.stop_ids();
  const int64_t context = m.model->config().max_position_embeddings;
  std::vector<std::string> texts;
  std::vector<std::vector<int32_t>> prompts;
  int64_t longest = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    Prompt p = make_prompt(entries[i], chat, o.system, *tok);
    texts.push_back(std::move(p.text));
    prompts.push_back(std::move(p.ids));
    if (prompts.back().empty()) throw UsageError(cat("prompt ", i, " encodes to no tokens"));
    const int64_t needed = checked_add(int64_t(prompts.back().size()), o.max_new_tokens,
                                       "the prompt's tokens + --max-new-tokens");
    if (needed > context)
      throw UsageError(cat("--max-new-tokens ", o.max_new_tokens, ": prompt ", i, " (", prompts.back().size(),
                           " tokens) + ", o.max_new_tokens, " new tokens is more than the model's context of ",
                           context, " positions"));
    longest = std::max<int64_t>(longest, int64_t(prompts.back().size()));
  }
  auto is_eos = [&](int32_t t) { return std::find(go.eos_ids.begin(), go.eos_ids.end(), t) != go.eos_ids.end(); };

  if (o.json) {  // all prompts in one batch, one JSON line each
    const int64_t slots = std::min<int64_t>(o.slots, int64_t(prompts.size()));
    llama::KvCache cache = llama::KvCache::for_model(*m.model, slots, longest + o.max_new_tokens);
    std::vector<TextState> st(prompts.size());
    for (size_t q = 0; q < st.size(); ++q) st[q].decoder = primed_decoder(*tok, prompts[q]);
    const auto gens = llama::generate(*m.model, cache, prompts, go, [&](size_t q, int32_t t) {
      TextState& s = st[q];
      if (is_eos(t)) return false;
      s.text += s.decoder->push(t);
      if (first_stop(s.text, o.stop) != std::string::npos) s.stopped = true;
      return !s.stopped;
    });
    for (size_t q = 0; q < prompts.size(); ++q) {
      TextState& s = st[q];
      if (!s.stopped) s.text += s.decoder->finish();
      const size_t cut = first_stop(s.text, o.stop);
      if (cut != std::string::npos) s.text.resize(cut);
      std::cout << json{{"index", q},
                        {"prompt", texts[q]},
                        {"text", s.text},
                        {"tokens", gens[q].tokens},
                        {"generated_tokens", gens[q].tokens.size()},
                        {"stop_reason", s.stopped ? "stop" : llama::stop_reason_name(gens[q].stop)}}
                       .dump()
                << "\n";
    }
    return;
  }
  // Streaming: one prompt at a time, its text written as it is decoded.
  llama::KvCache cache = llama::KvCache::for_model(*m.model, 1, longest + o.max_new_tokens);
  for (size_t q = 0; q < prompts.size(); ++q) {
    if (prompts.size() > 1 && !o.stream_json) std::cout << (q ? "\n" : "") << "--- prompt " << q << " ---\n";
    if (!o.stream_json) std::cout << texts[q] << std::flush;
    TextState s;
    s.decoder = primed_decoder(*tok, prompts[q]);
    auto show = [&](size_t upto) {
      if (upto > s.shown) {
        const std::string_view piece(s.text.data() + s.shown, upto - s.shown);
        if (o.stream_json)
          std::cout << json{{"index", q}, {"text", piece}}.dump(-1, ' ', false, json::error_handler_t::replace) << "\n";
        else
          std::cout << piece;
        std::cout.flush();
        s.shown = upto;
      }
    };
    const auto gen = llama::generate(*m.model, cache, {prompts[q]}, go, [&](size_t, int32_t t) {
      if (is_eos(t)) return false;
      s.text += s.decoder->push(t);
      const size_t cut = first_stop(s.text, o.stop);
      if (cut != std::string::npos) {
        s.stopped = true;
        show(cut);
        return false;
      }
      show(s.text.size() - stop_holdback(s.text, o.stop));
      return true;
    });
    if (!s.stopped) {
      s.text += s.decoder->finish();
      const size_t cut = first_stop(s.text, o.stop);
      show(cut == std::string::npos ? s.text.size() : cut);
    }
    if (o.stream_json)
      std::cout << json{{"index", q}, {"stop_reason", s.stopped ? "stop" : llama::stop_reason_name(gen.front().stop)},
                        {"generated_tokens", gen.front().tokens.size()}}.dump() << "\n" << std::flush;
    else
      std::cout << "\n" << std::flush;
  }
}
}  // namespace

void add_generate_command(CLI::App& root) {
  auto o = std::make_shared<GenerateCmdOptions>();
  CLI::App* cmd = root.add_subcommand("generate", "generate text from a prompt (model + optional adapter)");
  cmd->add_option("--model", o->model, "Hugging Face Llama folder")->required();
  cmd->add_option("--adapter", o->adapter, "PEFT adapter folder to apply");
  cmd->add_option("--method", o->method, "build the model for this method instead of the adapter's recorded one");
  cmd->add_option("--prompt", o->prompt, "the prompt text");
  cmd->add_option("--prompts", o->prompts, "a JSONL file: one {\"prompt\": ...} (or JSON string) per line");
  cmd->add_option("--max-new-tokens", o->max_new_tokens, "most tokens generated per prompt")
      ->capture_default_str()->transform(int_in(1));
  cmd->add_option("--temperature", o->temperature, "0 = greedy")->capture_default_str()->check(non_negative_finite());
  cmd->add_option("--top-k", o->top_k, "keep the k most likely tokens (0 = all)")
      ->capture_default_str()->transform(int_in(0));
  cmd->add_option("--top-p", o->top_p, "nucleus sampling mass (1 = all)")
      ->capture_default_str()->check(fraction_above(0, 1));
  cmd->add_option("--seed", o->seed, "sampling seed")->capture_default_str()->transform(seed_bound());
  cmd->add_option("--stop", o->stop, "stop once the text holds this string (cut before it); repeatable");
  cmd->add_option("--slots", o->slots, "--json: sequences decoded at once")
      ->capture_default_str()->transform(int_in(1));
  cmd->add_flag("--json", o->json, "one JSON object per prompt (batched) instead of streaming");
  cmd->add_flag("--stream-json", o->stream_json,
                "stream as JSON lines: {\"index\", \"text\"} per piece as decoded, then {\"index\", "
                "\"stop_reason\", \"generated_tokens\"} per prompt")
      ->excludes("--json");
  cmd->add_flag("--chat", o->chat,
                "render each prompt with the chat template (a --prompts line may also be a chat record: "
                "messages, sharegpt, alpaca) and stop at its end-of-turn token");
  cmd->add_option("--template", o->chat_template,
                  cat("--chat: auto (the model's chat template, else the adapter's training template), ",
                      chat_template_list()))
      ->capture_default_str();
  cmd->add_option("--system", o->system, "--chat: a system prompt opening each conversation");
  add_device_option(*cmd, o->device);
  cmd->callback([o] { run_generate(*o); });
}

}  // namespace loft::app
