#include "engine/core/failure.h"

#include <filesystem>
#include <new>
#include <nlohmann/json.hpp>

namespace loft {

namespace {

// One line of at most kMax characters: control characters become spaces.
std::string one_line(std::string_view s) {
  constexpr size_t kMax = 1000;
  std::string out;
  out.reserve(std::min(s.size(), kMax + 3));
  for (char c : s.substr(0, kMax)) out += (static_cast<unsigned char>(c) < 0x20) ? ' ' : c;
  if (s.size() > kMax) out += "...";
  return out;
}

}  // namespace

FailureReport report_current_exception() {
  try {
    throw;
  } catch (const UsageError& e) {
    return {one_line(e.what()), 2};
  } catch (const Error& e) {
    return {one_line(e.what()), 1};
  } catch (const std::bad_alloc&) {
    return {"out of memory (an allocation failed); use a smaller --batch, --seq or model", 1};
  } catch (const std::filesystem::filesystem_error& e) {
    const std::string path = e.path1().empty() ? "" : e.path1().string() + ": ";
    return {one_line(cat(path, e.code().message(), " (", e.what(), ")")), 1};
  } catch (const nlohmann::json::exception& e) {
    return {one_line(cat("malformed JSON value: ", e.what())), 1};
  } catch (const std::exception& e) {
    return {one_line(cat("internal error: ", e.what())), 1};
  } catch (...) {
    return {"internal error: unknown exception", 1};
  }
}

}  // namespace loft
