// The op table's cases: one row per op of engine/ops/op_list.def (in the spirit of ggml's
// test-backend-ops). A row says how to draw the op's inputs at a size and how to run it on a
// device in a dtype. Two users read the rows:
// - the parity harness (tests/ops) runs every row at every size: CUDA against the CPU reference in
//   F32 and BF16, each backward op against central finite differences of its forward op, and
//   the row's exact cases on every backend; a test fails when an op of the table has no row;
// - `loft bench kernels` (app/bench_kernels.cpp) times every row at one transformer layer's
//   sizes (layer_sizes) and reports the rate its cost gives.
// So a new op's row is all its tests and its benchmark need. No gtest here: the app links it.
#pragma once
#include <functional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "engine/ops/cases/random_inputs.h"
#include "engine/tensor/tensor.h"

namespace loft::cases {

using Tensors = std::vector<Tensor>;
using Sizes = std::vector<int64_t>;

// One transformer layer's sizes (a model shape at batch × seq tokens).
struct LayerSizes {
  int64_t batch = 1, seq = 1;
  int64_t hidden = 0, intermediate = 0, heads = 0, kv_heads = 0, head_dim = 0, vocab = 0;
  int64_t loss_rows = 0;  // rows of logits the loss head takes at once
  int64_t tokens() const { return batch * seq; }
};

// What one call moves at least (each input read once, each output written once), or computes.
struct Cost {
  double bytes = 0, flops = 0;
};

// Hand-picked inputs (special values) and what every backend must write for them in dtype dt,
// bit for bit (a NaN matches any NaN).
struct Exact {
  DType dt;
  Tensors in, out;
};

// How a row's run calls its op: `call(op)`. The tests call op once; the bench warms up and times
// the first op a run passes to call (the op the row is for) and calls any later one once.
using Call = std::function<void(const std::function<void()>& op)>;

struct OpCase {
  explicit OpCase(std::string name) : op(std::move(name)) {}
  std::string op;                 // its name in op_list.def
  std::vector<std::string> dims;  // what each entry of a size is (bench labels)
  std::vector<Sizes> sizes;       // what `make` reads, per case; awkward ones included
  // The inputs at one size: F32 (activations, drawn on the CPU) or I32 CPU tensors.
  std::function<Tensors(const Sizes&, std::mt19937&)> make;
  // Runs the op with the inputs on `device`, F32 inputs first converted to `dt`, through `call`;
  // returns what it wrote (outputs, or the inputs it updates in place, or scalar results as
  // scalar()) as F32 CPU tensors. An empty output is one this size does not produce: not compared.
  std::function<Tensors(const Tensors&, Device, DType, const Call&)> run;
  bool bf16 = true;          // CUDA also takes it in BF16
  double tol_f32 = 1e-5;     // rel_error of each CUDA output against the CPU's
  double tol_bf16 = 1.5e-2;  // the same for BF16 inputs (CPU fed the BF16-rounded values)
  std::vector<double> tol_bf16_of;  // per output, where outputs differ (an F32 output of BF16 inputs)
  // Per output, where it can be near zero while the values it comes from are not (a confident
  // prediction's loss, ~1e-5 nats out of logits ~8): its error is relative to max(|CPU output|,
  // floor), since fp32 cannot resolve it any finer than the inputs' scale allows.
  std::vector<double> scale_floor_of;
  std::vector<Exact> exact;         // special values, checked on every backend
  // Backward rows: the forward op differentiated, the scalar L(inputs) = Σ dy·forward(x) (CPU),
  // and for each output of `run` the index of the input it is ∂L/∂ of (-1: not a gradient).
  std::string backward_of;
  std::function<double(const Tensors&, Device)> loss;
  std::vector<int> grad_of;
  double tol_fd = 5e-3;  // rel_error of the gradient against finite differences
  int64_t fd_max_elements = 20000;  // finite differences only at sizes whose inputs are no larger
  // `loft bench kernels`: the sizes one layer gives the op (a decode step's for the cache ops),
  // and what a call at a size costs with `act` bytes per activation element. A row that is not
  // timed says why in not_timed instead.
  std::function<std::vector<Sizes>(const LayerSizes&)> layer_sizes;
  std::function<Cost(const Sizes&, double act)> cost;
  std::string not_timed;
};

// Every row.
const std::vector<OpCase>& op_cases();
// Every op name of op_list.def.
std::vector<std::string> op_table_names();
// The run with each op called once (the tests' call).
Tensors run_once(const OpCase& c, const Tensors& in, Device device, DType dt);
// The tolerance of output `o` of a CUDA run in `dt` against the CPU's.
double tolerance(const OpCase& c, DType dt, size_t o);
// "op d0=v0 d1=v1 ...": a row at one size, as the bench names it (entries that are 0, flags off,
// left out).
std::string label(const OpCase& c, const Sizes& s);

// `t` (F32 or I32, on the CPU) on `device`; F32 converted to `dt` there.
Tensor on(const Tensor& t, Device device, DType dt);
// `t`'s values in dtype dt on `device`, `offset` elements into a zeroed buffer (offset 1: no row is
// aligned, so kernels take their scalar paths); the view, of t's shape.
Tensor placed(const Tensor& t, Device device, DType dt, int64_t offset);
// An output of `shape` on `device` in `dt`, zero-filled.
Tensor out_like(const Shape& shape, Device device, DType dt);
// Any tensor's values as an F32 CPU tensor of its shape.
Tensor host_f32(const Tensor& t);
// A double as an F32 CPU tensor [2] {hi, lo} (hi = the float nearest, lo = the rest): compared
// with rel_error it keeps the double's precision.
Tensor scalar(double v);
// An output a size does not produce.
Tensor none();
// The ops with an amax output (op_list.def's *_amax): each size twice, without (0) and with (1)
// the amax as its last entry, so the harness compares the amaxes and the bench times both kernels.
std::vector<Sizes> with_amax(const std::vector<Sizes>& sizes);
// The amax slot of a run: a zeroed F32 [1] on `device` when `wanted`, else undefined; amax_arg is
// the op's argument for it (null when undefined) and amax_out what the run returns for it (the
// value as an F32 CPU [1], or none()).
Tensor amax_slot(bool wanted, Device device);
Tensor* amax_arg(Tensor& slot);
Tensor amax_out(const Tensor& slot);
// Σ a·b over the values of two tensors (any device), in double.
double dot(const Tensor& a, const Tensor& b);
// The F32 tensors of `in` rounded to BF16 and back (the values a BF16 run sees).
Tensors round_to_bf16(const Tensors& in);

// Rows by family (op_cases_*.cpp), concatenated by op_cases().
std::vector<OpCase> gemm_cases();
std::vector<OpCase> elementwise_cases();
std::vector<OpCase> norm_cases();
std::vector<OpCase> head_norm_cases();
std::vector<OpCase> math_cases();
std::vector<OpCase> attention_cases();
std::vector<OpCase> optim_cases();

}  // namespace loft::cases
