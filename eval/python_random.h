// CPython's random.Random for integer seeds, bit for bit: seed() (init_by_array over the seed's
// 32-bit words), the MT19937 generator, getrandbits, _randbelow (rejection on bit_length bits)
// and sample() (both of its algorithms: the pool for small populations, the set of selected
// indices otherwise). lm-evaluation-harness draws GSM8K's few-shot examples with
// random.Random(1234).sample(train, 5), once per test question in order.
#pragma once
#include <array>
#include <cstdint>
#include <vector>

namespace loft::eval {

class PythonRandom {
 public:
  explicit PythonRandom(int64_t seed);  // random.Random(seed); Python uses abs(seed)
  uint32_t genrand_uint32();
  uint64_t getrandbits(int k);   // 0 <= k <= 64
  uint64_t randbelow(uint64_t n);  // uniform in [0, n), n >= 1
  // random.sample(range(n), k): the chosen indices in order. k <= n.
  std::vector<int64_t> sample(int64_t n, int64_t k);

 private:
  std::array<uint32_t, 624> mt_{};
  int index_ = 624;
};

}  // namespace loft::eval
