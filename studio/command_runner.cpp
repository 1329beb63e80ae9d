#include "studio/command_runner.h"

#include <sys/wait.h>

#include "engine/core/error.h"
#include "engine/io/json_read.h"
#include "studio/child_process.h"
#include "studio/context.h"
#include "studio/http_error.h"

namespace loft::studio {

std::string run_loft(const StudioContext& ctx, const std::vector<std::string>& args, double timeout_s) {
  std::vector<std::string> argv{ctx.loft_binary};
  argv.insert(argv.end(), args.begin(), args.end());
  CapturedRun r;
  try {
    r = run_captured(argv, timeout_s, size_t(64) << 20);
  } catch (const Error& e) {
    throw HttpError(504, e.what());
  }
  if (WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0) return r.out;
  std::string why = last_error_line(r.err);
  if (why.empty()) why = cat("loft ", args.empty() ? "" : args[0], " failed: ", describe_exit(r.status));
  throw HttpError(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 2 ? 400 : 500, why);
}

nlohmann::json run_loft_json(const StudioContext& ctx, const std::vector<std::string>& args, double timeout_s) {
  const std::string out = run_loft(ctx, args, timeout_s);
  std::string error;
  std::optional<nlohmann::json> j = try_parse_json(out, error);
  if (!j) throw HttpError(500, cat("loft ", args.empty() ? "" : args[0], " printed no JSON: ", error));
  return *j;
}

}  // namespace loft::studio
