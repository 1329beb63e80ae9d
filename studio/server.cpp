#include "studio/server.h"

#include <csignal>
#include <iostream>

#include "engine/core/error.h"
#include "engine/core/failure.h"
#include "studio/context.h"
#include "studio/gate.h"
#include "studio/http_error.h"
#include "studio/http_util.h"
#include "studio/jobs.h"
#include "studio/routes.h"
#include "studio/security.h"

namespace loft::studio {

namespace {

// httplib's ThreadPool queues every accepted connection without limit; this one makes the
// accepting thread wait while `max_queued` connections already wait for a thread, so the kernel's
// listen backlog (then refusal) bounds the rest.
class BoundedPool : public httplib::TaskQueue {
 public:
  BoundedPool(size_t threads, size_t max_queued) : max_queued_(max_queued) {
    for (size_t i = 0; i < threads; ++i) threads_.emplace_back([this] { work(); });
  }
  void enqueue(std::function<void()> fn) override {
    std::unique_lock lock(mutex_);
    room_.wait(lock, [&] { return jobs_.size() < max_queued_ || shutdown_; });
    jobs_.push_back(std::move(fn));
    ready_.notify_one();
  }
  void shutdown() override {
    {
      std::lock_guard lock(mutex_);
      shutdown_ = true;
    }
    ready_.notify_all();
    room_.notify_all();
    for (std::thread& t : threads_) t.join();
  }

 private:
  void work() {
    for (;;) {
      std::function<void()> fn;
      {
        std::unique_lock lock(mutex_);
        ready_.wait(lock, [&] { return !jobs_.empty() || shutdown_; });
        if (jobs_.empty()) return;  // shut down with nothing left
        fn = std::move(jobs_.front());
        jobs_.pop_front();
        room_.notify_one();
      }
      fn();
    }
  }
  const size_t max_queued_;
  std::vector<std::thread> threads_;
  std::deque<std::function<void()>> jobs_;
  std::mutex mutex_;
  std::condition_variable ready_, room_;
  bool shutdown_ = false;
};

const char* reason(int status) {
  switch (status) {
    case 400: return "bad request";
    case 401: return "missing or wrong token";
    case 403: return "forbidden";
    case 404: return "no such route";
    case 405: return "method not allowed";
    case 413: return "request body larger than 1 MiB";
    case 414: return "request URI too long";
    default: return "request failed";
  }
}

std::string resolved_binary(const std::string& given) {
  std::error_code ec;
  const auto p = std::filesystem::canonical(given.empty() ? "/proc/self/exe" : given, ec);
  if (ec) throw UsageError(cat("cannot find the loft binary ", given.empty() ? "/proc/self/exe" : given));
  return p.string();
}

void configure(StudioContext& ctx) {
  httplib::Server& http = ctx.http;
  const size_t threads = size_t(std::max(ctx.options.threads, kMaxStreams + 4));
  http.new_task_queue = [threads] { return new BoundedPool(threads, 4 * threads); };
  http.set_payload_max_length(kMaxJsonBody);
  http.set_read_timeout(10);
  http.set_write_timeout(10);
  http.set_keep_alive_timeout(5);
  http.set_default_headers({{"X-Content-Type-Options", "nosniff"},
                            {"Referrer-Policy", "no-referrer"},
                            {"X-Frame-Options", "DENY"},
                            {"Cache-Control", "no-store"}});
  http.set_pre_routing_handler([&ctx](const httplib::Request& req, httplib::Response& res) {
    return admit(ctx, req, res) ? httplib::Server::HandlerResponse::Unhandled
                                : httplib::Server::HandlerResponse::Handled;
  });
  http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    try {
      std::rethrow_exception(ep);
    } catch (const HttpError& e) {
      send_json(res, {{"error", e.what()}}, e.status());
    } catch (...) {  // a command's own failure: UsageError is the client's fault, the rest ours
      const FailureReport r = report_current_exception();
      send_json(res, {{"error", r.message}}, r.exit_code == 2 ? 400 : 500);
    }
  });
  http.set_error_handler(httplib::Server::HandlerWithResponse(
      [](const httplib::Request&, httplib::Response& res) {
        if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
        send_json(res, {{"error", reason(res.status)}}, res.status);
        return httplib::Server::HandlerResponse::Handled;
      }));
  add_session_routes(ctx);
  add_file_routes(ctx);
  add_run_routes(ctx);
  add_job_routes(ctx);
  add_chat_routes(ctx);
}

}  // namespace

Studio::Studio(StudioOptions o) {
  if (o.port < 0 || o.port > 65535) throw UsageError(cat("--port ", o.port, ": not a TCP port (0 to 65535)"));
  if (o.roots.empty()) o.roots.push_back(".");
  const std::string token = o.token.empty() ? random_hex(32) : o.token;
  if (token.size() < 16 || token.find_first_of(" \t\r\n;,\"") != std::string::npos)
    throw UsageError("--token: at least 16 characters, without spaces, quotes, ';' or ','");
  PathPolicy paths(o.roots, o.runs);
  ctx_ = std::make_unique<StudioContext>(std::move(o), std::move(paths));
  ctx_->token = token;
  ctx_->csrf = random_hex(32);
  ctx_->loft_binary = resolved_binary(ctx_->options.loft_binary);
  ctx_->jobs = std::make_unique<JobManager>(ctx_->loft_binary);
  // A client that goes away mid-reply must not end the studio (send() on a closed socket).
  std::signal(SIGPIPE, SIG_IGN);
  configure(*ctx_);
  const std::string& host = ctx_->options.host;
  if (ctx_->options.port == 0) {
    ctx_->port = ctx_->http.bind_to_any_port(host);
    if (ctx_->port < 0) throw Error(cat("cannot listen on ", host));
  } else {
    if (!ctx_->http.bind_to_port(host, ctx_->options.port))
      throw Error(cat("cannot listen on ", host, ":", ctx_->options.port, " (in use? try --port)"));
    ctx_->port = ctx_->options.port;
  }
  ctx_->hosts = allowed_hosts(host, ctx_->port);
}

Studio::~Studio() { stop(); }

void Studio::serve() { ctx_->http.listen_after_bind(); }

void Studio::start() {
  // The socket listens already (bound in the constructor): connections wait in its backlog.
  ctx_->thread = std::thread([this] { serve(); });
}

void Studio::interrupt() {
  ctx_->stopping = true;
  ctx_->http.stop();
}

void Studio::stop(double job_grace_s) {
  if (!ctx_ || stopped_) return;
  stopped_ = true;
  interrupt();
  if (ctx_->thread.joinable()) ctx_->thread.join();
  ctx_->jobs->shutdown(job_grace_s);
}

int Studio::port() const { return ctx_->port; }

std::string Studio::url() const {
  std::string host = ctx_->options.host;
  if (host == "0.0.0.0" || host == "::") host = "127.0.0.1";
  else if (host.find(':') != std::string::npos) host = "[" + host + "]";
  return cat("http://", host, ":", ctx_->port, "/?token=", ctx_->token);
}

const std::string& Studio::token() const { return ctx_->token; }

StudioContext& Studio::context() { return *ctx_; }

}  // namespace loft::studio
