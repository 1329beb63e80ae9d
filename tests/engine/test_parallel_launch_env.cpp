// Reading the torchrun launch variables: the good case, not launched, and each malformed value
// with the message that names it.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "engine/parallel/launch_env.h"
#include "tests/common/eval_util.h"
#include "tests/common/test_util.h"

namespace loft::parallel {
namespace {

using Vars = std::map<std::string, std::string>;

Vars good() {
  return {{"MASTER_ADDR", "node0.cluster"},
          {"MASTER_PORT", "29500"},
          {"WORLD_SIZE", "8"},
          {"RANK", "5"},
          {"LOCAL_RANK", "1"}};
}

std::optional<LaunchEnv> parse(const Vars& v) {
  return launch_env_from([&](const char* name) -> const char* {
    const auto it = v.find(name);
    return it == v.end() ? nullptr : it->second.c_str();
  });
}

std::string error_with(const std::string& name, const std::string* value) {
  Vars v = good();
  if (value)
    v[name] = *value;
  else
    v.erase(name);
  return test::error_of([&] { parse(v); });
}

std::string error_with(const std::string& name, const std::string& value) {
  return error_with(name, &value);
}

TEST(DistLaunchEnv, ReadsEveryVariable) {
  const auto e = parse(good());
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->master_addr, "node0.cluster");
  EXPECT_EQ(e->port, 29500);
  EXPECT_EQ(e->world_size, 8);
  EXPECT_EQ(e->rank, 5);
  EXPECT_EQ(e->local_rank, 1);
  EXPECT_EQ(e->local_world_size, 1) << "LOCAL_WORLD_SIZE is optional";
}

TEST(DistLaunchEnv, LocalWorldSizeWhenGiven) {
  Vars v = good();
  v["LOCAL_WORLD_SIZE"] = "4";
  EXPECT_EQ(parse(v)->local_world_size, 4);
  EXPECT_NE(error_with("LOCAL_WORLD_SIZE", "1").find("must exceed LOCAL_RANK=1"), std::string::npos);
  EXPECT_NE(error_with("LOCAL_WORLD_SIZE", "x").find("not an integer"), std::string::npos);
}

TEST(DistLaunchEnv, SingleProcessLaunch) {
  const auto e = parse({{"MASTER_ADDR", "127.0.0.1"},
                        {"MASTER_PORT", "29500"},
                        {"WORLD_SIZE", "1"},
                        {"RANK", "0"},
                        {"LOCAL_RANK", "0"}});
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->world_size, 1);
  EXPECT_EQ(e->rank, 0);
}

TEST(DistLaunchEnv, NotLaunchedByTorchrunWithoutWorldSize) {
  EXPECT_FALSE(parse({}).has_value());
  Vars v = good();
  v.erase("WORLD_SIZE");  // stray MASTER_* variables alone do not make a multi-process launch
  EXPECT_FALSE(parse(v).has_value());
}

TEST(DistLaunchEnv, MissingVariablesAreNamed) {
  for (const char* name : {"MASTER_ADDR", "MASTER_PORT", "RANK", "LOCAL_RANK"}) {
    const std::string msg = error_with(name, nullptr);
    EXPECT_TRUE(test::contains(msg, cat(name, " is not set, but WORLD_SIZE is")));
  }
  EXPECT_TRUE(test::contains(error_with("MASTER_ADDR", ""), "MASTER_ADDR is set but empty"));
  EXPECT_TRUE(test::contains(error_with("WORLD_SIZE", ""), "WORLD_SIZE is set but empty"));
}

TEST(DistLaunchEnv, MalformedValuesAreNamedWithTheirValue) {
  EXPECT_TRUE(
      test::contains(error_with("WORLD_SIZE", "two"), "WORLD_SIZE='two' is not an integer"));
  EXPECT_TRUE(test::contains(error_with("RANK", "1.5"), "RANK='1.5' is not an integer"));
  EXPECT_TRUE(test::contains(error_with("RANK", " 1"), "RANK=' 1' is not an integer"));
  EXPECT_TRUE(test::contains(error_with("MASTER_PORT", "29500x"),
                             "MASTER_PORT='29500x' is not an integer"));
  EXPECT_TRUE(test::contains(error_with("MASTER_PORT", "99999999999999999999"),
                             "MASTER_PORT=99999999999999999999 is out of range"));
  EXPECT_TRUE(test::contains(error_with("WORLD_SIZE", "0"), "WORLD_SIZE=0 is out of range"));
  EXPECT_TRUE(test::contains(error_with("RANK", "-1"), "RANK=-1 is out of range"));
  EXPECT_TRUE(test::contains(error_with("LOCAL_RANK", "-1"), "LOCAL_RANK=-1 is out of range"));
  EXPECT_TRUE(test::contains(error_with("MASTER_PORT", "0"),
                             "MASTER_PORT=0 is out of range: must be a TCP port from 1 to 65535"));
  EXPECT_TRUE(
      test::contains(error_with("MASTER_PORT", "65536"), "MASTER_PORT=65536 is out of range"));
  EXPECT_TRUE(test::contains(error_with("RANK", "8"),
                             "RANK=8 is out of range: must be below WORLD_SIZE=8"));
  EXPECT_TRUE(test::contains(error_with("LOCAL_RANK", "6"),
                             "LOCAL_RANK=6 is out of range: must not exceed RANK=5"));
}

TEST(DistLaunchEnv, ErrorsAreUsageErrors) {
  const std::string nine = "9";
  EXPECT_THROW(
      {
        Vars v = good();
        v["RANK"] = nine;
        parse(v);
      },
      UsageError);
}

}  // namespace
}  // namespace loft::parallel
