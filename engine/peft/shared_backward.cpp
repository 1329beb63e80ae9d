#include "engine/peft/shared_backward.h"

#include <cstdio>
#include <cstdlib>
#include <exception>

#include "engine/core/find_or_make.h"

namespace loft {

SharedBackward::~SharedBackward() {
  if (queued_.empty() || std::uncaught_exceptions() > 0) return;
  std::fprintf(stderr, "loft: internal error: SharedBackward destroyed with %zu unfinished group(s) "
               "(first: %s): a gradient would be lost\n", queued_.size(), queued_.front().first.c_str());
  std::abort();
}

Tensor& SharedBackward::scratch(const std::string& key, const std::function<Tensor()>& make) {
  return find_or_make(scratch_, key, make);
}

void SharedBackward::at_finish(const std::string& key, std::function<void(Tensor& dx)> f) {
  for (const auto& q : queued_)
    if (q.first == key) return;
  queued_.emplace_back(key, std::move(f));
}

void SharedBackward::finish(Tensor& dx) {
  auto queued = std::move(queued_);
  queued_.clear();
  for (auto& [key, f] : queued) f(dx);
}

}  // namespace loft
