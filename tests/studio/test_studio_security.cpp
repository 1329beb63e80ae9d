// The studio's access rules: token (cookie, bearer, ?token= redirect), Host and Origin (DNS
// rebinding), CSRF on state-changing requests, bounded bodies, and paths only under the roots
// and --runs (.., absolute paths, symlinks pointing out), checked after resolving.
#include <gtest/gtest.h>

#include "studio/http_error.h"
#include "studio/paths.h"
#include "studio/security.h"
#include "tests/common/cli_expect.h"
#include "tests/studio/studio_fixture.h"

namespace loft {
namespace {

namespace fs = std::filesystem;
using test::StudioTest;

TEST(StudioSecurity, TokensAndHeaders) {
  const std::string a = studio::random_hex(32), b = studio::random_hex(32);
  EXPECT_EQ(a.size(), 64u);
  EXPECT_NE(a, b);
  EXPECT_TRUE(studio::same_secret(a, a));
  EXPECT_FALSE(studio::same_secret(a, b));
  EXPECT_FALSE(studio::same_secret(a, a.substr(1)));
  EXPECT_EQ(studio::cookie_value("x=1; loft_token=abc ; y=2", "loft_token"), "abc");
  EXPECT_EQ(studio::cookie_value("xloft_token=abc", "loft_token"), std::nullopt);
  EXPECT_EQ(studio::bearer_token("Bearer t0k"), "t0k");
  EXPECT_EQ(studio::bearer_token("Basic t0k"), std::nullopt);
  for (const char* h : {"127.0.0.1", "127.1.2.3", "localhost", "::1", "[::1]"}) EXPECT_TRUE(studio::is_loopback_host(h)) << h;
  for (const char* h : {"0.0.0.0", "10.0.0.1", "example.com", "::"}) EXPECT_FALSE(studio::is_loopback_host(h)) << h;
  const auto hosts = studio::allowed_hosts("127.0.0.1", 7860);
  EXPECT_TRUE(studio::host_allowed("LOCALHOST:7860", hosts));
  EXPECT_TRUE(studio::host_allowed("[::1]:7860", hosts));
  EXPECT_FALSE(studio::host_allowed("localhost:7861", hosts));
  EXPECT_FALSE(studio::host_allowed("evil.example:7860", hosts));
  EXPECT_TRUE(studio::origin_allowed("http://127.0.0.1:7860", hosts));
  EXPECT_FALSE(studio::origin_allowed("https://127.0.0.1:7860", hosts));
  EXPECT_FALSE(studio::origin_allowed("null", hosts));
  EXPECT_TRUE(studio::host_allowed("10.1.2.3:80", studio::allowed_hosts("10.1.2.3", 80)));
}

int refusal(const std::function<void()>& f) {
  try {
    f();
  } catch (const studio::HttpError& e) {
    return e.status();
  }
  return 0;
}

TEST(StudioSecurity, PathsStayUnderTheRoots) {
  test::TempDir t;
  fs::create_directories(t / "root" / "models");
  fs::create_directories(t / "root2");
  fs::create_directories(t / "outside");
  fs::create_directories(t / "runs");
  std::ofstream(t / "outside" / "secret.txt") << "x";
  fs::create_directory_symlink(t / "outside", t / "root" / "link-out");
  fs::create_directory_symlink(t / "root" / "models", t / "root" / "link-in");
  const studio::PathPolicy p({(t / "root").string()}, (t / "runs").string());
  EXPECT_EQ(p.resolve((t / "root" / "models").string()), fs::canonical(t / "root" / "models"));
  EXPECT_EQ(p.resolve((t / "root" / "link-in").string()), fs::canonical(t / "root" / "models"));
  EXPECT_EQ(p.resolve((t / "root" / "new" / "file").string()), fs::canonical(t / "root") / "new" / "file");
  EXPECT_EQ(p.resolve_in_runs((t / "runs" / "a").string()), fs::canonical(t / "runs") / "a");
  EXPECT_EQ(refusal([&] { p.resolve((t / "root" / ".." / "outside" / "secret.txt").string()); }), 403);
  EXPECT_EQ(refusal([&] { p.resolve("../../etc/passwd"); }), 403);
  EXPECT_EQ(refusal([&] { p.resolve("/etc/passwd"); }), 403);
  EXPECT_EQ(refusal([&] { p.resolve((t / "root" / "link-out" / "secret.txt").string()); }), 403);
  EXPECT_EQ(refusal([&] { p.resolve((t / "root2").string()); }), 403);  // a sibling sharing the prefix
  EXPECT_EQ(refusal([&] { p.resolve_in_runs((t / "root" / "models").string()); }), 403);
  EXPECT_EQ(refusal([&] { p.resolve(""); }), 400);
  EXPECT_EQ(refusal([&] { p.resolve(std::string("a\0b", 3)); }), 400);
  EXPECT_THROW(studio::PathPolicy({(t / "missing").string()}, (t / "runs").string()), UsageError);
}

TEST_F(StudioTest, HealthNeedsNoTokenEverythingElseDoes) {
  auto c = bare();
  auto r = c.Get("/api/health");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(nlohmann::json::parse(r->body)["ok"], true);
  r = c.Get("/");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_TRUE(test::contains(r->get_header_value("Content-Security-Policy"), "script-src 'self'"));
  for (const char* path : {"/api/session", "/api/runs", "/api/jobs", "/static/chart.min.js", "/api/models"}) {
    r = c.Get(path);
    ASSERT_TRUE(r) << path;
    EXPECT_EQ(r->status, 401) << path;
    EXPECT_TRUE(nlohmann::json::parse(r->body).contains("error")) << path;
    r = c.Get(path, {{"Authorization", "Bearer wrong-token-of-some-length"}});
    EXPECT_EQ(r->status, 401) << path;
    r = c.Get(path, {{"Cookie", "loft_token=" + token() + "x"}});
    EXPECT_EQ(r->status, 401) << path;
  }
  r = c.Get("/api/session", {{"Cookie", "loft_token=" + token()}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  const auto s = nlohmann::json::parse(r->body);
  EXPECT_EQ(s["csrf"].get<std::string>().size(), 64u);
  EXPECT_EQ(s["runs_dir"], fs::canonical(runs()).string());
  EXPECT_EQ(s["roots"].size(), 2u);
}

TEST_F(StudioTest, TokenInTheUrlSetsTheCookieAndRedirects) {
  auto c = bare();
  auto r = c.Get(("/?token=" + token()).c_str());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 302);
  EXPECT_EQ(r->get_header_value("Location"), "/");
  const std::string cookie = r->get_header_value("Set-Cookie");
  EXPECT_TRUE(test::contains(cookie, "loft_token=" + token()));
  EXPECT_TRUE(test::contains(cookie, "HttpOnly"));
  EXPECT_TRUE(test::contains(cookie, "SameSite=Strict"));
  r = c.Get("/?token=not-the-token");
  EXPECT_EQ(r->status, 401);
  // The page's files are served, Chart.js among them.
  r = c.Get("/static/chart.min.js", {{"Cookie", "loft_token=" + token()}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_TRUE(test::contains(r->body.substr(0, 200), "Chart.js v3.9.1"));
  EXPECT_TRUE(test::contains(r->get_header_value("Content-Type"), "javascript"));
  r = c.Get("/static/no-such-file.js", {{"Cookie", "loft_token=" + token()}});
  EXPECT_EQ(r->status, 404);
}

// Every route the server registers (studio/routes_*.cpp), with an id where it takes one: without
// the token each is refused (401, nothing run), and with the token but a foreign Host or Origin
// too (403). The page shell "/" and /api/health need no token, but the Host check holds for them.
TEST_F(StudioTest, EveryEndpointIsGated) {
  const std::vector<std::string> gets = {"/api/data/inspect", "/api/fs", "/api/info", "/api/jobs", "/api/jobs/j1",
                                         "/api/models", "/api/options/finetune", "/api/runs", "/api/runs/x",
                                         "/api/runs/x/events", "/api/runs/x/report", "/api/session",
                                         "/static/app.js"};
  const std::vector<std::string> posts = {"/api/chat", "/api/evaluate", "/api/exports", "/api/jobs/j1/stop",
                                          "/api/runs", "/api/runs/plan", "/api/runs/x/resume", "/api/runs/x/stop"};
  auto c = bare();
  const std::string bearer = "Bearer " + token();
  const std::string here = "127.0.0.1:" + std::to_string(port());
  const httplib::Headers none, foreign_host{{"Authorization", bearer}, {"Host", "evil.example:" + std::to_string(port())}},
      foreign_origin{{"Authorization", bearer}, {"Origin", "http://evil.example"}};
  for (const std::string& path : gets) {
    EXPECT_EQ(c.Get(path, none)->status, 401) << path;
    EXPECT_EQ(c.Get(path, foreign_host)->status, 403) << path;
    EXPECT_EQ(c.Get(path, foreign_origin)->status, 403) << path;
  }
  const std::string body = "{}";
  for (const std::string& path : posts) {
    EXPECT_EQ(c.Post(path, none, body, "application/json")->status, 401) << path;
    EXPECT_EQ(c.Post(path, foreign_host, body, "application/json")->status, 403) << path;
    EXPECT_EQ(c.Post(path, foreign_origin, body, "application/json")->status, 403) << path;
  }
  for (const char* path : {"/", "/api/health"}) {
    EXPECT_EQ(c.Get(path, httplib::Headers{{"Host", "evil.example"}})->status, 403) << path;
    EXPECT_EQ(c.Get(path, httplib::Headers{{"Host", here}})->status, 200) << path;
  }
  EXPECT_TRUE(get("/api/runs").empty()) << "no refused request started a run";
  EXPECT_TRUE(get("/api/jobs").empty()) << "no refused request started a job";
}

TEST_F(StudioTest, HostAndOriginAreChecked) {
  auto c = bare();
  auto r = c.Get("/api/health", {{"Host", "evil.example"}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 403);
  EXPECT_TRUE(test::contains(r->body, "evil.example"));
  r = c.Get("/api/session", {{"Host", "evil.example:" + std::to_string(port())}, {"Authorization", "Bearer " + token()}});
  EXPECT_EQ(r->status, 403);
  r = c.Get("/api/session", {{"Host", "localhost:" + std::to_string(port())}, {"Authorization", "Bearer " + token()}});
  EXPECT_EQ(r->status, 200);
  r = c.Get("/api/session", {{"Origin", "http://evil.example"}, {"Authorization", "Bearer " + token()}});
  EXPECT_EQ(r->status, 403);
  r = c.Get("/api/session",
            {{"Origin", "http://127.0.0.1:" + std::to_string(port())}, {"Authorization", "Bearer " + token()}});
  EXPECT_EQ(r->status, 200);
}

TEST_F(StudioTest, StateChangesNeedTheCsrfToken) {
  auto c = bare();
  auto r = c.Post("/api/runs", auth(false), run_body(2).dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 403);
  EXPECT_TRUE(test::contains(r->body, "X-CSRF-Token"));
  auto h = auth(false);
  h.emplace("X-CSRF-Token", "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef");
  r = c.Post("/api/runs", h, run_body(2).dump(), "application/json");
  EXPECT_EQ(r->status, 403);
  EXPECT_TRUE(get("/api/runs").empty());  // nothing was started
}

TEST_F(StudioTest, BadBodiesAreRefused) {
  auto c = bare();
  for (const char* path : {"/api/runs", "/api/runs/plan"}) {  // both read a run's recipe keys
    auto r = c.Post(path, auth(), "{\"base_model\": ", "application/json");
    ASSERT_TRUE(r) << path;
    EXPECT_EQ(r->status, 400) << path;
    EXPECT_TRUE(test::contains(nlohmann::json::parse(r->body)["error"], "not valid JSON")) << path;
    r = c.Post(path, auth(), "[1, 2]", "application/json");
    EXPECT_EQ(r->status, 400) << path;
    r = c.Post(path, auth(), std::string(200, '[') + std::string(200, ']'), "application/json");
    EXPECT_EQ(r->status, 400) << path;
    r = c.Post(path, auth(), "{}", "text/plain");
    EXPECT_EQ(r->status, 415) << path;
    const std::string big = "{\"x\": \"" + std::string((1 << 20) + 16, 'a') + "\"}";
    r = c.Post(path, auth(), big, "application/json");
    ASSERT_TRUE(r) << path;
    EXPECT_EQ(r->status, 413) << path;
    EXPECT_TRUE(nlohmann::json::parse(r->body).contains("error")) << path;
  }
}

TEST_F(StudioTest, FilesOnlyUnderTheRoots) {
  fs::create_directories(tmp_ / "outside");
  std::ofstream(tmp_ / "outside" / "secret.txt") << "secret";
  fs::create_directory_symlink(tmp_ / "outside", scratch() / "escape");
  int status = 0;
  const auto listing = get("/api/fs?path=" + q(examples()), &status);
  ASSERT_EQ(status, 200) << listing.dump();
  bool saw_model = false;
  for (const auto& e : listing["entries"])
    if (e["name"] == "stories260K") saw_model = e["is_model"] == true && e["type"] == "dir";
  EXPECT_TRUE(saw_model) << listing.dump();
  for (const std::string& bad : {std::string("../../etc/passwd"), std::string("/etc"), (scratch() / "escape").string(),
                                (scratch() / "escape" / "secret.txt").string(), (examples() / ".." / "README.md").string()}) {
    const auto j = get("/api/fs?path=" + q(bad), &status);
    EXPECT_EQ(status, 403) << bad;
    EXPECT_TRUE(j.contains("error")) << bad;
  }
  get("/api/info?model=" + q(scratch() / "escape"), &status);
  EXPECT_EQ(status, 403);
  // A run may read only under the roots, and write only under --runs.
  auto body = run_body(2);
  body["datasets"] = {(scratch() / "escape" / "secret.txt").string()};
  auto j = post("/api/runs", body, &status);
  EXPECT_EQ(status, 403) << j.dump();
  body = run_body(2);
  body["output_dir"] = (scratch() / "run").string();
  j = post("/api/runs", body, &status);
  EXPECT_EQ(status, 403) << j.dump();
  j = post("/api/exports", {{"model", model().string()}, {"format", "bf16"}, {"out", "/tmp/loft-escape"}}, &status);
  EXPECT_EQ(status, 403) << j.dump();
}

// The same checks from the command line: one line naming the option, exit 2, nothing served.
TEST(StudioSecurity, BadOptionValuesAreOneLineUsageErrors) {
  test::TempDir t;
  const std::vector<std::string> base{"studio", "--runs", (t / "runs").string(), "--root", t.path().string()};
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--port", "-1"}, "--port"}, {{"--port", "70000"}, "--port"}, {{"--port", "abc"}, "--port"},
      {{"--port", "nan"}, "--port"}, {{"--token", "short"}, "--token"}, {{"--root", (t / "missing").string()}, "missing"}};
  for (const auto& [extra, needle] : cases) {
    std::vector<std::string> args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    test::expect_one_line(test::run_cli_captured(args), 2, needle);
  }
}

TEST(StudioSecurity, OptionsAreChecked) {
  test::TempDir t;
  studio::StudioOptions o;
  o.port = 0;
  o.runs = (t / "runs").string();
  o.roots = {t.path().string()};
  o.token = "short";
  EXPECT_THROW(studio::Studio{o}, UsageError);  // a guessable token
  o.token = "with space 0123456789";
  EXPECT_THROW(studio::Studio{o}, UsageError);
  o.token.clear();
  o.port = 70000;
  EXPECT_THROW(studio::Studio{o}, UsageError);
  o.port = 0;
  o.roots = {(t / "missing").string()};
  EXPECT_THROW(studio::Studio{o}, UsageError);
  o.roots = {t.path().string()};
  studio::Studio s(o);  // no --token: a random one
  EXPECT_EQ(s.token().size(), 64u);
  EXPECT_TRUE(test::contains(s.url(), "http://127.0.0.1:" + std::to_string(s.port()) + "/?token=" + s.token()));
}

TEST_F(StudioTest, HeadersAreBounded) {
  auto c = bare();
  auto h = auth(false);
  h.emplace("X-Padding", std::string(16 << 10, 'a'));
  auto r = c.Get("/api/session", h);
  EXPECT_TRUE(!r || r->status >= 400);  // refused (or the connection closed)
  EXPECT_EQ(get("/api/health")["ok"], true);
}

}  // namespace
}  // namespace loft
