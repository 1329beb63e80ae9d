// A parallel loop on host threads for work the GPU waits on (tokenizing an evaluation's prompts,
// scoring logit rows): fn(i) for every i in [0, n), spread over up to `threads` threads (0: the
// machine's hardware threads), each taking the next index from a shared counter. fn must be safe
// to call concurrently for different i. The first exception thrown by any fn is rethrown after
// every thread has stopped.
#pragma once
#include <cstdint>
#include <functional>

namespace loft {

void parallel_for(int64_t n, const std::function<void(int64_t)>& fn, int threads = 0);

}  // namespace loft
