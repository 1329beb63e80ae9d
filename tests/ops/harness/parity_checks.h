// The parity harness's checks of the op table's cases (engine/ops/cases/op_cases.h), shared by
// its CPU test (tests/ops) and its CUDA test (tests/ops/gpu).
#pragma once
#include "engine/ops/cases/op_cases.h"
#include "tests/common/test_util.h"

namespace loft::test::parity {

using namespace cases;

// A backward row's gradient `grad` (of input `input`, any device) against central differences of
// c.loss over a spread of that input's entries: rel_error over the sampled entries. fp32 noise
// over 2·eps keeps it near 1e-4; a wrong formula gives O(1).
double fd_error(const OpCase& c, const Tensors& in, int input, const Tensor& grad, float eps = 1e-2f);
// Every backward row at every size fd_size admits, its gradients computed on `device` (F32) from
// inputs drawn with seeds seed, seed + 1, ... per size, each against fd_error within the row's
// tol_fd (a gtest failure naming op, size and input otherwise). Returns how many were checked.
int expect_backward_matches_differences(Device device, uint32_t seed);
// Whether finite differences are run at this size: every input of at most c.fd_max_elements
// (larger ones drown the gradient of one entry in the loss's fp32 rounding).
bool fd_size(const OpCase& c, const Tensors& in);
// Output `o` of a CUDA run against the CPU's: rel_error, but relative to at least the row's
// scale_floor_of[o] (INFINITY for a non-finite value or a size mismatch).
double parity_error(const OpCase& c, size_t o, const Tensor& got, const Tensor& want);
// Every row's exact cases run on `device` in their dtype,
// each output bit for bit as the case says (a NaN matching any NaN). Returns how many were checked.
int expect_exact_cases(Device device);

}  // namespace loft::test::parity
