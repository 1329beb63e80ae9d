// CPython's random.Random reproduced: draws recorded from CPython 3 (random.Random(seed) then
// getrandbits / randrange / sample), and lm-eval's GSM8K few-shot draws in the reference
// requests (`fewshot_indices`: Random(1234).sample(train, 5) once per test question in order).
#include <fstream>

#include <nlohmann/json.hpp>

#include "eval/python_random.h"
#include "tests/common/test_util.h"

namespace loft {
namespace {

TEST(PythonRandom, MatchesCPythonDraws) {
  eval::PythonRandom r(1234);
  EXPECT_EQ(r.getrandbits(32), 4150886329u);
  EXPECT_EQ(r.getrandbits(32), 3342196574u);
  EXPECT_EQ(r.getrandbits(32), 1892932127u);
  EXPECT_EQ(r.getrandbits(40), 4796836454u);
  EXPECT_EQ(r.getrandbits(64), 16804540376168033093ull);
  EXPECT_EQ(r.randbelow(1000000), 988319u);  // randrange(10**6)

  eval::PythonRandom s(1234);
  EXPECT_EQ(s.sample(7473, 5), (std::vector<int64_t>{6374, 3610, 957, 61, 742}));
  EXPECT_EQ(s.sample(7473, 5), (std::vector<int64_t>{7462, 6610, 4769, 286, 5501}));
  EXPECT_EQ(s.sample(7473, 5), (std::vector<int64_t>{5677, 687, 806, 6279, 2905}));

  eval::PythonRandom z(0);  // the pool algorithm (small populations), then the set one with k > 5
  EXPECT_EQ(z.sample(10, 4), (std::vector<int64_t>{6, 9, 0, 2}));
  EXPECT_EQ(z.sample(30, 8), (std::vector<int64_t>{16, 15, 12, 25, 9, 28, 11, 18}));

  EXPECT_EQ(eval::PythonRandom((int64_t(1) << 40) + 5).getrandbits(32), 2166296868u);  // a 2-word key
  EXPECT_EQ(eval::PythonRandom(-7).getrandbits(32), 1390851128u);                       // abs(seed)
  EXPECT_THROW(eval::PythonRandom(1).sample(3, 4), Error);
}

TEST(PythonRandom, ReproducesLmEvalsGsm8kFewshotDraws) {
  std::ifstream in(test::data_path("reference/eval/gsm8k5_requests.jsonl"));
  eval::PythonRandom r(1234);
  int n = 0;
  for (std::string line; std::getline(in, line); ++n) {
    const auto j = nlohmann::json::parse(line);
    EXPECT_EQ(j["index"], n);
    EXPECT_EQ(r.sample(7473, 5), j["fewshot_indices"].get<std::vector<int64_t>>()) << n;
  }
  EXPECT_EQ(n, 8);
}

}  // namespace
}  // namespace loft
