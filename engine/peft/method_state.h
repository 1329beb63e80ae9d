// Method state on disk: the tensors AdaptedLinear::method_state() returns (beyond the trainable
// params), named "<module>.<key>" ("model.layers.0.self_attn.q_proj.falqon_rows") in
// loft_state.safetensors, next to a PEFT adapter's files and in trainer checkpoints. Keys hold no
// '.', so a name splits at its last '.'.
#pragma once
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "engine/peft/adapted_linear.h"

namespace loft {

inline constexpr const char* kMethodStateFile = "loft_state.safetensors";

using NamedLinears = std::vector<std::pair<std::string, AdaptedLinear*>>;

// Every projection's method_state() under "<module>.<key>" names (empty when no method keeps any).
std::map<std::string, Tensor> collect_method_state(const NamedLinears& linears);
// "<module>.<key>" -> module -> key -> tensor. Throws Error naming `source` and the tensor for a
// name without a '.'.
std::map<std::string, std::map<std::string, Tensor>> split_method_state(
    const std::map<std::string, Tensor>& state, const std::string& source);
// Restores state named as collect_method_state names it. Every module must be one of `linears`,
// and each restored projection must then report exactly the keys it was given (a method that keeps
// no state ignores load_method_state, so state handed to it is an error, not silently dropped);
// a projection that reports state `state` lacks is an error too. Errors name `source`, the module
// and the key.
void restore_method_state(const NamedLinears& linears, const std::map<std::string, Tensor>& state,
                          const std::string& source);

// Atomic write (engine/io) of `state`; read returns host tensors as stored. Errors name the file.
void write_method_state(const std::filesystem::path& file,
                        const std::map<std::string, Tensor>& state);
std::map<std::string, Tensor> read_method_state(const std::filesystem::path& file);

}  // namespace loft
