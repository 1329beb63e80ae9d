#include "engine/parallel/launch_env.h"

#include <charconv>
#include <cstdlib>
#include <string_view>

#include "engine/core/error.h"

namespace loft::parallel {

namespace {

const char* const kHint = " (set by torchrun for each process)";

std::string required(const std::function<const char*(const char*)>& getenv, const char* name) {
  const char* v = getenv(name);
  if (v == nullptr)
    throw UsageError(
        cat(name, " is not set, but WORLD_SIZE is: a multi-process launch needs ", name, kHint));
  if (*v == '\0') throw UsageError(cat(name, " is set but empty", kHint));
  return v;
}

// The whole value as an integer in [lo, hi]; `what` says what the range means.
int integer(const std::function<const char*(const char*)>& getenv, const char* name, long lo,
            long hi, std::string_view what) {
  const std::string s = required(getenv, name);
  long v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec == std::errc::invalid_argument || end != s.data() + s.size())
    throw UsageError(cat(name, "='", s, "' is not an integer", kHint));
  if (ec != std::errc() || v < lo || v > hi)  // too many digits for a long, or outside [lo, hi]
    throw UsageError(cat(name, "=", s, " is out of range: ", what));
  return int(v);
}

}  // namespace

std::optional<LaunchEnv> launch_env_from(const std::function<const char*(const char*)>& getenv) {
  const char* ws = getenv("WORLD_SIZE");
  if (ws == nullptr) return std::nullopt;
  LaunchEnv e;
  e.world_size = integer(getenv, "WORLD_SIZE", 1, 1 << 20, "must be at least 1");
  e.rank = integer(getenv, "RANK", 0, 1 << 20, "must be at least 0");
  if (e.rank >= e.world_size)
    throw UsageError(
        cat("RANK=", e.rank, " is out of range: must be below WORLD_SIZE=", e.world_size));
  e.local_rank = integer(getenv, "LOCAL_RANK", 0, 1 << 20, "must be at least 0");
  if (e.local_rank > e.rank)  // ranks are numbered node by node, so a local rank never exceeds it
    throw UsageError(
        cat("LOCAL_RANK=", e.local_rank, " is out of range: must not exceed RANK=", e.rank));
  // Optional (torchrun sets it; a hand-made launch may not): the processes sharing this host.
  if (getenv("LOCAL_WORLD_SIZE") != nullptr)
    e.local_world_size = integer(getenv, "LOCAL_WORLD_SIZE", e.local_rank + 1, 1 << 20,
                                 cat("must exceed LOCAL_RANK=", e.local_rank));
  e.master_addr = required(getenv, "MASTER_ADDR");
  e.port = integer(getenv, "MASTER_PORT", 1, 65535, "must be a TCP port from 1 to 65535");
  return e;
}

std::optional<LaunchEnv> launch_env() {
  return launch_env_from([](const char* name) -> const char* { return std::getenv(name); });
}

}  // namespace loft::parallel
