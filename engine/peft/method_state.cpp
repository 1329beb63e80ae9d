#include "engine/peft/method_state.h"

#include <set>

#include "engine/io/safetensors_reader.h"
#include "engine/io/safetensors_writer.h"

namespace loft {

namespace {

std::set<std::string> keys_of(const std::map<std::string, Tensor>& m) {
  std::set<std::string> out;
  for (const auto& [k, v] : m) out.insert(k);
  return out;
}

std::string join(const std::set<std::string>& s) {
  std::string out;
  for (const auto& k : s) out += (out.empty() ? "" : ", ") + k;
  return out.empty() ? "none" : out;
}

}  // namespace

std::map<std::string, Tensor> collect_method_state(const NamedLinears& linears) {
  std::map<std::string, Tensor> out;
  for (const auto& [module, lin] : linears)
    for (auto& [key, t] : lin->method_state()) {
      LOFT_CHECK(key.find('.') == std::string::npos && !key.empty(), module, ": method state key '",
                 key, "' must be non-empty and hold no '.'");
      out.emplace(module + "." + key, t.to(Device::cpu()));
    }
  return out;
}

std::map<std::string, std::map<std::string, Tensor>> split_method_state(
    const std::map<std::string, Tensor>& state, const std::string& source) {
  std::map<std::string, std::map<std::string, Tensor>> out;
  for (const auto& [name, t] : state) {
    const size_t dot = name.rfind('.');
    if (dot == std::string::npos || dot == 0 || dot + 1 == name.size())
      throw Error(cat(source, ": method state tensor '", name, "' is not named <module>.<key>"));
    out[name.substr(0, dot)].emplace(name.substr(dot + 1), t);
  }
  return out;
}

void restore_method_state(const NamedLinears& linears, const std::map<std::string, Tensor>& state,
                          const std::string& source) {
  auto by_module = split_method_state(state, source);
  for (const auto& [module, lin] : linears) {
    auto it = by_module.find(module);
    if (it == by_module.end()) {
      const auto kept = lin->method_state();
      if (!kept.empty())
        throw Error(cat(source, ": no method state for ", module, " (its method keeps ",
                        join(keys_of(kept)), ")"));
      continue;
    }
    try {
      lin->load_method_state(it->second);
    } catch (const Error& e) {
      throw Error(cat(source, ": ", module, ": ", e.what()));
    }
    const std::set<std::string> given = keys_of(it->second), kept = keys_of(lin->method_state());
    if (given != kept)
      throw Error(cat(source, ": method state for ", module, " has ", join(given),
                      ", but this run's method keeps ", join(kept)));
    by_module.erase(it);
  }
  if (!by_module.empty())
    throw Error(cat(source, ": method state for ", by_module.begin()->first,
                    ", which is not a projection of this model"));
}

void write_method_state(const std::filesystem::path& file,
                        const std::map<std::string, Tensor>& state) {
  write_safetensors(file, state, {{"format", "pt"}, {"content", "loft method state"}});
}

std::map<std::string, Tensor> read_method_state(const std::filesystem::path& file) {
  const SafetensorsReader r = SafetensorsReader::open(file);
  std::map<std::string, Tensor> out;
  // Copied out of the read-only mapping: a method may keep and update what it is given.
  for (const std::string& name : r.names()) out.emplace(name, r.tensor(name).clone());
  return out;
}

}  // namespace loft
