// Server-sent event streams (text/event-stream): a route hands a poll function that appends the
// events that are new since its last call; the stream ends when it says so, when the client goes
// away (a write fails: a comment line is written every second when nothing else is) or when the
// studio stops. At most kMaxStreams streams are open at once (503 beyond).
#pragma once
#include <httplib.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace loft::studio {

struct StudioContext;

// "event: NAME\ndata: JSON\n\n".
std::string sse_event(std::string_view name, const nlohmann::json& data);

// `poll(out)` appends new events to `out` and returns false once the stream is complete (after its
// last events). It is called about every 250 ms, or sooner when a job changes. `on_close(complete)`
// runs once when the stream ends (complete: poll finished it; false: the client went away or the
// studio stopped).
void stream_events(StudioContext& ctx, httplib::Response& res, std::function<bool(std::string& out)> poll,
                   std::function<void(bool complete)> on_close = {});

}  // namespace loft::studio
