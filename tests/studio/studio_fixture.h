// A studio served in-process on an ephemeral port for the API tests: roots examples/ (stories260K,
// demo.jsonl) and a scratch folder, a temporary --runs, jobs run by the real loft binary, and an
// httplib client that carries the token and the CSRF header.
#pragma once
#include <gtest/gtest.h>
#include <httplib.h>

#include <cctype>
#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "studio/server.h"
#include "tests/common/test_util.h"

namespace loft::test {

class StudioTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::filesystem::create_directories(scratch());
    studio::StudioOptions o;
    o.port = 0;
    o.roots = {examples().string(), scratch().string()};
    o.runs = runs().string();
    o.loft_binary = test::loft_binary();
    server_ = std::make_unique<studio::Studio>(o);
    server_->start();
    csrf_ = get("/api/session").value("csrf", "");
  }
  void TearDown() override { server_->stop(30); }

  std::filesystem::path examples() const { return source_dir() / "examples"; }
  std::filesystem::path model() const { return examples() / "stories260K"; }
  std::filesystem::path demo() const { return examples() / "demo.jsonl"; }
  std::filesystem::path scratch() const { return tmp_.path() / "scratch"; }
  std::filesystem::path runs() const { return tmp_.path() / "runs"; }
  int port() const { return server_->port(); }
  const std::string& token() const { return server_->token(); }

  // A client with no credentials (tests add headers themselves).
  httplib::Client bare() const {
    httplib::Client c("127.0.0.1", port());
    c.set_read_timeout(120);
    return c;
  }
  httplib::Headers auth(bool with_csrf = true) const {
    httplib::Headers h{{"Authorization", "Bearer " + token()}};
    if (with_csrf) h.emplace("X-CSRF-Token", csrf_);
    return h;
  }
  // GET with the token; the body as JSON (null when not JSON). `status` receives the HTTP status.
  nlohmann::json get(const std::string& path, int* status = nullptr) const {
    auto r = bare().Get(path.c_str(), auth(false));
    if (status) *status = r ? r->status : -1;
    if (!r) return nullptr;
    return nlohmann::json::parse(r->body, nullptr, false);
  }
  nlohmann::json post(const std::string& path, const nlohmann::json& body, int* status = nullptr) const {
    auto r = bare().Post(path.c_str(), auth(), body.dump(), "application/json");
    if (status) *status = r ? r->status : -1;
    if (!r) return nullptr;
    return nlohmann::json::parse(r->body, nullptr, false);
  }
  // Polls `done` every 50 ms for at most `seconds`.
  static bool wait_for(const std::function<bool()>& done, double seconds = 120) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < end) {
      if (done()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return done();
  }
  // A short CPU run's recipe keys on stories260K and the demo data.
  nlohmann::json run_body(int steps) const {
    return {{"base_model", model().string()}, {"datasets", {demo().string()}}, {"max_steps", steps},
            {"micro_batch_size", 4}, {"sequence_len", 128}, {"learning_rate", 5e-3}, {"device", "cpu"},
            {"lora_r", 8}, {"seed", 7}};
  }
  // Percent-encodes a query value.
  static std::string q(const std::string& v) {
    static constexpr char kHex[] = "0123456789ABCDEF";
    std::string out;
    for (unsigned char c : v) {
      if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || c == '/') out += char(c);
      else out += {'%', kHex[c >> 4], kHex[c & 15]};
    }
    return out;
  }
  static std::string q(const std::filesystem::path& p) { return q(p.string()); }
  // Waits for job `id` to end and returns it.
  nlohmann::json finished_job(const std::string& id) const {
    nlohmann::json j;
    wait_for([&] {
      j = get("/api/jobs/" + id);
      return j["status"] != "queued" && j["status"] != "running" && j["status"] != "stopping";
    });
    return j;
  }
  // The run's status, as GET /api/runs/ID says.
  std::string run_status(const std::string& id) const { return get("/api/runs/" + id).value("status", ""); }

  TempDir tmp_;
  std::unique_ptr<studio::Studio> server_;
  std::string csrf_;
};

}  // namespace loft::test
