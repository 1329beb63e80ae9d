// A truncated SVD built from GEMMs, for FALQON's initial adapter (the best rank-r approximation of
// the quantization error, docs/methods.md "FALQON"). Randomized range finder (Halko, Martinsson & Tropp
// 2011): Y = E·Ω with a counter-based random Ω (same values on every backend), a few power
// iterations Y ← E·(Eᵀ·Y), each product re-orthonormalized; then the small (r+p)×(r+p) Gram
// eigenproblem of QᵀE on the host in double (cyclic Jacobi). The heavy work is 2q+3 GEMMs with the
// [m×n] matrix on its own device (CPU or CUDA); the host only sees l×l matrices.
#pragma once
#include <cstdint>
#include <vector>

#include "engine/tensor/tensor.h"

namespace loft {

struct RandomizedSvdOptions {
  int oversample = 10;   // p: extra random directions beyond the rank
  int power_iters = 2;   // q: sharpen the spectrum (the quantization error's is flat)
  uint64_t seed = 0;     // Ω's seed: same seed, same factors (on one backend)
};

// E ≈ left·right with left = U_r·diag(√σ) [m×r] and right = diag(√σ)·V_rᵀ [r×n], both F32 on e's
// device. sigma holds the r singular values, descending; components beyond E's numerical rank (or
// beyond min(m, n)) are 0 with zero rows/columns in the factors.
struct LowRankFactors {
  Tensor left, right;
  std::vector<double> sigma;
};

// e: F32 [m×n] (m, n > 0), rank > 0.
LowRankFactors randomized_svd(const Tensor& e, int rank, const RandomizedSvdOptions& opt = {});

// Symmetric eigendecomposition of a [n×n] row-major (only its symmetric part is used) by cyclic
// Jacobi in double: eigenvalues descending in `values`, the matching unit eigenvectors as the
// COLUMNS of `vectors` [n×n] row-major.
void symmetric_eigen(std::vector<double> a, int n, std::vector<double>& values,
                     std::vector<double>& vectors);

}  // namespace loft
