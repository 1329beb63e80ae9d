// MMLU's data and prompts without a model: the CSV reader (RFC-4180 quoting, both layouts, errors
// naming file:line), lm-eval's subject groups, and every `context` of the reference requests
// (lm-eval's own prompts) rendered byte for byte from tests/data/mmlu; lm-eval's truncation
// of a loglikelihood input.
#include <fstream>

#include <nlohmann/json.hpp>

#include "eval/csv.h"
#include "eval/harness.h"
#include "eval/mmlu.h"
#include "tests/common/eval_util.h"
#include "tests/common/test_util.h"

namespace loft {
namespace {

using nlohmann::json;

using test::error_of;

TEST(Csv, QuotingAndLineNumbers) {
  const auto r = eval::parse_csv("a,\"b,c\",\"say \"\"hi\"\"\"\r\n\n\"two\nlines\",,x\n3,4,5", "t.csv", 3);
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].fields, (std::vector<std::string>{"a", "b,c", "say \"hi\""}));
  EXPECT_EQ(r[1].line, 3);
  EXPECT_EQ(r[1].fields, (std::vector<std::string>{"two\nlines", "", "x"}));
  EXPECT_EQ(r[2].line, 5);
  EXPECT_EQ(r[2].fields, (std::vector<std::string>{"3", "4", "5"}));
  const std::string e = error_of([] { eval::parse_csv("a,b,c\n\"x\ny\",2\n", "f.csv", 3); });
  EXPECT_NE(e.find("f.csv:2: 2 columns, expected 3"), std::string::npos) << e;
  const std::string open = error_of([] { eval::parse_csv("a,\"b\n", "g.csv", 2); });
  EXPECT_NE(open.find("g.csv:1: a quoted field is not closed"), std::string::npos) << open;
}

TEST(Mmlu, ReadsBothLayoutsAndNamesBadRows) {
  test::TempDir dir;
  {
    std::ofstream(dir / "h.csv") << "question,choice0,choice1,choice2,choice3,answer\n\" Q1? \",a,b,c,d,2\n";
    std::ofstream(dir / "o.csv") << "Q1?,a,\"b, c\",c,d,D\nQ2?,1,2,3,4,A\n";
    std::ofstream(dir / "bad.csv") << "Q1?,a,b,c,d,A\nQ2?,a,b,c,A\n";
    std::ofstream(dir / "letter.csv") << "question,choice0,choice1,choice2,choice3,answer\nQ,a,b,c,d,B\n";
  }
  const auto h = eval::read_mmlu_csv(dir / "h.csv");
  ASSERT_EQ(h.size(), 1u);
  EXPECT_EQ(h[0].question, " Q1? ");
  EXPECT_EQ(h[0].answer, 2);
  EXPECT_EQ(eval::mmlu_doc_to_text(h[0]), "Q1?\nA. a\nB. b\nC. c\nD. d\nAnswer:");
  const auto o = eval::read_mmlu_csv(dir / "o.csv");
  ASSERT_EQ(o.size(), 2u);
  EXPECT_EQ(o[0].answer, 3);
  EXPECT_EQ(o[0].choices[1], "b, c");
  EXPECT_EQ(o[1].answer, 0);
  const std::string bad = error_of([&] { eval::read_mmlu_csv(dir / "bad.csv"); });
  EXPECT_NE(bad.find("bad.csv:2: 5 columns, expected 6"), std::string::npos) << bad;
  const std::string letter = error_of([&] { eval::read_mmlu_csv(dir / "letter.csv"); });
  EXPECT_NE(letter.find("letter.csv:2: answer 'B' is not 0-3"), std::string::npos) << letter;
  const std::string missing = error_of([&] { eval::read_mmlu_csv(dir / "none.csv"); });
  EXPECT_NE(missing.find("none.csv"), std::string::npos) << missing;
}

TEST(Mmlu, CategoriesAreLmEvalsGroups) {
  const auto subjects = eval::mmlu_subjects(test::data_path("mmlu"));
  EXPECT_EQ(subjects.size(), 57u);
  std::map<std::string, int> n;
  for (const auto& s : subjects) {
    const std::string c = eval::mmlu_category(s);
    EXPECT_FALSE(c.empty()) << s;
    n[c]++;
  }
  EXPECT_EQ(n["stem"], 19);
  EXPECT_EQ(n["humanities"], 13);
  EXPECT_EQ(n["social_sciences"], 12);
  EXPECT_EQ(n["other"], 13);
  // The reference requests carry lm-eval's category of each subject.
  std::ifstream in(test::data_path("reference/eval/mmlu5_requests.jsonl"));
  for (std::string line; std::getline(in, line);) {
    const json r = json::parse(line);
    EXPECT_EQ(eval::mmlu_category(r["subject"]), r["category"].get<std::string>());
  }
  EXPECT_EQ(eval::mmlu_category("cooking"), "");
}

TEST(Mmlu, RendersEveryReferenceContextByteForByte) {
  const auto data = test::data_path("mmlu");
  std::ifstream in(test::data_path("reference/eval/mmlu5_requests.jsonl"));
  int checked = 0;
  for (std::string line; std::getline(in, line);) {
    const json r = json::parse(line);
    const std::string subject = r["subject"];
    const auto dev = eval::read_mmlu_csv(data / "dev" / (subject + "_dev.csv"));
    const auto test = eval::read_mmlu_csv(data / "test" / (subject + "_test.csv"));
    const auto& q = test.at(r["index"].get<size_t>());
    EXPECT_EQ(eval::mmlu_fewshot_prefix(subject, dev, 5) + eval::mmlu_doc_to_text(q), r["context"].get<std::string>())
        << subject << " " << r["index"];
    EXPECT_EQ(q.answer, r["gold"].get<int>());
    EXPECT_EQ(r["continuations"], json({" A", " B", " C", " D"}));
    ++checked;
  }
  EXPECT_EQ(checked, 40);
}

TEST(Harness, TruncationDropsBosAndKeepsTheContinuation) {
  eval::EncodedPair p{{1, 10, 11, 12, 13}, {20, 21}};
  auto r = eval::loglikelihood_request(p, 100);  // fits: ctx + cont[:-1]
  EXPECT_EQ(r.tokens, (std::vector<int32_t>{1, 10, 11, 12, 13, 20}));
  EXPECT_EQ(r.positions, (std::vector<int64_t>{4, 5}));
  EXPECT_EQ(r.targets, (std::vector<int32_t>{20, 21}));
  r = eval::loglikelihood_request(p, 4);  // (ctx+cont)[-5:][:-1]: BOS and 10 dropped
  EXPECT_EQ(r.tokens, (std::vector<int32_t>{11, 12, 13, 20}));
  EXPECT_EQ(r.positions, (std::vector<int64_t>{2, 3}));
  EXPECT_THROW(eval::loglikelihood_request(p, 1), Error);
  EXPECT_EQ(eval::generation_context({1, 2, 3, 4, 5}, 8, 5), (std::vector<int32_t>{3, 4, 5}));
  EXPECT_THROW(eval::generation_context({1, 2}, 4, 4), Error);
}

}  // namespace
}  // namespace loft
