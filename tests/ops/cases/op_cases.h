// The parity harness's table: one row per op of engine/ops/op_list.def (in the spirit of ggml's
// test-backend-ops). A row says how to draw the op's inputs at a size and how to run it on a
// device in a dtype; the tests then run every row at every size: CUDA against the CPU reference
// in F32 and BF16 (tests/ops/gpu), and each backward op against central finite differences of its
// forward op (tests/ops, CPU; tests/ops/gpu, CUDA). A row for a new op is all a new op's tests
// need; a test fails when an op of the table has no row.
#pragma once
#include <functional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "engine/tensor/tensor.h"

namespace loft::test::parity {

using Tensors = std::vector<Tensor>;
using Sizes = std::vector<int64_t>;

struct OpCase {
  explicit OpCase(std::string name) : op(std::move(name)) {}
  std::string op;           // its name in op_list.def
  std::vector<Sizes> sizes;  // what `make` reads, per case; awkward ones included
  // The inputs at one size: F32 (activations, drawn on the CPU) or I32 CPU tensors.
  std::function<Tensors(const Sizes&, std::mt19937&)> make;
  // Runs the op with the inputs on `device`, F32 inputs first converted to `dt`; returns what it
  // wrote (outputs, or the inputs it updates in place, or scalar results as [1]) as F32 CPU
  // tensors.
  std::function<Tensors(const Tensors&, Device, DType)> run;
  bool bf16 = true;          // CUDA also takes it in BF16
  double tol_f32 = 1e-5;     // rel_error of each CUDA output against the CPU's
  double tol_bf16 = 1.5e-2;  // the same for BF16 inputs (CPU fed the BF16-rounded values)
  // Backward rows: the forward op differentiated, the scalar L(inputs) = Σ dy·forward(x) (CPU),
  // and for each output of `run` the index of the input it is ∂L/∂ of (-1: not a gradient).
  std::string backward_of;
  std::function<double(const Tensors&, Device)> loss;
  std::vector<int> grad_of;
  double tol_fd = 5e-3;  // rel_error of the gradient against finite differences
  int64_t fd_max_elements = 20000;  // finite differences only at sizes whose inputs are no larger
};

// Every row.
const std::vector<OpCase>& op_cases();
// Every op name of op_list.def.
std::vector<std::string> op_table_names();

// `t` (F32 or I32, on the CPU) on `device`; F32 converted to `dt` there.
Tensor on(const Tensor& t, Device device, DType dt);
// An output of `shape` on `device` in `dt`, zero-filled.
Tensor out_like(const Shape& shape, Device device, DType dt);
// Any tensor's values as an F32 CPU tensor of its shape.
Tensor host_f32(const Tensor& t);
// A double as a [1] F32 CPU tensor.
Tensor scalar(double v);
// Σ a·b over the values of two tensors (any device), in double.
double dot(const Tensor& a, const Tensor& b);
// The F32 tensors of `in` rounded to BF16 and back (the values a BF16 run sees).
Tensors round_to_bf16(const Tensors& in);

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

// Rows by family (op_cases_*.cpp), concatenated by op_cases().
std::vector<OpCase> math_cases();
std::vector<OpCase> attention_cases();
std::vector<OpCase> optim_cases();

}  // namespace loft::test::parity
