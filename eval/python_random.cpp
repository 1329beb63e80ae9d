#include "eval/python_random.h"

#include <cmath>
#include <unordered_set>

#include "engine/core/error.h"

namespace loft::eval {

namespace {
constexpr int N = 624, M = 397;
constexpr uint32_t kMatrixA = 0x9908b0dfU, kUpper = 0x80000000U, kLower = 0x7fffffffU;
}  // namespace

PythonRandom::PythonRandom(int64_t seed) {
  uint64_t a = seed < 0 ? uint64_t(0) - uint64_t(seed) : uint64_t(seed);
  std::vector<uint32_t> key;
  do {
    key.push_back(uint32_t(a & 0xffffffffU));
    a >>= 32;
  } while (a != 0);
  // init_genrand(19650218)
  mt_[0] = 19650218U;
  for (int i = 1; i < N; ++i) mt_[size_t(i)] = 1812433253U * (mt_[size_t(i - 1)] ^ (mt_[size_t(i - 1)] >> 30)) + uint32_t(i);
  // init_by_array(key)
  int i = 1;
  size_t j = 0;
  for (int k = std::max<int>(N, int(key.size())); k; --k) {
    mt_[size_t(i)] = (mt_[size_t(i)] ^ ((mt_[size_t(i - 1)] ^ (mt_[size_t(i - 1)] >> 30)) * 1664525U)) + key[j] + uint32_t(j);
    ++i;
    ++j;
    if (i >= N) {
      mt_[0] = mt_[N - 1];
      i = 1;
    }
    if (j >= key.size()) j = 0;
  }
  for (int k = N - 1; k; --k) {
    mt_[size_t(i)] = (mt_[size_t(i)] ^ ((mt_[size_t(i - 1)] ^ (mt_[size_t(i - 1)] >> 30)) * 1566083941U)) - uint32_t(i);
    ++i;
    if (i >= N) {
      mt_[0] = mt_[N - 1];
      i = 1;
    }
  }
  mt_[0] = 0x80000000U;
  index_ = N;
}

uint32_t PythonRandom::genrand_uint32() {
  if (index_ >= N) {
    for (int kk = 0; kk < N; ++kk) {
      const uint32_t y = (mt_[size_t(kk)] & kUpper) | (mt_[size_t((kk + 1) % N)] & kLower);
      mt_[size_t(kk)] = mt_[size_t((kk + M) % N)] ^ (y >> 1) ^ ((y & 1U) ? kMatrixA : 0U);
    }
    index_ = 0;
  }
  uint32_t y = mt_[size_t(index_++)];
  y ^= (y >> 11);
  y ^= (y << 7) & 0x9d2c5680U;
  y ^= (y << 15) & 0xefc60000U;
  y ^= (y >> 18);
  return y;
}

uint64_t PythonRandom::getrandbits(int k) {
  if (k < 0 || k > 64) throw Error(cat("getrandbits(", k, "): only 0..64 bits are supported"));
  if (k == 0) return 0;
  if (k <= 32) return genrand_uint32() >> (32 - k);
  // Little-endian 32-bit words, the last one shifted down to the remaining bits.
  const uint64_t low = genrand_uint32();
  const uint64_t high = genrand_uint32() >> (64 - k);
  return low | (high << 32);
}

uint64_t PythonRandom::randbelow(uint64_t n) {
  if (n == 0) throw Error("randbelow(0)");
  int bits = 0;
  for (uint64_t v = n; v; v >>= 1) ++bits;  // n.bit_length()
  uint64_t r = getrandbits(bits);
  while (r >= n) r = getrandbits(bits);
  return r;
}

std::vector<int64_t> PythonRandom::sample(int64_t n, int64_t k) {
  if (k < 0 || k > n) throw Error(cat("sample larger than population or is negative (", k, " of ", n, ")"));
  std::vector<int64_t> result(size_t(k), 0);
  int64_t setsize = 21;
  if (k > 5) setsize += int64_t(std::pow(4.0, std::ceil(std::log(double(k * 3)) / std::log(4.0))));
  if (n <= setsize) {
    std::vector<int64_t> pool(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) pool[size_t(i)] = i;
    for (int64_t i = 0; i < k; ++i) {
      const int64_t j = int64_t(randbelow(uint64_t(n - i)));
      result[size_t(i)] = pool[size_t(j)];
      pool[size_t(j)] = pool[size_t(n - i - 1)];
    }
  } else {
    std::unordered_set<int64_t> selected;
    for (int64_t i = 0; i < k; ++i) {
      int64_t j = int64_t(randbelow(uint64_t(n)));
      while (selected.count(j)) j = int64_t(randbelow(uint64_t(n)));
      selected.insert(j);
      result[size_t(i)] = j;
    }
  }
  return result;
}

}  // namespace loft::eval
