// Two training runs that may differ in their last bits (GPU kernels whose atomics add in another
// order when another kernel shares the GPU): each step's loss within 1e-5 of `want`'s, each param
// within 1% of its norm in `want`. A gradient that lost a micro-batch's share (a sum sent before
// the backward finished) moves params by tens of percent.
#pragma once
#include <string>
#include <vector>

namespace loft::test {

// Relative L2 distance of a from b (infinite when their sizes differ).
double rel_l2(const std::vector<float>& a, const std::vector<float>& b);

void expect_close_runs(const std::vector<double>& got_losses,
                       const std::vector<std::vector<float>>& got_params,
                       const std::vector<double>& want_losses,
                       const std::vector<std::vector<float>>& want_params, const std::string& what);

}  // namespace loft::test
