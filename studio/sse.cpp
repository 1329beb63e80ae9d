#include "studio/sse.h"

#include <chrono>

#include "studio/context.h"
#include "studio/http_error.h"
#include "studio/jobs.h"

namespace loft::studio {

using Clock = std::chrono::steady_clock;

std::string sse_event(std::string_view name, const nlohmann::json& data) {
  return std::string("event: ") + std::string(name) + "\ndata: " +
         data.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n\n";
}

void stream_events(StudioContext& ctx, httplib::Response& res, std::function<bool(std::string&)> poll,
                   std::function<void(bool)> on_close) {
  if (ctx.streams.fetch_add(1) >= kMaxStreams) {
    ctx.streams.fetch_sub(1);
    throw HttpError(503, "too many event streams open; close another tab");
  }
  struct State {
    std::function<bool(std::string&)> poll;
    std::function<void(bool)> on_close;
    uint64_t seen = 0;
    Clock::time_point last_write = Clock::now();
    bool complete = false;
  };
  auto st = std::make_shared<State>(State{std::move(poll), std::move(on_close)});
  res.set_header("X-Accel-Buffering", "no");
  res.set_chunked_content_provider(
      "text/event-stream",
      [&ctx, st](size_t, httplib::DataSink& sink) {
        if (ctx.stopping) return false;
        std::string out;
        const bool more = st->poll(out);
        if (out.empty() && Clock::now() - st->last_write > std::chrono::seconds(1)) out = ": keep-alive\n\n";
        if (!out.empty()) {
          if (!sink.write(out.data(), out.size())) return false;  // the client went away
          st->last_write = Clock::now();
        }
        if (!more) {
          st->complete = true;
          sink.done();
          return true;
        }
        st->seen = ctx.jobs->wait_change(st->seen, std::chrono::milliseconds(250));
        return true;
      },
      [&ctx, st](bool) {
        ctx.streams.fetch_sub(1);
        if (st->on_close) st->on_close(st->complete);
      });
}

}  // namespace loft::studio
