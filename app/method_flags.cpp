#include "app/method_flags.h"

#include <CLI/CLI.hpp>
#include <sstream>

#include "app/option_checks.h"
#include "engine/core/error.h"
#include "engine/peft/method_spec.h"

namespace loft::app {

namespace {

const MethodFlag* flag_of(const MethodSpec& spec, const std::string& name, std::vector<MethodFlag>& keep) {
  keep = spec.flags();
  for (const MethodFlag& f : keep)
    if (f.name == name) return &f;
  return nullptr;
}

}  // namespace

void add_method_flags(CLI::App& cmd, MethodFlagValues& given, MethodFlagUse use) {
  std::map<std::string, std::string> helps;  // a flag several methods take lists each one's help
  std::vector<MethodFlag> order;
  for (const MethodSpec* spec : method_specs())
    for (const MethodFlag& f : spec->flags()) {
      const std::string help =
          use == MethodFlagUse::finetune
              ? cat(f.help, "; default ", f.default_text, ", or the --init-adapter's")
              : cat(f.help, "; default ", f.default_text);
      if (!helps.count(f.name)) order.push_back(f);
      std::string& h = helps[f.name];
      h += (h.empty() ? "" : " | ") + help;
    }
  for (const MethodFlag& f : order) {
    const std::string name = f.name;
    if (f.is_switch) {
      cmd.add_flag_callback(name, [&given, name] { given[name] = "true"; }, helps[name]);
      continue;
    }
    CLI::Option* o = cmd.add_option_function<std::string>(
        name, [&given, name](const std::string& v) { given[name] = v; }, helps[name]);
    if (f.int_range) o->type_name("INT")->transform(int_in(f.int_range->first, f.int_range->second));
  }
}

void apply_method_flags(const MethodFlagValues& given, MethodOptions& m) {
  const MethodSpec& chosen = method_spec(m.method);
  for (const auto& [name, value] : given) {
    std::vector<MethodFlag> keep;
    if (const MethodFlag* f = flag_of(chosen, name, keep)) {
      f->set(m, value);
      continue;
    }
    // Another method's flag: kept in that method's options, where it is ignored unless it must
    // not be. A value no taker can read is an error.
    std::optional<UsageError> unreadable;
    bool read = false;
    for (const MethodSpec* spec : method_specs()) {
      const MethodFlag* f = flag_of(*spec, name, keep);
      if (!f) continue;
      try {
        f->set(m, value);
        read = true;
      } catch (const UsageError& e) {
        if (!unreadable) unreadable = e;
      }
    }
    if (!read && unreadable) throw *unreadable;
  }
}

void apply_method_variants(const std::string& item, MethodOptions& m) {
  std::stringstream ss(item);
  std::string name, v;
  std::getline(ss, name, ':');
  m.method = name;
  const MethodSpec& spec = method_spec(name);
  while (std::getline(ss, v, ':')) {
    if (spec.apply_variant(m, v)) continue;
    std::string known;
    for (const MethodSpec* s : method_specs())
      if (!s->variants_help().empty())
        known += (known.empty() ? "" : "; ") + s->name() + ": " + s->variants_help();
    throw UsageError(cat("--method ", item, ": '", v, "' is not a variant of ", name, " (", known, ")"));
  }
}

}  // namespace loft::app
