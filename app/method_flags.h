// Every registered method's own command-line options (engine/peft/method_spec.h), added to a
// command once per flag name and applied to the options of the method a run builds.
#pragma once
#include <map>
#include <string>

#include "app/cli_fwd.h"
#include "engine/peft/method.h"

namespace loft::app {

// Flag name -> the value given on the command line (only flags that were given).
using MethodFlagValues = std::map<std::string, std::string>;

// How the command reads them: finetune's defaults yield to an --init-adapter's record.
enum class MethodFlagUse { finetune, bench };

void add_method_flags(CLI::App& cmd, MethodFlagValues& given, MethodFlagUse use);

// Applies each given value to `m`: through the method's own flag, or, for a flag it does not
// take, into the methods that do (validate_method_options then refuses what must not be ignored).
void apply_method_flags(const MethodFlagValues& given, MethodOptions& m);

// "--method NAME[:VARIANT]..." as bench reads it: the name and the variants applied to `m`.
// UsageError for a variant the method does not have.
void apply_method_variants(const std::string& item, MethodOptions& m);

}  // namespace loft::app
