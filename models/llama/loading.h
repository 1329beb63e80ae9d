// Loading a Hugging Face Llama folder into a trainable/evaluable model, and moving LoRA adapters
// between a model and PEFT's files.
#pragma once
#include <filesystem>
#include <iosfwd>
#include <memory>

#include "engine/peft/method.h"
#include "engine/peft/peft_adapter.h"
#include "models/llama/model.h"

namespace loft::llama {

// config.json + safetensors (single or sharded) -> a model on `device` in its compute dtype (F32
// on the CPU, BF16 on CUDA), every projection built by `factory`. An FP8 checkpoint's projections
// reach the factory as stored (codes + scales), one at a time; the rest is decoded on load.
// `shard`: --shard-backbone's gather, the backbone sharded layer by layer as it is built.
std::unique_ptr<LlamaModel> load_model(const std::filesystem::path& dir, Device device,
                                       const LinearFactory& factory, ShardGather* shard = nullptr);

// The options that rebuild the model an adapter was trained on: its loft record (method, rank,
// alpha, targets, the method's own options), or, for an adapter PEFT made (no record), LoRA with
// its r / lora_alpha / target_modules.
MethodOptions method_options_for(const PeftAdapter& adapter);
// method_options_for, unless `requested` (an explicit --method; empty: not given) names another
// method. That is allowed — e.g. a HALO- or FALQON-trained adapter evaluated on a bf16 backbone as
// a plain PEFT merge — and gives `requested` with the adapter's rank/alpha/targets (and the recorded
// method's own options). Only the recorded method can use the adapter's method state, so it is dropped from
// `adapter`; one "note:" line to `note` says what was overridden. `from` names the adapter folder.
MethodOptions method_options_for(PeftAdapter& adapter, const std::string& requested,
                                 const std::filesystem::path& from, std::ostream& note);

// Loads an adapter into a model built for it (method_options_for). The rule, per projection:
//  - one that imports a PEFT pair (AdaptedLinear::imports_peft_pair: the LoRA family) takes the
//    adapter's lora_A/lora_B, which must be present;
//  - any other trainable projection (e.g. FALQON's) is rebuilt from its method state alone
//    (loft_state.safetensors), which must be present; its lora_A/B, the PEFT export of the same
//    model, are not read;
//  - then every projection whose method keeps state (AdaptedLinear::method_state()) is restored
//    from it, after A/B, so state wins (engine/peft/method_state.h: each stateful projection must
//    be restored, with exactly the keys its method keeps);
//  - a frozen projection (no params) must have no A/B, and state only when its store keeps some
//    (FrozenWeight::method_state).
// Every error is one line naming `from` and the module: a module the model lacks, a projection
// the adapter lacks, mis-shaped tensors, missing or extra state keys.
void apply_adapter(LlamaModel& model, const PeftAdapter& adapter, const std::filesystem::path& from);
// The model's adapter as PEFT files: each projection's peft_pair() (F32, CPU), `opt` as the loft
// record, and the projections' method state.
PeftAdapter extract_adapter(LlamaModel& model, const MethodOptions& opt,
                            const std::string& base_model);

}  // namespace loft::llama
