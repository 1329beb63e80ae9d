#include "engine/parallel/rendezvous.h"

#include <array>
#include <cstring>
#include <string>

#include "engine/core/error.h"
#include "engine/parallel/tcp_socket.h"

namespace loft::parallel {

namespace {

// A connection that is not a loft rank of this run (a port scan, another program on the port)
// must fail clearly, not hand over garbage: both directions start with this tag.
constexpr std::array<uint8_t, 8> kMagic = {'l', 'o', 'f', 't', 'r', 'd', 'v', '1'};
// A sane ceiling on the blob (the NCCL id is 128 bytes): a wrong length must not allocate wildly.
constexpr uint64_t kMaxBlob = 1 << 20;
// A peer's acknowledgement: kAckOk, or kAckFailed then a 4-byte length and the peer's message
// (at most kMaxMessage bytes).
constexpr uint8_t kAckOk = 1, kAckFailed = 2;
constexpr uint64_t kMaxMessage = 4096;

// Little-endian fixed-width integers, so ranks on any host agree.
void put(std::vector<uint8_t>& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(uint8_t(v >> (8 * i)));
}
uint64_t get(const uint8_t* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= uint64_t(p[i]) << (8 * i);
  return v;
}

// "30 s", "0.3 s".
std::string seconds(std::chrono::milliseconds t) {
  return t.count() % 1000 == 0 ? cat(t.count() / 1000, " s") : cat(double(t.count()) / 1000, " s");
}

// "MASTER_ADDR=host:port", as messages name rank 0's end.
std::string master(const LaunchEnv& env) {
  return cat("MASTER_ADDR=", env.master_addr, ":", env.port);
}

struct Peer {
  Socket socket;
  std::string addr;
  int rank = -1;
};

// Rank 0: accepts world_size-1 peers, each introducing itself with the magic, its rank and its
// world size; refuses duplicates and mismatched runs.
std::vector<Peer> accept_peers(const LaunchEnv& env, const Socket& listener,
                               std::chrono::milliseconds timeout) {
  const int want = env.world_size - 1;
  const auto deadline = Clock::now() + timeout;
  std::vector<Peer> peers;
  std::vector<bool> seen(size_t(env.world_size), false);
  while (int(peers.size()) < want) {
    Peer p;
    const IoStatus a = tcp_accept(listener, deadline, &p.socket, &p.addr);
    if (a.kind == IoStatus::kTimeout)
      throw Error(cat("rank 0: only ", peers.size(), " of ", want, " peers connected to port ",
                      env.port, " (MASTER_PORT) within ", seconds(timeout),
                      "; check that every rank was started with MASTER_ADDR=", env.master_addr,
                      " MASTER_PORT=", env.port, " WORLD_SIZE=", env.world_size));
    if (!a.ok()) throw Error(cat("rank 0: accepting on port ", env.port, ": ", a.str()));
    std::array<uint8_t, kMagic.size() + 8> hello{};
    const IoStatus r = recv_all(p.socket, hello.data(), hello.size(), deadline);
    if (!r.ok() || std::memcmp(hello.data(), kMagic.data(), kMagic.size()) != 0)
      throw Error(cat("rank 0: a connection from ", p.addr, " to port ", env.port,
                      " did not introduce itself as a loft rank (",
                      r.ok() ? "wrong greeting" : r.str(), ")"));
    p.rank = int(get(hello.data() + kMagic.size(), 4));
    const int world = int(get(hello.data() + kMagic.size() + 4, 4));
    if (world != env.world_size)
      throw Error(cat("rank 0: rank ", p.rank, " at ", p.addr, " has WORLD_SIZE=", world,
                      " but rank 0 has WORLD_SIZE=", env.world_size));
    if (p.rank <= 0 || p.rank >= env.world_size || seen[size_t(p.rank)])
      throw Error(cat("rank 0: a peer at ", p.addr, " says it is rank ", p.rank,
                      p.rank > 0 && p.rank < env.world_size ? ", which another peer already is"
                                                            : ", which is not a peer rank"));
    seen[size_t(p.rank)] = true;
    peers.push_back(std::move(p));
  }
  return peers;
}

std::vector<uint8_t> serve(const LaunchEnv& env, std::span<const uint8_t> blob,
                           std::chrono::milliseconds timeout) {
  LOFT_CHECK(blob.size() <= kMaxBlob, "rendezvous blob of ", blob.size(), " bytes is too large");
  int error = 0;
  const Socket listener = tcp_listen(env.port, &error);
  if (!listener.valid())
    throw Error(
        cat("rank 0: cannot listen on port ", env.port, " (MASTER_PORT): ", std::strerror(error)));
  std::vector<Peer> peers = accept_peers(env, listener, timeout);

  std::vector<uint8_t> message(kMagic.begin(), kMagic.end());
  put(message, blob.size(), 8);
  message.insert(message.end(), blob.begin(), blob.end());
  const auto deadline = Clock::now() + timeout;
  for (const Peer& p : peers) {
    const IoStatus s = send_all(p.socket, message.data(), message.size(), deadline);
    if (!s.ok())
      throw Error(cat("rank 0: could not send the id to rank ", p.rank, " at ", p.addr, " within ",
                      seconds(timeout), ": ", s.str()));
  }
  for (const Peer& p : peers) {
    uint8_t ack = 0;
    const IoStatus s = recv_all(p.socket, &ack, 1, deadline);
    if (!s.ok())
      throw Error(cat("rank 0: rank ", p.rank, " at ", p.addr,
                      " did not acknowledge the id within ", seconds(timeout), ": ", s.str()));
    if (ack == kAckOk) continue;
    std::array<uint8_t, 4> len{};
    std::string message;
    if (ack == kAckFailed && recv_all(p.socket, len.data(), len.size(), deadline).ok() &&
        get(len.data(), 4) <= kMaxMessage) {
      message.resize(get(len.data(), 4));
      if (!recv_all(p.socket, message.data(), message.size(), deadline).ok()) message.clear();
    }
    throw Error(cat("rank 0: rank ", p.rank, " at ", p.addr, " stopped at start-up: ",
                    message.empty() ? std::string("(its answer was cut short; see its error)") : message));
  }
  return {blob.begin(), blob.end()};
}

std::vector<uint8_t> fetch(const LaunchEnv& env, std::chrono::milliseconds timeout, const PeerCheck& check) {
  const std::string who = cat("rank ", env.rank, ": ");
  std::string last_error;
  const Socket s = tcp_connect(env.master_addr, env.port, Clock::now() + timeout, &last_error);
  if (!s.valid())
    throw Error(cat(who, "no answer from ", master(env), " within ", seconds(timeout),
                    " (last try: ", last_error, "); is rank 0 running?"));
  // Rank 0 answers once every rank has arrived, which may take up to its own timeout.
  const auto deadline = Clock::now() + timeout;
  std::vector<uint8_t> hello(kMagic.begin(), kMagic.end());
  put(hello, uint64_t(env.rank), 4);
  put(hello, uint64_t(env.world_size), 4);
  const IoStatus h = send_all(s, hello.data(), hello.size(), deadline);
  if (!h.ok()) throw Error(cat(who, "could not greet ", master(env), ": ", h.str()));

  std::array<uint8_t, kMagic.size() + 8> head{};
  const IoStatus r = recv_all(s, head.data(), head.size(), deadline);
  if (r.kind == IoStatus::kClosed)
    throw Error(cat(who, "rank 0 at ", master(env), " closed the connection before sending the id",
                    " (rank 0 failed or timed out: see its error)"));
  if (!r.ok())
    throw Error(cat(who, "connected to ", master(env), " but received no id within ",
                    seconds(timeout), ": ", r.str()));
  const uint64_t n = get(head.data() + kMagic.size(), 8);
  if (std::memcmp(head.data(), kMagic.data(), kMagic.size()) != 0 || n > kMaxBlob)
    throw Error(cat(who, "the service at ", master(env), " is not loft's rank 0 (wrong greeting)"));
  std::vector<uint8_t> blob(n);
  const IoStatus b = recv_all(s, blob.data(), blob.size(), deadline);
  if (!b.ok()) throw Error(cat(who, "the id from ", master(env), " was cut short: ", b.str()));
  std::string problem = check ? check(blob) : std::string();
  if (problem.size() > kMaxMessage) problem.resize(kMaxMessage);
  std::vector<uint8_t> ack{problem.empty() ? kAckOk : kAckFailed};
  if (!problem.empty()) {
    put(ack, problem.size(), 4);
    ack.insert(ack.end(), problem.begin(), problem.end());
  }
  const IoStatus a = send_all(s, ack.data(), ack.size(), deadline);
  if (!problem.empty()) throw Error(cat(who, problem));
  if (!a.ok())
    throw Error(cat(who, "could not acknowledge the id to ", master(env), ": ", a.str()));
  return blob;
}

}  // namespace

std::vector<uint8_t> exchange_blob(const LaunchEnv& env, std::span<const uint8_t> blob_from_rank0,
                                   std::chrono::milliseconds timeout, const PeerCheck& check) {
  if (env.world_size == 1) return {blob_from_rank0.begin(), blob_from_rank0.end()};
  return env.rank == 0 ? serve(env, blob_from_rank0, timeout) : fetch(env, timeout, check);
}

}  // namespace loft::parallel
