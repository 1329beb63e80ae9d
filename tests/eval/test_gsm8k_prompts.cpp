// GSM8K without a model: every `context` of the reference requests (lm-eval's prompts, few-shot
// drawn by random.Random(1234)) rendered byte for byte from tests/data/gsm8k; gsm8k_cot's
// prompt against docs/evaluation.md; lm-eval's filters and normalisation; the data errors.
#include <fstream>

#include <nlohmann/json.hpp>

#include "eval/gsm8k.h"
#include "eval/python_random.h"
#include "tests/common/eval_util.h"
#include "tests/common/test_util.h"

namespace loft {
namespace {

using nlohmann::json;

using test::error_of;

TEST(Gsm8k, RendersEveryReferenceContextByteForByte) {
  const auto files = eval::gsm8k_files(test::data_path("gsm8k"));
  EXPECT_EQ(files.test.filename(), "test_first1000.jsonl");
  const auto train = eval::read_gsm8k_jsonl(files.train);
  const auto test = eval::read_gsm8k_jsonl(files.test);
  ASSERT_EQ(train.size(), 7473u);
  std::ifstream in(test::data_path("reference/eval/gsm8k5_requests.jsonl"));
  eval::PythonRandom rnd(1234);
  int n = 0;
  for (std::string line; std::getline(in, line); ++n) {
    const json r = json::parse(line);
    const auto shots = rnd.sample(int64_t(train.size()), 5);
    EXPECT_EQ(eval::gsm8k_prompt(train, shots, test[size_t(n)].question), r["context"].get<std::string>()) << n;
    EXPECT_EQ(eval::gsm8k_normalise(eval::gsm8k_reference(test[size_t(n)], false)), r["target"].get<std::string>());
    EXPECT_EQ(eval::gsm8k_reference(test[size_t(n)], true), r["target"].get<std::string>());
    EXPECT_EQ(r["until"], json({"Question:", "</s>", "<|im_end|>"}));
  }
  EXPECT_EQ(n, 8);
}

TEST(Gsm8k, CotPromptMatchesEvalMd) {
  const std::string q = "Janet\xE2\x80\x99s ducks lay 16 eggs per day.";
  const std::string p = eval::gsm8k_cot_prompt(8, q);
  EXPECT_EQ(p.rfind("Q: There are 15 trees in the grove. Grove workers will plant trees in the grove today. After "
                    "they are done, there will be 21 trees. How many trees did the grove workers plant today?\nA: "
                    "There are 15 trees originally. Then there were 21 trees after some more were planted. So there "
                    "must have been 21 - 15 = 6. The answer is 6.\n\nQ: If there are 3 cars",
                    0),
            0u);
  const std::string tail =
      "Q: Olivia has $23. She bought five bagels for $3 each. How much money does she have left?\nA: Olivia had 23 "
      "dollars. 5 bagels for 3 dollars each will be 5 x 3 = 15 dollars. So she has 23 - 15 dollars left. 23 - 15 is "
      "8. The answer is 8.\n\nQ: " + q + "\nA:";
  EXPECT_EQ(p.substr(p.size() - tail.size()), tail);
  size_t shots = 0;
  for (size_t at = p.find("\nA: "); at != std::string::npos; at = p.find("\nA: ", at + 1)) ++shots;
  EXPECT_EQ(shots, 8u);
}

TEST(Gsm8k, FiltersAndNormalisationFollowLmEval) {
  EXPECT_EQ(eval::gsm8k_strict_match("so 5.\n#### 1,080\n#### 7", false), "1,080");
  EXPECT_EQ(eval::gsm8k_strict_match("The answer is 42", false), "[invalid]");
  EXPECT_EQ(eval::gsm8k_strict_match("The answer is 42.", true), "42");
  EXPECT_EQ(eval::gsm8k_strict_match("The answer is 42", true), "4");  // its "." takes the "2", as in Python
  EXPECT_EQ(eval::gsm8k_flexible_extract("I have 3 apples and $540.00 left"), "$540.00");
  EXPECT_EQ(eval::gsm8k_flexible_extract("costs 12 then 7"), "7");
  EXPECT_EQ(eval::gsm8k_flexible_extract("no number"), "[invalid]");
  EXPECT_EQ(eval::gsm8k_normalise("$540.00"), "540.00");
  EXPECT_EQ(eval::gsm8k_normalise("3."), "3");
  EXPECT_EQ(eval::gsm8k_normalise("Janet sells 9.\nShe makes $18.\n#### 1,080"), "1080");
  EXPECT_EQ(eval::gsm8k_normalise("[invalid]"), "[invalid]");
  EXPECT_EQ(eval::gsm8k_normalise("A.\n"), "a\n");
}

TEST(Gsm8k, BadDataIsAnErrorNamingTheLine) {
  test::TempDir dir;
  std::ofstream(dir / "train.jsonl") << "{\"question\": \"q\", \"answer\": \"a\\n#### 1\"}\n\n"
                                        "{\"question\": \"q2\", \"answer\": \"no final line\"}\n";
  std::string e = error_of([&] { eval::read_gsm8k_jsonl(dir / "train.jsonl"); });
  EXPECT_NE(e.find("train.jsonl:3: the answer has no '####'"), std::string::npos) << e;
  std::ofstream(dir / "a.jsonl") << "{\"question\": 1}\n";
  e = error_of([&] { eval::read_gsm8k_jsonl(dir / "a.jsonl"); });
  EXPECT_NE(e.find("a.jsonl:1: needs string fields"), std::string::npos) << e;
  std::ofstream(dir / "b.jsonl") << "{\"question\": 1}\n";
  e = error_of([&] { eval::gsm8k_files(dir.path()); });  // two candidates for the test file
  EXPECT_NE(e.find("exactly one other *.jsonl"), std::string::npos) << e;
}

}  // namespace
}  // namespace loft
