// The bootstrap exchange between processes on 127.0.0.1: ranks are fork()ed children (or rank 0
// runs in the test process when its error is what is checked). Every wait is bounded: children
// that outlive their limit are killed, so a broken exchange fails the test instead of hanging it.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "engine/parallel/rendezvous.h"
#include "engine/parallel/tcp_socket.h"
#include "engine/train/run_folder_token.h"
#include "tests/common/eval_util.h"
#include "tests/common/test_util.h"

namespace loft::parallel {
namespace {

using std::chrono::milliseconds;

// What a child reports: "OK:" and the received bytes, or "ERR:" and the error message.
struct Child {
  pid_t pid = -1;
  int out = -1;
};

Child spawn(const std::function<std::string()>& fn) {
  int fds[2];
  if (::pipe(fds) != 0) throw Error("pipe failed");
  const pid_t pid = ::fork();
  if (pid < 0) throw Error("fork failed");
  if (pid == 0) {
    ::close(fds[0]);
    std::string text;
    try {
      text = fn();
    } catch (const std::exception& e) {
      text = std::string("ERR:") + e.what();
    }
    const char* p = text.data();
    size_t n = text.size();
    while (n > 0) {
      const ssize_t k = ::write(fds[1], p, n);
      if (k <= 0) break;
      p += k;
      n -= size_t(k);
    }
    ::_exit(0);
  }
  ::close(fds[1]);
  return {pid, fds[0]};
}

// The child's report, after it exits or is killed at `limit`.
std::string finish(const Child& c, milliseconds limit = milliseconds(15000)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  int status = 0;
  bool exited = false;
  while (std::chrono::steady_clock::now() < deadline) {
    if (::waitpid(c.pid, &status, WNOHANG) == c.pid) {
      exited = true;
      break;
    }
    std::this_thread::sleep_for(milliseconds(10));
  }
  if (!exited) {
    ::kill(c.pid, SIGKILL);
    ::waitpid(c.pid, &status, 0);
  }
  std::string text;
  char buf[4096];
  for (ssize_t k; (k = ::read(c.out, buf, sizeof buf)) > 0;) text.append(buf, size_t(k));
  ::close(c.out);
  return exited ? text : "KILLED: still running after " + std::to_string(limit.count()) + " ms";
}

int free_port() {
  int error = 0;
  const Socket s = tcp_listen(0, &error);
  if (!s.valid()) throw Error("no free port");
  return bound_port(s);
}

LaunchEnv env_of(int port, int world, int rank, const std::string& addr = "127.0.0.1") {
  return LaunchEnv{addr, port, world, rank, rank};
}

std::vector<uint8_t> random_blob(size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::vector<uint8_t> b(n);
  for (auto& x : b) x = uint8_t(gen());
  return b;
}

std::string ok(const std::vector<uint8_t>& b) { return "OK:" + std::string(b.begin(), b.end()); }

Child rank_process(const LaunchEnv& env, const std::vector<uint8_t>& blob, milliseconds timeout) {
  return spawn([=] { return ok(exchange_blob(env, blob, timeout)); });
}

// All ranks as processes; every one must end up with rank 0's blob.
void expect_exchange(int world, const std::string& addr) {
  const int port = free_port();
  const auto blob = random_blob(128, unsigned(world));
  std::vector<Child> kids;
  for (int r = 0; r < world; ++r)  // peers pass a different blob: theirs must be ignored
    kids.push_back(rank_process(env_of(port, world, r, addr), r == 0 ? blob : random_blob(128, 99),
                                milliseconds(10000)));
  for (int r = 0; r < world; ++r) EXPECT_EQ(finish(kids[size_t(r)]), ok(blob)) << "rank " << r;
}

TEST(DistRendezvous, TwoProcesses) { expect_exchange(2, "127.0.0.1"); }

TEST(DistRendezvous, ThreeProcessesByHostName) { expect_exchange(3, "localhost"); }

TEST(DistRendezvous, OneProcessNeedsNoSocket) {
  const auto blob = random_blob(128, 1);
  // Port 1 is privileged: any attempt to listen there would fail, so this also shows none is made.
  EXPECT_EQ(exchange_blob(env_of(1, 1, 0), blob, milliseconds(100)), blob);
}

TEST(DistRendezvous, LateRankZero) {
  const int port = free_port();
  const auto blob = random_blob(128, 7);
  const Child peer = rank_process(env_of(port, 2, 1), {}, milliseconds(10000));
  std::this_thread::sleep_for(milliseconds(400));  // the peer is retrying by now
  const Child root = rank_process(env_of(port, 2, 0), blob, milliseconds(10000));
  EXPECT_EQ(finish(peer), ok(blob));
  EXPECT_EQ(finish(root), ok(blob));
}

TEST(DistRendezvous, PeerTimesOutWhenRankZeroNeverAppears) {
  const int port = free_port();
  const auto start = std::chrono::steady_clock::now();
  const std::string msg =
      test::error_of([&] { exchange_blob(env_of(port, 2, 1), {}, milliseconds(300)); });
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_TRUE(test::contains(
      msg, cat("rank 1: no answer from MASTER_ADDR=127.0.0.1:", port, " within 0.3 s")));
  EXPECT_TRUE(test::contains(msg, "Connection refused"));
  EXPECT_GE(took, milliseconds(290));
  EXPECT_LT(took, milliseconds(3000));
}

TEST(DistRendezvous, RankZeroTimesOutNamingHowManyPeersArrived) {
  const int port = free_port();
  // World of 3, only rank 2 comes: rank 0 gives up and the waiting peer hears it closed.
  const Child peer = rank_process(env_of(port, 3, 2), {}, milliseconds(10000));
  const auto start = std::chrono::steady_clock::now();
  const std::string msg = test::error_of(
      [&] { exchange_blob(env_of(port, 3, 0), random_blob(128, 3), milliseconds(500)); });
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_TRUE(test::contains(msg, cat("rank 0: only 1 of 2 peers connected to port ", port,
                                      " (MASTER_PORT) within 0.5 s")));
  EXPECT_LT(took, milliseconds(3000));
  const std::string peer_msg = finish(peer);
  EXPECT_TRUE(test::contains(peer_msg, cat("ERR:rank 2: rank 0 at MASTER_ADDR=127.0.0.1:", port,
                                           " closed the connection before sending the id")));

  const int port2 = free_port();
  EXPECT_TRUE(test::contains(
      test::error_of([&] { exchange_blob(env_of(port2, 2, 0), {}, milliseconds(300)); }),
      cat("rank 0: only 0 of 1 peers connected to port ", port2, " (MASTER_PORT) within 0.3 s")));
}

TEST(DistRendezvous, RankZeroRefusesAStrayConnection) {
  const int port = free_port();
  const Child stray = spawn([port] {
    std::string err;
    const auto deadline = Clock::now() + milliseconds(5000);
    const Socket s = tcp_connect("127.0.0.1", port, deadline, &err);
    const std::string junk = "GET / HTTP/1.0\r\n\r\n";
    send_all(s, junk.data(), junk.size(), deadline);
    char c;
    recv_all(s, &c, 1, deadline);  // until rank 0 hangs up
    return std::string("done");
  });
  const std::string msg =
      test::error_of([&] { exchange_blob(env_of(port, 2, 0), {}, milliseconds(5000)); });
  EXPECT_TRUE(test::contains(msg, cat("rank 0: a connection from 127.0.0.1 to port ", port,
                                      " did not introduce itself as a loft rank")));
  EXPECT_EQ(finish(stray), "done");
}

TEST(DistRendezvous, MismatchedWorldSize) {
  const int port = free_port();
  const Child peer = rank_process(env_of(port, 3, 1), {}, milliseconds(5000));
  const std::string msg =
      test::error_of([&] { exchange_blob(env_of(port, 2, 0), {}, milliseconds(5000)); });
  EXPECT_TRUE(test::contains(
      msg, "rank 0: rank 1 at 127.0.0.1 has WORLD_SIZE=3 but rank 0 has WORLD_SIZE=2"));
  EXPECT_TRUE(test::contains(finish(peer), "ERR:rank 1: "));
}

TEST(DistRendezvous, PortInUse) {
  int error = 0;
  const Socket holder = tcp_listen(0, &error);
  ASSERT_TRUE(holder.valid());
  const int port = bound_port(holder);
  EXPECT_TRUE(test::contains(
      test::error_of([&] { exchange_blob(env_of(port, 2, 0), {}, milliseconds(300)); }),
      cat("rank 0: cannot listen on port ", port, " (MASTER_PORT): Address already in use")));
}

}  // namespace
// ---- the run folder checked at the rendezvous (engine/train/run_folder_token.h) ----------------

Child folder_rank(const LaunchEnv& env, const std::vector<uint8_t>& id, const std::filesystem::path& dir) {
  return spawn([=] { return ok(exchange_id_checking_run_folder(env, id, dir, milliseconds(10000))); });
}

TEST(DistRunFolder, RanksSeeingTheFolderGetTheIdAndTheTokenGoes) {
  const test::TempDir tmp;
  const int port = free_port();
  const auto id = random_blob(128, 5);
  const Child peer = folder_rank(env_of(port, 3, 1), {}, tmp.path());
  const Child peer2 = folder_rank(env_of(port, 3, 2), {}, tmp.path());
  const Child root = folder_rank(env_of(port, 3, 0), id, tmp.path());
  EXPECT_EQ(finish(root), ok(id));
  EXPECT_EQ(finish(peer), ok(id));
  EXPECT_EQ(finish(peer2), ok(id));
  EXPECT_FALSE(std::filesystem::exists(tmp.path() / kRankTokenFile));
}

// Rank 1 was given another folder (what a host-local --out gives on a second host): both ranks
// stop at start-up, each naming rank 1 and what the folder must be, and rank 0's token is gone.
TEST(DistRunFolder, ARankThatCannotSeeTheFolderStopsEveryRank) {
  const test::TempDir mine, other;
  const int port = free_port();
  const Child peer = folder_rank(env_of(port, 2, 1), {}, other.path());
  const std::string root_msg = test::error_of(
      [&] { exchange_id_checking_run_folder(env_of(port, 2, 0), random_blob(128, 6), mine.path(), milliseconds(10000)); });
  const std::string peer_msg = finish(peer);
  for (const std::string& msg : {root_msg, peer_msg}) {
    EXPECT_TRUE(test::contains(msg, "rank 1 on ")) << msg;
    EXPECT_TRUE(test::contains(msg, cat("sees a folder ", other.path().string(), " but not the token"))) << msg;
    EXPECT_TRUE(test::contains(msg, "every host mounts at the same path")) << msg;
  }
  EXPECT_TRUE(test::contains(root_msg, "rank 0: rank 1 at 127.0.0.1 stopped at start-up: ")) << root_msg;
  EXPECT_TRUE(test::contains(peer_msg, "ERR:rank 1: rank 1 on ")) << peer_msg;
  EXPECT_FALSE(std::filesystem::exists(mine.path() / kRankTokenFile));

  const int port2 = free_port();  // no such folder on the peer's host
  const Child lost = folder_rank(env_of(port2, 2, 1), {}, other.path() / "missing");
  EXPECT_TRUE(test::contains(
      test::error_of([&] {
        exchange_id_checking_run_folder(env_of(port2, 2, 0), random_blob(128, 7), mine.path(), milliseconds(10000));
      }),
      cat("cannot see rank 0's run folder ", (other.path() / "missing").string(), ": no such folder here.")));
  finish(lost);
}

TEST(DistRunFolder, AnotherRunsTokenIsNotThisRunsFolder) {
  const test::TempDir tmp;
  const std::string token = write_rank_token(tmp.path());
  EXPECT_EQ(token.size(), kTokenDigits);
  EXPECT_EQ(check_rank_token(tmp.path(), token, 3), "");
  EXPECT_TRUE(test::contains(check_rank_token(tmp.path(), std::string(32, '0'), 3), "reads another run's token"));
  EXPECT_NE(write_rank_token(tmp.path()), token);  // fresh each run
  remove_rank_token(tmp.path());
  EXPECT_FALSE(std::filesystem::exists(tmp.path() / kRankTokenFile));
  remove_rank_token(tmp.path());  // nothing to remove: no error
}

}  // namespace loft::parallel
