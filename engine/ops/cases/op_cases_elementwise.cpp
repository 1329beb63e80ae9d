// Rows of the elementwise ops: convert (every F32/BF16/F16 pair, bit for bit, special values
// exact), axpy (also on views too misaligned to vectorise), add_bias, scale and fill_random, at
// sizes that leave a scalar tail.
#include <cstring>
#include <limits>

#include "engine/ops/cases/op_cases.h"
#include "engine/ops/ops.h"

namespace loft::cases {
namespace {

const std::vector<Sizes> kSizes = {{1}, {7}, {172}, {4099}, {(1 << 16) + 3}};

// A row of one tensor of n elements, timed at a layer's [tokens, hidden] and [tokens, intermediate].
OpCase flat_case(const char* op) {
  OpCase c{op};
  c.dims = {"n"};
  c.sizes = kSizes;
  c.layer_sizes = [](const LayerSizes& l) {
    return std::vector<Sizes>{{l.tokens() * l.hidden}, {l.tokens() * l.intermediate}};
  };
  return c;
}

// convert's source and destination dtypes, F32 → BF16 first (the conversion the bench times).
constexpr DType kConvertTypes[] = {DType::BF16, DType::F32, DType::F16};

// Every pair: x (F32) converted to each source dtype, that to each destination dtype.
Tensors convert_run(const Tensors& in, Device d, DType, const Call& call) {
  const Tensor x = in[0].to(d);
  Tensors out;
  for (DType s : kConvertTypes) {
    Tensor src = Tensor::empty(x.shape(), s, d);
    call([&] { ops::convert(x, src); });
    for (DType t : kConvertTypes) {
      Tensor dst = Tensor::empty(x.shape(), t, d);
      call([&] { ops::convert(src, dst); });
      out.push_back(host_f32(dst));
    }
  }
  return out;
}

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// The value v as dtype t holds it.
float as(DType t, float v) {
  return t == DType::F32 ? v : t == DType::BF16 ? bf16_to_f32(f32_to_bf16(v)) : f16_to_f32(f32_to_f16(v));
}

// Rounding ties of bf16 and f16 (to even), infinities, NaN, −0, an f16 subnormal and overflow,
// fp32 subnormals, the largest finite floats.
Exact convert_specials() {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> v = {from_bits(0x3f808000u), from_bits(0x3f818000u), 1.0f + 1.0f / 2048,
                                1.0f + 3.0f / 2048,     -(1.0f + 3.0f / 2048),  3e-6f,
                                7e4f,                   0.0f,                   -0.0f,
                                inf,                    -inf,                   std::numeric_limits<float>::quiet_NaN(),
                                1e-40f,                 -3e-39f,                std::numeric_limits<float>::max(),
                                -65504.0f,              65520.0f,               from_bits(0x7f7f8000u)};
  Exact e{DType::F32, {Tensor::from_vector(v, {int64_t(v.size())})}, {}};
  for (DType s : kConvertTypes)
    for (DType t : kConvertTypes) {
      std::vector<float> want;
      for (float x : v) want.push_back(as(t, as(s, x)));
      e.out.push_back(Tensor::from_vector(want, {int64_t(v.size())}));
    }
  return e;
}

OpCase convert_case() {
  OpCase c = flat_case("convert");
  c.make = [](const Sizes& s, std::mt19937& rng) { return Tensors{random_tensor({s[0]}, rng, -1000, 1000)}; };
  c.run = convert_run;
  c.bf16 = false;  // the row converts between every pair itself
  c.tol_f32 = 0;
  c.exact = {convert_specials()};
  c.cost = [](const Sizes& s, double) { return Cost{6.0 * double(s[0]), 0}; };  // F32 in, BF16 out
  return c;
}

// y (`y_off` elements into its buffer) += alpha · x (`x_off` into its own); returns y's whole
// buffer, so elements before the view must be left alone.
OpCase axpy_case() {
  OpCase c{"axpy"};
  c.dims = {"n", "x_off", "y_off"};
  c.sizes = {{1, 0, 0}, {7, 0, 0}, {172, 0, 0}, {4099, 0, 0}, {(1 << 16) + 3, 0, 0}, {1000, 1, 2}};
  c.make = [](const Sizes& s, std::mt19937& rng) {  // x, y (their buffers), the offsets as I32 [2]
    return Tensors{random_tensor({s[0] + s[1]}, rng), random_tensor({s[0] + s[2]}, rng),
                   Tensor::from_vector(std::vector<int32_t>{int32_t(s[1]), int32_t(s[2])}, {2})};
  };
  c.run = [](const Tensors& in, Device d, DType dt, const Call& call) {
    const int32_t* off = in[2].ptr<int32_t>();
    const int64_t n = in[0].numel() - off[0];
    const Tensor xb = on(in[0], d, dt), yb = on(in[1], d, dt);
    const Tensor x = xb.slice(off[0], n);
    Tensor y = yb.slice(off[1], n);
    call([&] { ops::axpy(-0.75f, x, y); });
    return Tensors{host_f32(yb)};
  };
  c.tol_bf16 = 1e-2;
  c.layer_sizes = [](const LayerSizes& l) {
    return std::vector<Sizes>{{l.tokens() * l.hidden, 0, 0}, {l.tokens() * l.intermediate, 0, 0}};
  };
  c.cost = [](const Sizes& s, double act) { return Cost{3.0 * double(s[0]) * act, 0}; };
  return c;
}

OpCase scale_case() {
  OpCase c = flat_case("scale");
  c.make = [](const Sizes& s, std::mt19937& rng) { return Tensors{random_tensor({s[0]}, rng, -100, 100)}; };
  c.run = [](const Tensors& in, Device d, DType dt, const Call& call) {
    Tensor y = on(in[0], d, dt);
    call([&] { ops::scale(y, -1.25f); });
    return Tensors{host_f32(y)};
  };
  c.tol_bf16 = 1e-2;
  c.cost = [](const Sizes& s, double act) { return Cost{2.0 * double(s[0]) * act, 0}; };
  return c;
}

// y [rows, d] += bias [d]; the bias also in F32 under BF16 activations (as a checkpoint's F32
// bias would come), with d odd and rows past a GPU block.
OpCase add_bias_case() {
  OpCase c{"add_bias"};
  c.dims = {"rows", "d", "f32_bias"};
  c.sizes = {{1, 1, 0}, {3, 7, 0}, {17, 64, 1}, {5, 4099, 0}, {300, 129, 1}};
  c.make = [](const Sizes& s, std::mt19937& rng) {
    return Tensors{random_tensor({s[0], s[1]}, rng), random_tensor({s[1]}, rng),
                   Tensor::from_vector(std::vector<int32_t>{int32_t(s[2])}, {1})};
  };
  c.run = [](const Tensors& in, Device d, DType dt, const Call& call) {
    Tensor y = on(in[0], d, dt);
    Tensor bias = on(in[1], d, dt);
    if (in[2].ptr<int32_t>()[0] != 0 && dt != DType::F32) {  // the rounded values, held in F32
      Tensor f = out_like(bias.shape(), d, DType::F32);
      ops::convert(bias, f);
      bias = f;
    }
    call([&] { ops::add_bias(y, bias); });
    return Tensors{host_f32(y)};
  };
  c.tol_bf16 = 1e-2;
  // The q, k and v biases of one layer: [tokens, q_dim] and [tokens, kv_dim].
  c.layer_sizes = [](const LayerSizes& l) {
    return std::vector<Sizes>{{l.tokens(), l.heads * l.head_dim, 0}, {l.tokens(), l.kv_heads * l.head_dim, 0}};
  };
  c.cost = [](const Sizes& s, double act) { return Cost{(2.0 * double(s[0]) + 1.0) * double(s[1]) * act, 0}; };
  return c;
}

OpCase fill_random_case() {
  OpCase c = flat_case("fill_random");
  c.make = [](const Sizes& s, std::mt19937&) { return Tensors{Tensor::zeros({s[0]}, DType::F32)}; };
  c.run = [](const Tensors& in, Device d, DType dt, const Call& call) {
    Tensor y = out_like(in[0].shape(), d, dt);
    call([&] { ops::fill_random(y, 1234, 0.5f); });
    return Tensors{host_f32(y)};
  };
  c.tol_f32 = 0;  // the same fp32 values on every backend
  c.cost = [](const Sizes& s, double act) { return Cost{double(s[0]) * act, 0}; };
  return c;
}

}  // namespace

std::vector<OpCase> elementwise_cases() {
  return {convert_case(), axpy_case(), add_bias_case(), scale_case(), fill_random_case()};
}

}  // namespace loft::cases
