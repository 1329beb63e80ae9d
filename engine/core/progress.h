// A progress line with rate and ETA, rewritten in place ("\r") on a stream (stderr), at most a
// few times a second, and ended with a newline by finish().
#pragma once
#include <chrono>
#include <iosfwd>
#include <string>

namespace loft {

class Progress {
 public:
  Progress(std::ostream* out, std::string task, int64_t total, std::string unit);
  void update(int64_t done, const std::string& note = "");
  void finish();
  double elapsed_s() const;

 private:
  std::ostream* out_;
  std::string task_, unit_;
  int64_t total_, done_ = 0;
  std::chrono::steady_clock::time_point start_, last_;
  bool shown_ = false;
};

}  // namespace loft
