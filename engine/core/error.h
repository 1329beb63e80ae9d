// Errors that reach the user. A UsageError means the command line or a config value is wrong
// (exit code 2); every other Error is a runtime failure (exit code 1). Messages are one line and
// name the file, tensor, line or option at fault.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

namespace loft {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& msg) : std::runtime_error(msg) {}
};

class UsageError : public Error {
 public:
  explicit UsageError(const std::string& msg) : Error(msg) {}
};

namespace detail {
template <typename... Args>
std::string concat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
}  // namespace detail

// Builds a message from any streamable pieces: throw Error(cat("tensor ", name, " has ", n, " dims")).
template <typename... Args>
std::string cat(const Args&... args) {
  return detail::concat(args...);
}

}  // namespace loft

// Internal invariant / argument check: throws loft::Error naming the condition and the message.
#define LOFT_CHECK(cond, ...)                                                              \
  do {                                                                                     \
    if (!(cond)) throw ::loft::Error(::loft::cat(__VA_ARGS__, " [check failed: " #cond "]")); \
  } while (0)
