// Training runs from the studio on stories260K (CPU): start one, watch its metrics grow (detail
// and event stream), stop it (a checkpoint of its last step), resume it, finish it; the queue (one
// CPU job at a time); two starts into one folder (never both); and a studio killed with kill -9
// (its run checkpoints and stops; a new studio lists it and resumes it).
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>

#include <fstream>
#include <future>

#include "studio/child_process.h"
#include "tests/common/cli_capture.h"
#include "tests/studio/studio_fixture.h"

namespace loft {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::StudioTest;

size_t metric_count(const json& run) { return run.contains("metrics") ? run["metrics"].size() : 0; }

TEST_F(StudioTest, RunStartsStreamsStopsResumesAndFinishes) {
  int status = 0;
  auto body = run_body(20);
  body["output_dir"] = (runs() / "demo").string();
  const json started = post("/api/runs", body, &status);
  ASSERT_EQ(status, 201) << started.dump();
  EXPECT_EQ(started["id"], "demo");
  const std::string id = started["id"];
  EXPECT_TRUE(fs::exists(runs() / "demo" / "studio-recipe.yaml"));

  // Events: metric lines arrive as the run writes them (read until a few came).
  std::string events;
  auto stream = std::async(std::launch::async, [&] {
    auto c = bare();
    c.Get(("/api/runs/" + id + "/events").c_str(), auth(false), [&](const char* data, size_t n) {
      events.append(data, n);
      return events.find("\"step\":3,") == std::string::npos;  // enough: stop reading
    });
  });
  json run;
  ASSERT_TRUE(wait_for([&] { return metric_count(run = get("/api/runs/" + id)) >= 3; })) << run.dump();
  EXPECT_EQ(run["status"], "running");
  EXPECT_EQ(run["steps"], 20);
  EXPECT_EQ(run["method"], "lora");
  EXPECT_FALSE(run["eta_s"].is_null());
  ASSERT_EQ(stream.wait_for(std::chrono::seconds(60)), std::future_status::ready);
  EXPECT_TRUE(test::contains(events, "event: metric\ndata: {")) << events;
  EXPECT_TRUE(test::contains(events, "event: status\ndata: {\"error\":null,\"status\":\"running\"}")) << events;

  const json stopping = post("/api/runs/" + id + "/stop", json::object(), &status);
  ASSERT_EQ(status, 202) << stopping.dump();
  ASSERT_TRUE(wait_for([&] { return run_status(id) == "stopped"; })) << get("/api/runs/" + id).dump();
  run = get("/api/runs/" + id);
  const int64_t step = run["step"];
  ASSERT_LT(step, 20);
  EXPECT_TRUE(fs::exists(runs() / id / "checkpoints" / ("step-" + std::to_string(step))));
  EXPECT_TRUE(test::contains(run["log_tail"], "stopped at step " + std::to_string(step))) << run["log_tail"];
  post("/api/runs/" + id + "/stop", json::object(), &status);
  EXPECT_EQ(status, 409);  // not running any more

  const json resumed = post("/api/runs/" + id + "/resume", json::object(), &status);
  ASSERT_EQ(status, 202) << resumed.dump();
  ASSERT_TRUE(wait_for([&] { return run_status(id) == "finished"; }, 300)) << get("/api/runs/" + id).dump();
  run = get("/api/runs/" + id);
  ASSERT_EQ(metric_count(run), 20u);
  for (size_t i = 0; i < 20; ++i) EXPECT_EQ(run["metrics"][i]["step"], i + 1);
  EXPECT_TRUE(fs::exists(runs() / id / "adapter" / "adapter_config.json"));
  auto r = bare().Get(("/api/runs/" + id + "/report").c_str(), auth(false));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_TRUE(test::contains(r->get_header_value("Content-Type"), "text/html"));
  EXPECT_TRUE(test::contains(r->get_header_value("Content-Security-Policy"), "sandbox"));
  const json list = get("/api/runs");
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0]["status"], "finished");
  EXPECT_EQ(list[0]["step"], 20);
}

TEST_F(StudioTest, OneFolderNeverTakesTwoRunsAndTheCpuQueues) {
  auto body = run_body(6);
  body["output_dir"] = (runs() / "same").string();
  // Two starts into one folder at the same moment: exactly one is accepted.
  std::vector<std::future<int>> starts;
  for (int i = 0; i < 2; ++i)
    starts.push_back(std::async(std::launch::async, [&] {
      int status = 0;
      post("/api/runs", body, &status);
      return status;
    }));
  std::vector<int> codes{starts[0].get(), starts[1].get()};
  std::sort(codes.begin(), codes.end());
  EXPECT_EQ(codes, (std::vector<int>{201, 409}));
  // Another CPU run waits for the first.
  auto other = run_body(3);
  other["output_dir"] = (runs() / "other").string();
  int status = 0;
  const json queued = post("/api/runs", other, &status);
  ASSERT_EQ(status, 201) << queued.dump();
  EXPECT_EQ(queued["status"], "queued");
  ASSERT_TRUE(wait_for([&] { return run_status("same") == "finished" && run_status("other") == "finished"; }, 300))
      << get("/api/runs").dump();
  EXPECT_EQ(test::read_jsonl(runs() / "same" / "metrics.jsonl").size(), 6u);
  // A finished folder is not started over.
  const json again = post("/api/runs", body, &status);
  EXPECT_EQ(status, 409) << again.dump();
  EXPECT_TRUE(test::contains(again["error"], "already holds a run"));
  EXPECT_EQ(test::read_jsonl(runs() / "same" / "metrics.jsonl").size(), 6u);
  // A run the CLI made in --runs is listed beside the studio's.
  const auto cli = test::run_cli_captured({"finetune", "--model", model().string(), "--data", demo().string(), "--out",
                                           (runs() / "cli").string(), "--steps", "2", "--batch", "2", "--seq", "256",
                                           "--device", "cpu"});
  ASSERT_EQ(cli.code, 0) << cli.err;
  const json list = get("/api/runs");
  ASSERT_EQ(list.size(), 3u) << list.dump();
  for (const auto& r : list) EXPECT_EQ(r["status"], "finished") << r.dump();
}

TEST_F(StudioTest, AFailingRunSaysWhyAndTheStudioGoesOn) {
  auto body = run_body(3);
  body["datasets"] = {(scratch() / "missing.jsonl").string()};
  body["output_dir"] = (runs() / "bad").string();
  int status = 0;
  post("/api/runs", body, &status);
  ASSERT_EQ(status, 201);
  ASSERT_TRUE(wait_for([&] { return run_status("bad") == "failed"; })) << get("/api/runs/bad").dump();
  const json run = get("/api/runs/bad");
  EXPECT_TRUE(test::contains(run["error"], "exit code")) << run.dump();
  EXPECT_TRUE(test::contains(run["error"], "missing.jsonl")) << run.dump();
  EXPECT_EQ(get("/api/health")["ok"], true);
}

// The real binary, killed with SIGKILL mid-run: its training job gets SIGHUP from the kernel
// (PR_SET_PDEATHSIG), checkpoints and stops; the folder is consistent and this test's studio
// lists it as stopped and resumes it to the end.
TEST_F(StudioTest, KilledStudioLeavesRunsConsistent) {
  const studio::ChildProcess c = studio::spawn_child(
      {test::loft_binary(), "studio", "--port", "0", "--root", examples().string(), "--runs", runs().string()});
  std::string out;
  char buf[4096];
  while (out.find("?token=") == std::string::npos || out.find('\n', out.find("?token=")) == std::string::npos) {
    const ssize_t n = read(c.out_fd, buf, sizeof buf);
    ASSERT_GT(n, 0) << out;
    out.append(buf, size_t(n));
  }
  const size_t at = out.find("http://127.0.0.1:") + 17;
  const int port = std::stoi(out.substr(at));
  const std::string token = out.substr(out.find("?token=") + 7, 64);
  httplib::Client other("127.0.0.1", port);
  const httplib::Headers h{{"Authorization", "Bearer " + token}};
  const json session = json::parse(other.Get("/api/session", h)->body);
  httplib::Headers post_h = h;
  post_h.emplace("X-CSRF-Token", session["csrf"]);
  auto body = run_body(200);
  body["output_dir"] = (runs() / "orphan").string();
  body["save_every"] = 1000;
  auto r = other.Post("/api/runs", post_h, body.dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 201) << r->body;
  ASSERT_TRUE(wait_for([&] { return test::read_jsonl(runs() / "orphan" / "metrics.jsonl").size() >= 2; }));
  kill(c.pid, SIGKILL);
  int status = 0;
  waitpid(c.pid, &status, 0);
  close(c.out_fd);
  close(c.err_fd);
  ASSERT_TRUE(wait_for([&] { return fs::exists(runs() / "orphan" / "adapter" / "adapter_config.json"); }, 120));
  // The job still holds the run's lock while it finishes after the adapter (the run lists as
  // running until then; a busy machine, ctest -j2, made that window seconds long).
  ASSERT_TRUE(wait_for([&] { return run_status("orphan") != "running"; }));
  const json run = get("/api/runs/orphan");
  EXPECT_EQ(run["status"], "stopped") << run.dump();
  const int64_t step = run["step"];
  EXPECT_TRUE(fs::exists(runs() / "orphan" / "checkpoints" / ("step-" + std::to_string(step))));
  for (const auto& e : fs::recursive_directory_iterator(runs() / "orphan"))
    EXPECT_FALSE(e.path().filename().string().starts_with(".tmp")) << e.path();
  int code = 0;
  post("/api/runs/orphan/resume", json::object(), &code);
  ASSERT_EQ(code, 202);
  ASSERT_TRUE(wait_for([&] { return get("/api/runs/orphan")["step"].get<int64_t>() > step; }));  // trains on
  post("/api/runs/orphan/stop", json::object(), &code);
  EXPECT_EQ(code, 202);
  ASSERT_TRUE(wait_for([&] { return run_status("orphan") == "stopped"; }));
}

}  // namespace
}  // namespace loft

namespace loft {
namespace {

using nlohmann::json;
using test::StudioTest;

// POST /api/runs/plan: what the run would be (`loft finetune --plan`), checked as a start is
// (unknown keys 400, paths outside the roots 403), and nothing started or written.
TEST_F(StudioTest, PlanSaysWhatARunWouldBeAndStartsNothing) {
  auto body = run_body(3);
  body["output_dir"] = (runs() / "planned").string();
  int status = 0;
  const json plan = post("/api/runs/plan", body, &status);
  ASSERT_EQ(status, 200) << plan.dump();
  EXPECT_EQ(plan["method"], "lora");
  EXPECT_EQ(plan["lora_rank"], 8);
  EXPECT_EQ(plan["lr"], 5e-3);
  EXPECT_EQ(plan["micro_batch"], 4);
  EXPECT_EQ(plan["seq"], 128);
  EXPECT_EQ(plan["steps"], 3);
  EXPECT_EQ(plan["device"], "cpu");
  EXPECT_EQ(plan["fits"], true);
  EXPECT_FALSE(std::filesystem::exists(runs() / "planned"));
  EXPECT_TRUE(get("/api/jobs").empty());
  for (const auto& entry : std::filesystem::directory_iterator(runs()))
    ADD_FAILURE() << "left behind: " << entry.path();
  body["bogus_key"] = 1;
  post("/api/runs/plan", body, &status);
  EXPECT_EQ(status, 400);
  body.erase("bogus_key");
  body["datasets"] = {"/etc/passwd"};
  post("/api/runs/plan", body, &status);
  EXPECT_EQ(status, 403);
  body = run_body(3);
  body["micro_batch_size"] = 3;
  body["batch"] = 8;
  const json bad = post("/api/runs/plan", body, &status);
  EXPECT_EQ(status, 400) << bad.dump();
}

}  // namespace
}  // namespace loft
