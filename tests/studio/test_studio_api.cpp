// The studio's read-only and job routes against the real binary: info is exactly
// `loft info --json`, data inspect renders trained spans, the finetune option table comes from
// the CLI definition, evaluation and export jobs finish with their results, chat streams tokens,
// and bad requests (unknown keys, unknown ids) get a one-line error naming what is wrong.
#include <gtest/gtest.h>

#include <fstream>

#include "tests/common/cli_capture.h"
#include "tests/studio/studio_fixture.h"

namespace loft {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::StudioTest;

TEST_F(StudioTest, InfoIsLoftInfoJson) {
  int status = 0;
  const json j = get("/api/info?model=" + q(model()) + "&batch=2&seq=64&lora_rank=4&grad_checkpointing=1", &status);
  ASSERT_EQ(status, 200) << j.dump();
  const auto cli = test::run_cli_captured({"info", "--model", fs::canonical(model()).string(), "--json", "--batch", "2",
                                           "--seq", "64", "--lora-rank", "4", "--grad-checkpointing"});
  ASSERT_EQ(cli.code, 0) << cli.err;
  EXPECT_EQ(j, json::parse(cli.out));
  EXPECT_EQ(j["memory_estimate"]["batch"], 2);
  const json bad = get("/api/info?model=" + q(model()) + "&batch=zero", &status);
  EXPECT_EQ(status, 400);
  EXPECT_TRUE(test::contains(bad["error"], "--batch")) << bad.dump();
  get("/api/info?model=" + q(model()) + "&colour=red", &status);
  EXPECT_EQ(status, 400);
  get("/api/info", &status);
  EXPECT_EQ(status, 400);
}

TEST_F(StudioTest, DataInspectShowsTrainedSpans) {
  int status = 0;
  const json j = get("/api/data/inspect?model=" + q(model()) + "&data=" + q(demo()) + "&seq=128&examples=2", &status);
  ASSERT_EQ(status, 200) << j.dump();
  ASSERT_EQ(j["examples"].size(), 2u);
  bool trained = false, untrained = false;
  for (const auto& s : j["examples"][0]["segments"]) (s["trained"] == true ? trained : untrained) = true;
  EXPECT_TRUE(trained && untrained) << j["examples"][0].dump();
  EXPECT_EQ(j["lengths"]["count"], 36);
  EXPECT_GT(j["truncated"].get<int>(), 0);
  int64_t in_bins = 0;
  for (const auto& b : j["histogram"]) in_bins += b["count"].get<int64_t>();
  EXPECT_EQ(in_bins, 36);
}

TEST_F(StudioTest, FinetuneOptionsComeFromTheCommand) {
  const json j = get("/api/options/finetune");
  ASSERT_TRUE(j.is_array());
  std::map<std::string, json> by_name;
  for (const auto& o : j) by_name[o["name"]] = o;
  ASSERT_TRUE(by_name.count("lora-rank"));
  EXPECT_EQ(by_name["lora-rank"]["recipe_key"], "lora_rank");
  EXPECT_EQ(by_name["lora-rank"]["type"], "int");
  EXPECT_EQ(by_name["seq"]["default"], "512");
  EXPECT_EQ(by_name["grad-checkpointing"]["type"], "bool");
  EXPECT_EQ(by_name["data"]["type"], "list");
  EXPECT_FALSE(by_name.count("resume"));  // how a process runs, not what the run is
  EXPECT_FALSE(by_name.count("help"));
}

TEST_F(StudioTest, ModelsUnderTheRoots) {
  const json j = get("/api/models");
  ASSERT_TRUE(j.is_array());
  bool found = false;
  for (const auto& m : j) found = found || m["path"] == fs::canonical(model()).string();
  EXPECT_TRUE(found) << j.dump();
}

TEST_F(StudioTest, UnknownKeysAndIdsAreNamed) {
  int status = 0;
  auto body = run_body(2);
  body["lora_rnak"] = 4;
  json j = post("/api/runs", body, &status);
  EXPECT_EQ(status, 400);
  const std::string e = j["error"];
  EXPECT_TRUE(test::contains(e, "unknown key 'lora_rnak'")) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos);
  body = run_body(2);
  body["max_steps"] = "many";
  j = post("/api/runs", body, &status);
  EXPECT_EQ(status, 400);
  EXPECT_TRUE(test::contains(j["error"], "steps")) << j.dump();
  body = run_body(2);
  body.erase("base_model");
  j = post("/api/runs", body, &status);
  EXPECT_EQ(status, 400);
  EXPECT_TRUE(test::contains(j["error"], "--model")) << j.dump();
  j = post("/api/evaluate", {{"model", model().string()}, {"task", "ppl"}, {"colour", "red"}}, &status);
  EXPECT_EQ(status, 400);
  EXPECT_TRUE(test::contains(j["error"], "'colour'")) << j.dump();
  j = post("/api/evaluate", {{"model", model().string()}, {"task", "ppl"}, {"report", "x.json"}}, &status);
  EXPECT_EQ(status, 400);
  for (const char* path : {"/api/runs/no-such-run", "/api/runs/..", "/api/runs/no-such-run/report", "/api/jobs/j999"}) {
    j = get(path, &status);
    EXPECT_EQ(status, 404) << path;
    EXPECT_TRUE(j.contains("error")) << path;
  }
  post("/api/runs/no-such-run/stop", json::object(), &status);
  EXPECT_EQ(status, 404);
  post("/api/jobs/j999/stop", json::object(), &status);
  EXPECT_EQ(status, 404);
  EXPECT_TRUE(get("/api/runs").empty());
}

TEST_F(StudioTest, EvaluateExportAndChat) {
  int status = 0;
  json ev = post("/api/evaluate", {{"model", model().string()}, {"task", "ppl"}, {"data", demo().string()},
                                   {"limit", 8}, {"device", "cpu"}}, &status);
  ASSERT_EQ(status, 202) << ev.dump();
  json ex = post("/api/exports", {{"model", model().string()}, {"format", "gguf"},
                                  {"out", (scratch() / "model.gguf").string()}}, &status);
  ASSERT_EQ(status, 202) << ex.dump();
  ev = finished_job(ev["id"]);
  ASSERT_EQ(ev["status"], "finished") << ev.dump();
  EXPECT_EQ(ev["result"]["task"], "ppl");
  EXPECT_GT(ev["result"]["tokens"].get<int64_t>(), 0);
  ex = finished_job(ex["id"]);
  ASSERT_EQ(ex["status"], "finished") << ex.dump();
  EXPECT_EQ(ex["result"]["out"], (fs::canonical(scratch()) / "model.gguf").string());
  std::ifstream gguf(scratch() / "model.gguf", std::ios::binary);
  char magic[4] = {};
  gguf.read(magic, 4);
  EXPECT_EQ(std::string(magic, 4), "GGUF");

  // Chat: tokens arrive as events, then done with the stop reason.
  std::string stream;
  auto c = bare();
  auto r = c.Post("/api/chat", auth(),
                  json{{"model", model().string()}, {"prompt", "Once upon a time"}, {"max_new_tokens", 12},
                       {"temperature", 0}, {"device", "cpu"}}.dump(),
                  "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_TRUE(test::contains(r->get_header_value("Content-Type"), "text/event-stream"));
  const std::string& body = r->body;
  EXPECT_TRUE(test::contains(body, "event: token\ndata: {\"text\":")) << body;
  EXPECT_TRUE(test::contains(body, "event: done\ndata: {")) << body;
  EXPECT_TRUE(test::contains(body, "\"stop_reason\":")) << body;
  EXPECT_GE(std::count(body.begin(), body.end(), '\n'), 4);
  // A chat that fails (no such adapter) says why in the stream.
  r = c.Post("/api/chat", auth(), json{{"model", model().string()}, {"adapter", (scratch() / "none").string()},
                                       {"prompt", "x"}, {"device", "cpu"}}.dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_TRUE(test::contains(r->body, "event: error")) << r->body;
  EXPECT_TRUE(test::contains(r->body, "\"stop_reason\":\"error\"")) << r->body;
}

}  // namespace
}  // namespace loft
