#include "engine/peft/low_rank.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "engine/ops/ops.h"

namespace loft {

void symmetric_eigen(std::vector<double> a, int n, std::vector<double>& values,
                     std::vector<double>& vectors) {
  LOFT_CHECK(n >= 0 && a.size() == size_t(n) * size_t(n), "symmetric_eigen: ", a.size(),
             " entries for a ", n, "x", n, " matrix");
  auto at = [&](std::vector<double>& m, int r, int c) -> double& { return m[size_t(r) * n + c]; };
  for (int r = 0; r < n; ++r)
    for (int c = r + 1; c < n; ++c) at(a, r, c) = at(a, c, r) = 0.5 * (at(a, r, c) + at(a, c, r));
  std::vector<double> v(size_t(n) * n, 0.0);
  for (int i = 0; i < n; ++i) at(v, i, i) = 1.0;
  double total = 0;
  for (double x : a) total += x * x;
  // Cyclic Jacobi (Numerical Recipes 11.1): each rotation zeroes one off-diagonal pair; sweeps
  // converge quadratically, so 100 is never reached for the l <= a few hundred FALQON uses.
  for (int sweep = 0; sweep < 100; ++sweep) {
    double off = 0;
    for (int p = 0; p < n; ++p)
      for (int q = p + 1; q < n; ++q) off += at(a, p, q) * at(a, p, q);
    if (off <= 1e-30 * total || off == 0.0) break;
    for (int p = 0; p < n; ++p)
      for (int q = p + 1; q < n; ++q) {
        const double apq = at(a, p, q);
        if (apq == 0.0) continue;
        const double theta = (at(a, q, q) - at(a, p, p)) / (2.0 * apq);
        const double t = (theta >= 0 ? 1.0 : -1.0) / (std::fabs(theta) + std::sqrt(theta * theta + 1.0));
        const double c = 1.0 / std::sqrt(t * t + 1.0), s = t * c;
        at(a, p, p) -= t * apq;
        at(a, q, q) += t * apq;
        at(a, p, q) = at(a, q, p) = 0.0;
        for (int r = 0; r < n; ++r) {
          if (r != p && r != q) {
            const double arp = at(a, r, p), arq = at(a, r, q);
            at(a, r, p) = at(a, p, r) = c * arp - s * arq;
            at(a, r, q) = at(a, q, r) = s * arp + c * arq;
          }
          const double vrp = at(v, r, p), vrq = at(v, r, q);
          at(v, r, p) = c * vrp - s * vrq;
          at(v, r, q) = s * vrp + c * vrq;
        }
      }
  }
  std::vector<int> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int x, int y) { return at(a, x, x) > at(a, y, y); });
  values.assign(size_t(n), 0.0);
  vectors.assign(size_t(n) * n, 0.0);
  for (int j = 0; j < n; ++j) {
    values[j] = at(a, order[j], order[j]);
    for (int r = 0; r < n; ++r) at(vectors, r, j) = at(v, r, order[j]);
  }
}

namespace {

// G = yᵀ·y (of_rows: y·yᵀ) [l×l], an F32 GEMM on y's device, as host doubles.
std::vector<double> gram(const Tensor& y, bool of_rows = false) {
  const int64_t l = y.size(of_rows ? 0 : 1);
  Tensor g = Tensor::empty({l, l}, DType::F32, y.device());
  ops::gemm(y, y, g, {.trans_a = !of_rows, .trans_b = of_rows});
  const std::vector<float> h = g.to_float_vector();
  return {h.begin(), h.end()};
}

// y·t for a host [l×c] matrix t: one GEMM on y's device.
Tensor times_host(const Tensor& y, const std::vector<double>& t, int64_t l, int64_t c) {
  std::vector<float> tf(t.begin(), t.end());
  const Tensor td = Tensor::from_vector(tf, {l, c}, y.device());
  Tensor out = Tensor::empty({y.size(0), c}, DType::F32, y.device());
  ops::gemm(y, td, out);
  return out;
}

// Orthonormal columns spanning y's (numerically nonzero) column space: y·V·Λ^(-1/2) from the
// Gram matrix's eigenpairs, twice (as CholeskyQR2: the second pass repairs the fp32 Gram's loss
// of orthogonality). Directions with λ <= 1e-7·λmax are dropped as zero columns.
Tensor orthonormalize(Tensor y) {
  const int64_t l = y.size(1);
  for (int pass = 0; pass < 2; ++pass) {
    std::vector<double> lam, vec;
    symmetric_eigen(gram(y), int(l), lam, vec);
    const double cut = 1e-7 * std::max(lam.empty() ? 0.0 : lam[0], 0.0);
    for (int64_t j = 0; j < l; ++j) {
      const double f = lam[j] > cut && lam[j] > 0 ? 1.0 / std::sqrt(lam[j]) : 0.0;
      for (int64_t r = 0; r < l; ++r) vec[r * l + j] *= f;
    }
    y = times_host(y, vec, l, l);
  }
  return y;
}

}  // namespace

LowRankFactors randomized_svd(const Tensor& e, int rank, const RandomizedSvdOptions& opt) {
  LOFT_CHECK(e.dtype() == DType::F32 && e.dim() == 2 && e.size(0) > 0 && e.size(1) > 0,
             "randomized_svd: need a non-empty F32 matrix, got ", e.str());
  LOFT_CHECK(rank > 0 && opt.oversample >= 0 && opt.power_iters >= 0, "randomized_svd: rank ", rank,
             ", oversample ", opt.oversample, ", power iterations ", opt.power_iters);
  const int64_t m = e.size(0), n = e.size(1), r = rank;
  const int64_t l = std::min<int64_t>(r + opt.oversample, std::min(m, n));
  const Device dev = e.device();

  Tensor omega = Tensor::empty({n, l}, DType::F32, dev);
  ops::fill_random(omega, opt.seed, 1.0f);
  Tensor y = Tensor::empty({m, l}, DType::F32, dev);
  ops::gemm(e, omega, y);
  y = orthonormalize(y);
  Tensor z = Tensor::empty({n, l}, DType::F32, dev);
  for (int it = 0; it < opt.power_iters; ++it) {
    ops::gemm(e, y, z, {.trans_a = true});
    z = orthonormalize(z);
    ops::gemm(e, z, y);
    y = orthonormalize(y);
  }
  // E ≈ Q·(QᵀE); QᵀE = U_s·Σ·Vᵀ from the eigenpairs of (QᵀE)(QᵀE)ᵀ = U_s·Σ²·U_sᵀ.
  Tensor proj = Tensor::empty({l, n}, DType::F32, dev);
  ops::gemm(y, e, proj, {.trans_a = true});
  std::vector<double> lam, us;
  symmetric_eigen(gram(proj, /*of_rows=*/true), int(l), lam, us);

  LowRankFactors f;
  f.sigma.assign(size_t(r), 0.0);
  const double cut = 1e-12 * std::max(lam.empty() ? 0.0 : lam[0], 0.0);
  // right = Σ^(-1/2)·U_sᵀ·(QᵀE) [r×n];  left = Q·U_s·Σ^(1/2) [m×r].
  std::vector<double> to_right(size_t(r * l), 0.0), to_left(size_t(l * r), 0.0);
  for (int64_t i = 0; i < std::min(r, l); ++i) {
    if (!(lam[i] > cut && lam[i] > 0)) continue;
    const double s = std::sqrt(lam[i]), rs = std::sqrt(s);
    f.sigma[i] = s;
    for (int64_t j = 0; j < l; ++j) {
      to_right[i * l + j] = us[j * l + i] / rs;
      to_left[j * r + i] = us[j * l + i] * rs;
    }
  }
  f.left = times_host(y, to_left, l, r);
  std::vector<float> tr(to_right.begin(), to_right.end());
  const Tensor trd = Tensor::from_vector(tr, {r, l}, dev);
  f.right = Tensor::empty({r, n}, DType::F32, dev);
  ops::gemm(trd, proj, f.right);
  return f;
}

}  // namespace loft
