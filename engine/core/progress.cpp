#include "engine/core/progress.h"

#include <cstdio>
#include <ostream>

namespace loft {

Progress::Progress(std::ostream* out, std::string task, int64_t total, std::string unit)
    : out_(out), task_(std::move(task)), unit_(std::move(unit)), total_(total),
      start_(std::chrono::steady_clock::now()), last_(start_) {}

double Progress::elapsed_s() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void Progress::update(int64_t done, const std::string& note) {
  done_ = done;
  if (!out_) return;
  const auto now = std::chrono::steady_clock::now();
  if (shown_ && done < total_ && now - last_ < std::chrono::milliseconds(250)) return;
  last_ = now;
  shown_ = true;
  const double t = elapsed_s();
  const double rate = t > 0 ? double(done) / t : 0;
  const double eta = rate > 0 ? double(total_ - done) / rate : 0;
  char buf[160];
  std::snprintf(buf, sizeof buf, "%s: %lld/%lld %s, %.1f/s, elapsed %.0fs, ETA %.0fs", task_.c_str(),
                (long long)done, (long long)total_, unit_.c_str(), rate, t, eta);
  *out_ << "\r" << buf << (note.empty() ? "" : " (" + note + ")") << "   " << std::flush;
}

void Progress::finish() {
  if (out_ && shown_) *out_ << "\n" << std::flush;
}

}  // namespace loft
