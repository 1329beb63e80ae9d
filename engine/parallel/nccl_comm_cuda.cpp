// Communicator on NCCL. A non-blocking communicator (make_communicator) may answer ncclInProgress
// from init, a collective or ncclGroupEnd: the work is then not yet queued, so every such answer
// is settled (ncclCommGetAsyncError polled to success) before the stream may be trusted. Every
// poll has a deadline; past it, or on an error, the communicator is aborted (ncclCommAbort also
// stops NCCL kernels spinning on a dead peer) and the Error names rank, world size and cause.
// NCCL itself is loaded at first use (nccl_api.h).
//
// Streams: the collectives run on the communicator's own stream (highest priority: NCCL's few
// blocks start as soon as an SM frees instead of queueing behind a long GEMM grid), after an event
// of the compute stream recorded at the call, so a bucket's transfer overlaps the backward queued
// after it. The compute stream waits for an event of that stream in wait(), so polling the
// compute stream alone bounds both.
//
// The watchdog (a thread per communicator) bounds what wait() cannot see: each collective is
// followed on side_ by an event, and one not done within the timeout of its queueing aborts the
// communicator. A rank whose host is blocked behind NCCL's kernels (a loss read after a layer's
// all-gather that a dead peer never serves: --shard-backbone) then comes free and fails at its
// next call, naming the collective.
#ifdef LOFT_WITH_NCCL
#include "engine/parallel/nccl_api.h"

#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <sstream>
#include <thread>

#include "engine/device/cuda_context.h"
#include "engine/device/cuda_memory.h"
#include "engine/parallel/nccl_comm.h"

namespace loft {

static_assert(sizeof(ncclUniqueId) == std::tuple_size_v<NcclUniqueId>, "NCCL unique id size");

namespace {

using Clock = std::chrono::steady_clock;

std::string seconds(std::chrono::milliseconds t) {
  std::ostringstream os;
  os << double(t.count()) / 1000.0 << " s";
  return os.str();
}

std::string nccl_cause(ncclResult_t r, ncclComm_t comm) {
  std::string s = cat("NCCL: ", nccl_api().ncclGetErrorString(r));
  const char* last = nccl_api().ncclGetLastError(comm);
  if (last && *last) s += cat("; ", last);
  return s;
}

// Polls between short sleeps: the first millisecond only yields (a collective usually ends in it),
// then sleeps 100 µs so a long wait costs no CPU core.
void pause_since(Clock::time_point start) {
  if (Clock::now() - start < std::chrono::milliseconds(1))
    std::this_thread::yield();
  else
    std::this_thread::sleep_for(std::chrono::microseconds(100));
}

// Polls a communicator that answered ncclInProgress until it settles or `deadline` passes
// (returned as ncclInProgress).
ncclResult_t settle(ncclComm_t comm, ncclResult_t r, Clock::time_point deadline) {
  const auto start = Clock::now();
  while (r == ncclInProgress) {
    if (Clock::now() >= deadline) return ncclInProgress;
    pause_since(start);
    if (nccl_api().ncclCommGetAsyncError(comm, &r) != ncclSuccess) return ncclInternalError;
  }
  return r;
}

// Why rank `rank` of `world` on cuda:`device` could not join its job; `r` is what settle answered
// (ncclInProgress: the deadline passed).
std::string join_failure(int rank, int world, int device, ncclResult_t r, ncclComm_t comm,
                         std::chrono::milliseconds timeout) {
  return cat("rank ", rank, " of ", world, " on cuda:", device, ": ",
             r == ncclInProgress
                 ? cat("the other ranks did not join within ", seconds(timeout))
                 : cat("NCCL could not set up the communicator (", nccl_cause(r, comm), ")"));
}

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(ncclComm_t comm, int device, int rank, int world,
                   std::chrono::milliseconds timeout)
      : comm_(comm), dev_(device), rank_(rank), world_(world), timeout_(timeout) {
    cuda::set_device(dev_);
    int least = 0, greatest = 0;
    LOFT_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    LOFT_CUDA_CHECK(cudaStreamCreateWithPriority(&side_, cudaStreamNonBlocking, greatest));
    LOFT_CUDA_CHECK(cudaEventCreateWithFlags(&computed_, cudaEventDisableTiming));
    LOFT_CUDA_CHECK(cudaEventCreateWithFlags(&reduced_, cudaEventDisableTiming));
    for (cudaEvent_t& e : gathered_) LOFT_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    watchdog_ = std::thread([this] { watch(); });
  }

  ~NcclCommunicator() override {
    {
      std::lock_guard<std::mutex> lk(mu_);
      stop_ = true;
    }
    wake_.notify_all();
    watchdog_.join();
    if (comm_) {
      try {
        wait(timeout_);  // no collective may outlive its communicator; bounded, aborts on failure
      } catch (...) {
      }
    }
    cuda::set_device(dev_);  // (not cudaSetDevice: set_device caches the thread's device)
    if (comm_) nccl_api().ncclCommDestroy(comm_);
    cudaStreamSynchronize(side_);  // ends at once: finished, or its kernels stopped by the abort
    cudaEventDestroy(computed_);
    cudaEventDestroy(reduced_);
    for (cudaEvent_t e : gathered_) cudaEventDestroy(e);
    for (const Pending& p : pending_) cudaEventDestroy(p.done);
    for (cudaEvent_t e : spare_) cudaEventDestroy(e);
    cudaStreamDestroy(side_);
  }

  int rank() const override { return rank_; }
  int world_size() const override { return world_; }
  Device device() const override { return Device::cuda(dev_); }

  void all_reduce_sum(std::span<Tensor* const> tensors) override {
    check_live();
    for (const Tensor* t : tensors) {
      LOFT_CHECK(t->dtype() == DType::F32 && t->device() == device(), where(),
                 ": all_reduce_sum takes F32 tensors on ", device().str(), ", got ",
                 dtype_name(t->dtype()), " on ", t->device().str());
    }
    // After what the compute stream holds now (the gradients' last writes), beside what follows.
    queue_after_compute("all-reduce", [&] { return queue_all_reduce(tensors); });
  }

  void all_gather(const Tensor& local, Tensor& full, int mark) override {
    check_live();
    LOFT_CHECK(mark == 0 || mark == 1, where(), ": all_gather mark ", mark, " is not 0 or 1");
    LOFT_CHECK(local.device() == device() && full.device() == device() &&
                   full.nbytes() == size_t(world_) * local.nbytes(),
               where(), ": all_gather of ", local.str(), " into ", full.str(), " (", world_, " ranks)");
    queue_after_compute("all-gather", [&] {
      const ncclResult_t r = nccl_api().ncclAllGather(local.data(), full.data(), local.nbytes(),
                                                      ncclUint8, comm_, side_);
      return settle(comm_, r, Clock::now() + timeout_);
    });
    LOFT_CUDA_CHECK(cudaEventRecord(gathered_[mark], side_));
  }

  void join(int mark) override {
    check_live();
    LOFT_CHECK(mark == 0 || mark == 1, where(), ": join mark ", mark, " is not 0 or 1");
    cuda::set_device(dev_);
    LOFT_CUDA_CHECK(cudaStreamWaitEvent(cuda::stream(dev_), gathered_[mark], 0));
  }

  void wait(std::chrono::milliseconds timeout) override {
    check_live();
    cuda::set_device(dev_);
    cudaStream_t stream = cuda::stream(dev_);
    // The compute stream (the optimizer's reads of the sums) after every collective queued.
    LOFT_CUDA_CHECK(cudaEventRecord(reduced_, side_));
    LOFT_CUDA_CHECK(cudaStreamWaitEvent(stream, reduced_, 0));
    const auto start = Clock::now();
    const auto deadline = start + timeout;
    for (;;) {
      ncclResult_t a = ncclSuccess;
      {
        std::lock_guard<std::recursive_mutex> lk(nccl_mu_);
        check_live();  // the watchdog may have aborted: its reason, not a finished wait
        const ncclResult_t q = nccl_api().ncclCommGetAsyncError(comm_, &a);
        if (q != ncclSuccess) a = q;
      }
      if (a == ncclRemoteError || a == ncclSystemError)
        fail(cat("a peer stopped answering (", nccl_cause(a, comm_), ")"));
      if (a != ncclSuccess && a != ncclInProgress)
        fail(cat("NCCL failed (", nccl_cause(a, comm_), ")"));
      const cudaError_t s = cudaStreamQuery(stream);
      if (s == cudaSuccess) {
        check_live();  // done because the watchdog's abort stopped the kernels: an error
        return;
      }
      if (s != cudaErrorNotReady) {
        abort();
        LOFT_CUDA_CHECK(s);
      }
      if (Clock::now() >= deadline)
        fail(cat("a peer stopped answering within ", seconds(timeout),
                 " (the collective on cuda:", dev_, " did not finish; communicator aborted)"));
      pause_since(start);
    }
  }

  void abort() override {
    std::lock_guard<std::recursive_mutex> lk(nccl_mu_);
    if (!comm_) return;
    cuda::set_device(dev_);  // (not cudaSetDevice: set_device caches the thread's device)
    nccl_api().ncclCommAbort(comm_);
    comm_ = nullptr;
  }

 private:
  // Queues a collective (`queue`, which settles it: ncclInProgress past the timeout) on side_
  // after the work queued so far on the compute stream. NCCL connects its peers (and allocates
  // their buffers) at the first collective: counted outside the pool. A peer that never comes
  // shows here, as a queue that does not settle.
  void queue_after_compute(const char* what, const std::function<ncclResult_t()>& queue) {
    cuda::set_device(dev_);
    LOFT_CUDA_CHECK(cudaEventRecord(computed_, cuda::stream(dev_)));
    LOFT_CUDA_CHECK(cudaStreamWaitEvent(side_, computed_, 0));
    ncclResult_t r = ncclSuccess;
    {
      std::lock_guard<std::recursive_mutex> lk(nccl_mu_);  // the watchdog aborts between calls
      check_live();
      if (first_collective_) {
        first_collective_ = false;
        cuda::count_outside_pool({dev_}, [&] { r = queue(); });
      } else {
        r = queue();
      }
      if (r == ncclSuccess) track(what);
    }
    if (r == ncclInProgress)
      fail(cat("a peer stopped answering (NCCL did not queue the ", what, " within ",
               seconds(timeout_), ")"));
    if (r != ncclSuccess) fail(cat("the ", what, " failed (", nccl_cause(r, comm_), ")"));
  }

  // Queues the sums on side_ as one group and settles it (ncclInProgress past the timeout).
  ncclResult_t queue_all_reduce(std::span<Tensor* const> tensors) {
    ncclResult_t r = nccl_api().ncclGroupStart();
    if (r != ncclSuccess) fail(cat("ncclGroupStart failed (", nccl_cause(r, comm_), ")"));
    for (Tensor* t : tensors) {
      if (t->numel() == 0) continue;
      const ncclResult_t c = nccl_api().ncclAllReduce(t->data(), t->data(), size_t(t->numel()), ncclFloat32,
                                           ncclSum, comm_, side_);
      if (c != ncclSuccess && c != ncclInProgress) {
        r = c;
        break;
      }
    }
    const ncclResult_t end = nccl_api().ncclGroupEnd();  // closes the group even after a failed call
    if (r == ncclSuccess) r = end;
    return settle(comm_, r, Clock::now() + timeout_);
  }

  std::string where() const { return cat("rank ", rank_, " of ", world_); }
  void check_live() {
    std::lock_guard<std::recursive_mutex> lk(nccl_mu_);
    if (comm_) return;
    std::lock_guard<std::mutex> w(mu_);
    throw Error(watchdog_failure_.empty() ? cat(where(), ": the NCCL communicator was aborted")
                                          : watchdog_failure_);
  }

  // An event after the collective just queued on side_, for the watchdog.
  void track(const char* what) {
    std::lock_guard<std::mutex> lk(mu_);
    cudaEvent_t e = nullptr;
    if (spare_.empty()) {
      LOFT_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    } else {
      e = spare_.back();
      spare_.pop_back();
    }
    LOFT_CUDA_CHECK(cudaEventRecord(e, side_));
    pending_.push_back({e, Clock::now(), what});
  }

  // The watchdog thread: every 50 ms, retires the collectives done (side_ runs them in order) and
  // aborts the communicator when the oldest left has waited past the timeout.
  void watch() {
    cudaSetDevice(dev_);
    std::unique_lock<std::mutex> lk(mu_);
    while (!stop_) {
      wake_.wait_for(lk, std::chrono::milliseconds(50));
      while (!pending_.empty() && cudaEventQuery(pending_.front().done) != cudaErrorNotReady) {
        spare_.push_back(pending_.front().done);
        pending_.pop_front();
      }
      if (pending_.empty() || !watchdog_failure_.empty() || Clock::now() - pending_.front().queued < timeout_)
        continue;
      watchdog_failure_ = cat(where(), ": a peer stopped answering (the ", pending_.front().what,
                              " queued on cuda:", dev_, " did not finish within ", seconds(timeout_),
                              "; communicator aborted)");
      lk.unlock();
      abort();  // NCCL's kernels stop: whatever waited behind them runs on
      lk.lock();
    }
  }
  [[noreturn]] void fail(const std::string& cause) {
    abort();
    throw Error(cat(where(), ": ", cause));
  }

  ncclComm_t comm_;
  cudaStream_t side_ = nullptr;                            // the collectives' stream
  cudaEvent_t computed_ = nullptr, reduced_ = nullptr;  // compute -> side, side -> compute
  cudaEvent_t gathered_[2] = {nullptr, nullptr};        // the last all-gather of each mark
  int dev_, rank_, world_;
  std::chrono::milliseconds timeout_;  // for queueing and for the destructor's last wait
  bool first_collective_ = true;
  // comm_'s calls against the watchdog's abort (recursive: fail() aborts inside a queue).
  std::recursive_mutex nccl_mu_;
  // The watchdog's state, under mu_.
  struct Pending {
    cudaEvent_t done;
    Clock::time_point queued;
    const char* what;
  };
  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<Pending> pending_;   // collectives queued on side_, oldest first
  std::vector<cudaEvent_t> spare_;  // their events, once done
  std::string watchdog_failure_;    // why the watchdog aborted (empty: it did not)
  bool stop_ = false;
  std::thread watchdog_;  // last: started once everything above exists
};

}  // namespace

NcclUniqueId nccl_new_unique_id() {
  ncclUniqueId id;
  const ncclResult_t r = nccl_api().ncclGetUniqueId(&id);
  if (r != ncclSuccess) throw Error(cat("ncclGetUniqueId failed (", nccl_cause(r, nullptr), ")"));
  NcclUniqueId out;
  std::memcpy(out.data(), id.internal, out.size());
  return out;
}

std::vector<std::unique_ptr<Communicator>> make_nccl_communicators(const std::vector<int>& devices,
                                                                  std::chrono::milliseconds timeout) {
  const int n = int(devices.size());
  std::vector<ncclComm_t> comms(devices.size(), nullptr);
  int current = 0;
  LOFT_CUDA_CHECK(cudaGetDevice(&current));
  const NcclUniqueId job = nccl_new_unique_id();
  ncclUniqueId id;
  std::memcpy(id.internal, job.data(), job.size());
  ncclResult_t r = ncclSuccess;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // see make_communicators: every later wait has a deadline
  std::string failed;   // the first rank that NCCL refused or that did not settle, and why
  // NCCL's buffers count against --gpu-memory-limit as far as they show (memory_outside). One
  // thread initialises every rank, so the ranks' inits go in one group (NCCL's documented way).
  cuda::count_outside_pool(devices, [&] {
    r = nccl_api().ncclGroupStart();
    for (int i = 0; i < n && r == ncclSuccess; ++i) {
      LOFT_CUDA_CHECK(cudaSetDevice(devices[size_t(i)]));
      const ncclResult_t c = nccl_api().ncclCommInitRankConfig(&comms[size_t(i)], n, id, i, &config);
      if (c != ncclSuccess && c != ncclInProgress) r = c;
    }
    const ncclResult_t end = nccl_api().ncclGroupEnd();
    if (r == ncclSuccess && end != ncclInProgress) r = end;
    if (r != ncclSuccess) {
      failed = cat("NCCL could not join ", n, " GPUs in one communicator (", nccl_cause(r, nullptr), ")");
      return;
    }
    const auto deadline = Clock::now() + timeout;
    for (int i = 0; i < n && failed.empty(); ++i) {
      const ncclResult_t s = settle(comms[size_t(i)], ncclInProgress, deadline);
      if (s != ncclSuccess) failed = join_failure(i, n, devices[size_t(i)], s, comms[size_t(i)], timeout);
    }
  });
  LOFT_CUDA_CHECK(cudaSetDevice(current));  // NCCL may leave another device current
  if (!failed.empty()) {
    for (size_t i = 0; i < comms.size(); ++i) {
      if (!comms[i]) continue;
      LOFT_CUDA_CHECK(cudaSetDevice(devices[i]));
      nccl_api().ncclCommAbort(comms[i]);
    }
    LOFT_CUDA_CHECK(cudaSetDevice(current));
    throw Error(failed);
  }
  std::vector<std::unique_ptr<Communicator>> out;
  for (int i = 0; i < n; ++i)
    out.push_back(std::make_unique<NcclCommunicator>(comms[size_t(i)], devices[size_t(i)], i, n, timeout));
  return out;
}

std::unique_ptr<Communicator> make_nccl_communicator(int device,
                                                     std::span<const uint8_t, 128> unique_id,
                                                     int world, int rank,
                                                     std::chrono::milliseconds timeout) {
  cuda::set_device(device);  // NCCL binds the communicator to the current device
  ncclUniqueId id;
  std::memcpy(id.internal, unique_id.data(), unique_id.size());
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // init returns at once; the deadline below bounds the wait for peers
  ncclComm_t comm = nullptr;
  ncclResult_t r = ncclSuccess;
  cuda::count_outside_pool({device}, [&] {
    r = nccl_api().ncclCommInitRankConfig(&comm, world, id, rank, &config);
    if (comm) r = settle(comm, r, Clock::now() + timeout);
  });
  if (r != ncclSuccess) {
    const std::string why = join_failure(rank, world, device, r, comm, timeout);
    if (comm) nccl_api().ncclCommAbort(comm);
    throw Error(why);
  }
  return std::make_unique<NcclCommunicator>(comm, device, rank, world, timeout);
}

}  // namespace loft
#endif  // LOFT_WITH_NCCL
