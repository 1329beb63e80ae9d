// The one mapping from any exception to what the user sees: a single line (control characters
// folded to spaces, at most ~1000 characters) and the exit code: 2 for UsageError, 1 for
// everything else, including std::bad_alloc ("out of memory"), filesystem errors and library
// exceptions (nlohmann::json, CLI11 runtime errors).
#pragma once
#include <string>

#include "engine/core/error.h"

namespace loft {

struct FailureReport {
  std::string message;
  int exit_code = 1;
};

// Call inside a catch block (it rethrows std::current_exception() to classify it).
FailureReport report_current_exception();

}  // namespace loft
