#include "engine/device/profile.h"

#include <chrono>
#include <cstring>
#include <set>
#include <vector>

#include "engine/core/error.h"
#include "engine/device/memory.h"
#ifdef LOFT_WITH_CUDA
#include "engine/device/cuda_context.h"
#endif

namespace loft::prof {

namespace {

// What runs between two marks: a part, and the op inside it (null: none).
struct Frame {
  Part part;
  const char* op = nullptr;
};

// A boundary between two intervals: what ran up to it. On CUDA the time is read from events after
// the final synchronisation; on the CPU directly from the clock.
struct Mark {
  Frame before;
  double cpu_s = 0;
#ifdef LOFT_WITH_CUDA
  cudaEvent_t event = nullptr;
#endif
};

struct State {
  bool on = false, ops = false;
  Device device;
  std::vector<Frame> stack;
  std::vector<Mark> marks;
  std::map<std::string, OpTime> op_times;  // the last stop()'s, when started with ops
  std::set<std::string> labels;            // intern()'s, whose addresses frames and marks hold
#ifdef LOFT_WITH_CUDA
  std::vector<cudaEvent_t> pool;  // events reused across start()/stop()
  size_t used = 0;
#endif
};

State& state() {
  static State s;
  return s;
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void mark(Frame before) {
  State& s = state();
  Mark m{before};
  if (s.device.is_cuda()) {
#ifdef LOFT_WITH_CUDA
    if (s.used == s.pool.size()) {
      cudaEvent_t e;
      LOFT_CUDA_CHECK(cudaEventCreate(&e));
      s.pool.push_back(e);
    }
    m.event = s.pool[s.used++];
    LOFT_CUDA_CHECK(cudaEventRecord(m.event, cuda::stream(s.device.index)));
#endif
  } else {
    m.cpu_s = now_s();
  }
  s.marks.push_back(m);
}

}  // namespace

const char* part_name(Part p) {
  static const char* names[kParts] = {"frozen_gemm", "adapter",   "quant_hadamard",
                                      "attention",   "elementwise", "loss_head",
                                      "optimizer",   "falqon_update", "other"};
  return names[int(p)];
}

namespace {

// A boundary, then `f` runs until the matching pop().
void push(Frame f) {
  State& s = state();
  mark(s.stack.back());
  s.stack.push_back(f);
}

void pop() {
  State& s = state();
  mark(s.stack.back());
  s.stack.pop_back();
}

// op_times()' key: "part/op", "part/-" outside any op.
std::string op_key(Part part, const char* op) { return cat(part_name(part), "/", op ? op : "-"); }

}  // namespace

bool active() { return state().on; }
bool active_ops() { return state().on && state().ops; }

void start(Device device, bool ops) {
  State& s = state();
  LOFT_CHECK(!s.on, "profiler already started");
  synchronize(device);
  s.on = true;
  s.ops = ops;
  s.device = device;
  s.stack = {{Part::Other}};
  s.marks.clear();
  s.op_times.clear();
  s.labels.clear();
#ifdef LOFT_WITH_CUDA
  s.used = 0;
#endif
  mark({Part::Other});  // the origin; its `before` is unused
}

const std::map<std::string, OpTime>& op_times() { return state().op_times; }

std::array<double, kParts> stop() {
  State& s = state();
  LOFT_CHECK(s.on, "profiler not started");
  mark({Part::Other});
  synchronize(s.device);
  std::array<double, kParts> out{};
  for (size_t i = 1; i < s.marks.size(); ++i) {
    double dt = 0;
    if (s.device.is_cuda()) {
#ifdef LOFT_WITH_CUDA
      float ms = 0;
      LOFT_CUDA_CHECK(cudaEventElapsedTime(&ms, s.marks[i - 1].event, s.marks[i].event));
      dt = ms / 1e3;
#endif
    } else {
      dt = s.marks[i].cpu_s - s.marks[i - 1].cpu_s;
    }
    const Frame& f = s.marks[i].before;
    out[int(f.part)] += dt;
    if (s.ops) s.op_times[op_key(f.part, f.op)].seconds += dt;
  }
  s.on = false;
  s.marks.clear();
  s.stack.clear();
  return out;
}

void Scope::enter(Part p) { push({p}); }

void Scope::leave() { pop(); }

const char* intern(const std::string& label) { return state().labels.insert(label).first->c_str(); }

bool OpScope::refined(const char* op) {
  const char* current = state().stack.back().op;
  if (!current) return false;
  const size_t n = std::strlen(op);
  return std::strncmp(current, op, n) == 0 && current[n] == ' ';
}

void OpScope::enter(const char* op) {
  const Part part = state().stack.back().part;
  push({part, op});
  ++state().op_times[op_key(part, op)].calls;
}

void OpScope::leave() { pop(); }

}  // namespace loft::prof
