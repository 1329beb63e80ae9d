// Hadamard matrices from their constructions, width plans, and the CPU (F32) reference transform.
#include "engine/quant/hadamard.h"

#include <bit>
#include <cmath>
#include <map>
#include <memory>
#include <mutex>

#include "engine/device/profile.h"
#ifdef LOFT_WITH_CUDA
#include "engine/quant/cuda/hadamard_cuda.h"
#endif

namespace loft::quant {

namespace {

bool is_prime(int q) {
  if (q < 2) return false;
  for (int d = 2; d * d <= q; ++d)
    if (q % d == 0) return false;
  return true;
}

// Paley I needs a prime q = k-1 ≡ 3 (mod 4); Paley II a prime q = k/2-1 ≡ 1 (mod 4).
bool paley1_applies(int k) { return is_prime(k - 1) && (k - 1) % 4 == 3; }
bool paley2_applies(int k) { return k % 2 == 0 && is_prime(k / 2 - 1) && (k / 2 - 1) % 4 == 1; }

// Quadratic character mod prime q: 0 at 0, +1 on nonzero squares, -1 otherwise.
std::vector<int> quadratic_character(int q) {
  std::vector<int> chi(size_t(q), -1);
  chi[0] = 0;
  for (int a = 1; a < q; ++a) chi[size_t(int64_t(a) * a % q)] = 1;
  return chi;
}

// The (q+1)×(q+1) core [[0, 1ᵀ], [±1, Q]] with the Jacobsthal matrix Q[i][j] = χ(j-i): skew
// (first column -1) for Paley I, symmetric (first column +1) for Paley II.
std::vector<int> paley_core(int q, int first_column) {
  const std::vector<int> chi = quadratic_character(q);
  const int m = q + 1;
  std::vector<int> c(size_t(m) * m, 0);
  for (int j = 1; j < m; ++j) {
    c[size_t(j)] = 1;
    c[size_t(j) * m] = first_column;
  }
  for (int i = 0; i < q; ++i)
    for (int j = 0; j < q; ++j)
      c[size_t(i + 1) * m + size_t(j + 1)] = chi[size_t(((j - i) % q + q) % q)];
  return c;
}

std::shared_ptr<HadamardMatrix> build(int k) {
  auto h = std::make_shared<HadamardMatrix>();
  h->k = k;
  h->entries.assign(size_t(k) * k, 1);
  auto set = [&](int r, int c, int v) { h->entries[size_t(r) * k + size_t(c)] = int8_t(v); };
  if (k == 1) {
    h->construction = "trivial";
  } else if (k == 2) {
    set(1, 1, -1);
    h->construction = "Sylvester 2";
  } else if (paley1_applies(k)) {
    // H = I + S with S skew and S·Sᵀ = q·I, so H·Hᵀ = I + S·Sᵀ = k·I.
    const int q = k - 1;
    const std::vector<int> s = paley_core(q, -1);
    for (int r = 0; r < k; ++r)
      for (int c = 0; c < k; ++c) set(r, c, s[size_t(r) * k + size_t(c)] + (r == c ? 1 : 0));
    h->construction = cat("Paley I (q=", q, ")");
  } else if (paley2_applies(k)) {
    // Each entry of the symmetric conference matrix becomes a 2×2 block: 0 -> [[1,-1],[-1,-1]],
    // ±1 -> ±[[1,1],[1,-1]].
    const int q = k / 2 - 1, m = q + 1;
    const std::vector<int> c = paley_core(q, 1);
    for (int r = 0; r < m; ++r)
      for (int col = 0; col < m; ++col) {
        const int v = c[size_t(r) * m + size_t(col)];
        const int b[2][2] = {{v == 0 ? 1 : v, v == 0 ? -1 : v},
                             {v == 0 ? -1 : v, v == 0 ? -1 : -v}};
        for (int a = 0; a < 2; ++a)
          for (int e = 0; e < 2; ++e) set(2 * r + a, 2 * col + e, b[a][e]);
      }
    h->construction = cat("Paley II (q=", q, ")");
  } else {
    // Sylvester doubling [[H, H], [H, -H]]; hadamard_order_supported(k) guaranteed k/2 works.
    const int half = k / 2;
    const HadamardMatrix& g = hadamard_matrix(half);
    for (int r = 0; r < k; ++r)
      for (int c = 0; c < k; ++c) {
        const int v = g.at(r % half, c % half);
        set(r, c, (r >= half && c >= half) ? -v : v);
      }
    h->construction = cat("Sylvester 2 x [", g.construction, "]");
  }
  return h;
}

// Width n as k·2^m with the largest m whose k is a supported order, as a full plan.
bool direct_plan(int64_t n, HadamardPlan* plan) {
  for (int m = std::countr_zero(uint64_t(n)); m >= 0; --m) {
    const int64_t k = n >> m;
    if (k > kMaxHadamardOrder) return false;
    if (!hadamard_order_supported(int(k))) continue;
    plan->n = plan->block = n;
    plan->pow2 = int64_t(1) << m;
    plan->log2_pow2 = m;
    plan->k = int(k);
    plan->matrix = &hadamard_matrix(int(k));
    return true;
  }
  return false;
}

void check_operands(const HadamardPlan& plan, const Tensor& x, const Tensor& y) {
  LOFT_CHECK(plan.matrix != nullptr, "hadamard_transform: the plan is empty (use plan_for)");
  if (!x.defined() || !y.defined())
    throw Error("hadamard_transform: input x and output y must both be defined tensors");
  if (x.dim() < 1 || x.size(-1) != plan.n)
    throw Error(cat("hadamard_transform: input x ", x.str(),
                    " has last dimension other than the plan's n=", plan.n));
  if (y.shape() != x.shape() || y.dtype() != x.dtype() || !(y.device() == x.device()))
    throw Error(cat("hadamard_transform: output y ", y.str(), " must match input x ", x.str(),
                    " in shape, dtype and device"));
}

// In-place unnormalized Walsh–Hadamard transform of v[0, len), len a power of two.
void fwht(float* v, int64_t len) {
  for (int64_t h = 1; h < len; h *= 2)
    for (int64_t i = 0; i < len; i += 2 * h)
      for (int64_t j = i; j < i + h; ++j) {
        const float a = v[j], b = v[j + h];
        v[j] = a + b;
        v[j + h] = a - b;
      }
}

void transform_cpu(const HadamardPlan& plan, const Tensor& x, const Tensor& y, bool inverse) {
  if (x.dtype() != DType::F32)
    throw Error(cat("hadamard_transform: the CPU transform takes F32, got x ", x.str()));
  if (x.data() != y.data()) Tensor(y).copy_from(x);
  const int64_t n = plan.n, p = plan.pow2, rows = x.numel() / n;
  const int k = plan.k;
  const float scale = plan.scale();
  std::vector<float> col(static_cast<size_t>(k));
  for (int64_t r = 0; r < rows; ++r) {
    float* row = y.ptr<float>() + r * n;
    for (int64_t s = 0; s < n; s += p) fwht(row + s, p);
    for (int64_t b = 0; b < n; b += plan.block) {
      float* blk = row + b;
      for (int64_t j = 0; j < p; ++j) {
        for (int i = 0; i < k; ++i) col[size_t(i)] = blk[i * p + j];
        // Row vector times H: output i takes column i of H_k (row i of H_kᵀ for the inverse).
        for (int i = 0; i < k; ++i) {
          float acc = 0.0f;
          for (int src = 0; src < k; ++src)
            acc += float(inverse ? plan.matrix->at(i, src) : plan.matrix->at(src, i)) *
                   col[size_t(src)];
          blk[i * p + j] = acc * scale;
        }
      }
    }
  }
}

void check_token_operands(const HadamardPlan& plan, const Tensor& x, const Tensor& y) {
  LOFT_CHECK(plan.matrix != nullptr, "token_transform: the plan is empty (use token_plan)");
  if (!x.defined() || !y.defined() || x.dim() != 2 || y.dim() != 2)
    throw Error("token_transform: input x and output y must be defined 2-D tensors [tokens, N]");
  if (x.size(0) > plan.n || y.size(0) > plan.n || x.size(1) != y.size(1))
    throw Error(cat("token_transform: x ", x.str(), " and y ", y.str(),
                    " must share N and have at most the plan's n=", plan.n, " rows"));
  if (y.dtype() != x.dtype() || !(y.device() == x.device()))
    throw Error(cat("token_transform: output y ", y.str(), " must match input x ", x.str(),
                    " in dtype and device"));
  if (x.numel() > 0 && x.data() == y.data())
    throw Error(cat("token_transform: y ", y.str(), " must not be x (no in-place transform)"));
}

// Columns of the zero-padded x become rows of a [N, n] scratch, which the row transform turns.
void token_transform_cpu(const HadamardPlan& plan, const Tensor& x, const Tensor& y, bool inverse) {
  if (x.dtype() != DType::F32)
    throw Error(cat("token_transform: the CPU transform takes F32, got x ", x.str()));
  const int64_t n = plan.n, cols = x.size(1), rx = x.size(0), ry = y.size(0);
  Tensor t = Tensor::zeros({cols, n}, DType::F32);
  float* tp = t.ptr<float>();
  const float* xp = x.ptr<float>();
  for (int64_t r = 0; r < rx; ++r)
    for (int64_t c = 0; c < cols; ++c) tp[c * n + r] = xp[r * cols + c];
  transform_cpu(plan, t, t, inverse);
  float* yp = y.ptr<float>();
  for (int64_t r = 0; r < ry; ++r)
    for (int64_t c = 0; c < cols; ++c) yp[r * cols + c] = tp[c * n + r];
}

}  // namespace

bool hadamard_order_supported(int k) {
  if (k < 1 || k > kMaxHadamardOrder) return false;
  if (k <= 2) return true;
  if (k % 4 != 0) return false;  // every Hadamard order past 2 is a multiple of 4
  return paley1_applies(k) || paley2_applies(k) || hadamard_order_supported(k / 2);
}

const HadamardMatrix& hadamard_matrix(int k) {
  static std::mutex mu;
  static std::map<int, std::shared_ptr<HadamardMatrix>> cache;
  if (!hadamard_order_supported(k))
    throw Error(cat("no Hadamard matrix of order ", k,
                    " (supported: 1, 2, and multiples of 4 up to ", kMaxHadamardOrder,
                    " from Paley I/II on a prime, with Sylvester doubling)"));
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache.find(k);
    if (it != cache.end()) return *it->second;
  }
  // Built outside the lock: Sylvester doubling asks for order k/2 recursively.
  std::shared_ptr<HadamardMatrix> h = build(k);
  std::lock_guard<std::mutex> lock(mu);
  return *cache.emplace(k, std::move(h)).first->second;  // a racing builder's copy is identical
}

float HadamardPlan::scale() const { return float(1.0 / std::sqrt(double(block))); }

std::string HadamardPlan::describe() const {
  const std::string inner =
      cat("K=", k, (matrix ? " " + matrix->construction : std::string()), ", FWHT ", pow2);
  if (!block_diagonal())
    return cat("n=", n, ": ", k, " x ", pow2, " (", inner, "), scale 1/sqrt(", block, ")");
  return cat("n=", n, ": block-diagonal, ", blocks(), " blocks of ", block, " (", inner,
             "); no supported order K with n = K*2^m, scale 1/sqrt(", block, ")");
}

HadamardPlan plan_for(int64_t n) {
  if (n < 1) throw Error(cat("Hadamard transform: width n=", n, " must be positive"));
  HadamardPlan plan;
  if (direct_plan(n, &plan)) return plan;
  // Largest proper divisor with a full plan; divisors come in pairs (d, n/d).
  HadamardPlan best;
  auto consider = [&](int64_t b) {
    HadamardPlan cand;
    if (b >= kMinHadamardBlock && b < n && b > best.block && direct_plan(b, &cand)) best = cand;
  };
  for (int64_t d = 1; d * d <= n; ++d)
    if (n % d == 0) {
      consider(d);
      consider(n / d);
    }
  if (best.matrix == nullptr)
    throw Error(cat("Hadamard transform: width n=", n,
                    " has no orthogonal plan (no K*2^m with K a supported Hadamard order, and no "
                    "such block of at least ",
                    kMinHadamardBlock, " dividing it)"));
  best.n = n;
  return best;
}

Tensor hadamard_dense(const HadamardPlan& plan) {
  LOFT_CHECK(plan.matrix != nullptr, "hadamard_dense: the plan is empty (use plan_for)");
  const int64_t n = plan.n, b = plan.block, p = plan.pow2;
  std::vector<float> h(size_t(n * n), 0.0f);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = r / b * b; c < r / b * b + b; ++c) {
      const int64_t rr = r % b, cc = c % b;
      // (H_k ⊗ H_p)[r, c] = H_k[r/p, c/p] · (-1)^popcount((r mod p) & (c mod p)).
      const int sign = (std::popcount(uint64_t(rr % p) & uint64_t(cc % p)) % 2) ? -1 : 1;
      h[size_t(r * n + c)] = float(sign * plan.matrix->at(int(rr / p), int(cc / p))) * plan.scale();
    }
  return Tensor::from_vector(h, {n, n});
}

void hadamard_transform(const HadamardPlan& plan, const Tensor& x, const Tensor& y, bool inverse) {
  prof::OpScope op_scope("hadamard");
  check_operands(plan, x, y);
  if (x.numel() == 0) return;
  if (x.device().is_cpu()) return transform_cpu(plan, x, y, inverse);
#ifdef LOFT_WITH_CUDA
  return hadamard_transform_cuda(plan, x, y, inverse);
#else
  throw Error(
      cat("hadamard_transform: x ", x.str(), " is on a GPU but loft was built without CUDA"));
#endif
}

HadamardPlan token_plan(int64_t tokens) {
  if (tokens < 1) throw Error(cat("token_plan: token count ", tokens, " must be positive"));
  static std::mutex mu;
  static std::map<int64_t, HadamardPlan> cache;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache.find(tokens);
    if (it != cache.end()) return it->second;
  }
  // Every multiple of 64 qualifies (blocks of 64 = 2^6), so fewer than 64 rows are ever padded.
  for (int64_t n = tokens;; ++n) {
    HadamardPlan plan;
    int64_t b = std::min(n, kMaxTokenBlock);
    while (b >= 1 && !(n % b == 0 && direct_plan(b, &plan))) --b;
    if (b >= std::min(n, kMinTokenBlock)) {
      plan.n = n;
      std::lock_guard<std::mutex> lock(mu);
      return cache.emplace(tokens, plan).first->second;
    }
  }
}

void token_transform(const HadamardPlan& plan, const Tensor& x, const Tensor& y, bool inverse) {
  prof::OpScope op_scope("token_transform");
  check_token_operands(plan, x, y);
  if (y.numel() == 0) return;
  if (x.device().is_cpu()) return token_transform_cpu(plan, x, y, inverse);
#ifdef LOFT_WITH_CUDA
  return token_transform_cuda(plan, x, y, inverse);
#else
  throw Error(cat("token_transform: x ", x.str(), " is on a GPU but loft was built without CUDA"));
#endif
}

void hadamard_transform(const Tensor& x, const Tensor& y, bool inverse) {
  if (!x.defined() || x.dim() < 1)
    throw Error("hadamard_transform: input x must be a defined tensor with at least one dimension");
  hadamard_transform(plan_for(x.size(-1)), x, y, inverse);
}

}  // namespace loft::quant
