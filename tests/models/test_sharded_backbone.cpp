// --shard-backbone's ShardedBackbone (engine/parallel/sharded_backbone.h) on the CPU, with
// LocalShards standing in for NCCL's all-gather. The layout: shares of equal size whose
// concatenation gives back every stored tensor's bytes, for awkward sizes and world sizes. A
// model: every rank of a sharded tiny Llama trains bit for bit as the unsharded one (losses,
// every param, evaluation), with and without grad checkpointing, for every method whose stores
// can be sharded; FALQON, which writes into its backbone, with its ranks in threads.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <exception>
#include <map>
#include <optional>
#include <random>
#include <thread>

#include "engine/train/train_step.h"
#include "engine/train/trainer.h"
#include "models/llama/model.h"
#include "engine/device/memory.h"
#include "engine/peft/method.h"
#include "models/llama/bench_model.h"
#include "tests/common/every_method.h"
#include "tests/common/local_shard_gather.h"
#include "tests/common/thread_shard_gather.h"
#include "tests/common/tiny_llama.h"
#include "tests/common/token_stream.h"
#include "tests/common/test_util.h"
#include "engine/peft/method_state.h"
#include "tests/common/method_model.h"

namespace loft::llama {
namespace {

std::vector<uint8_t> bytes_of(const Tensor& t) {
  std::vector<uint8_t> b(t.nbytes());
  Tensor::wrap(b.data(), t.shape(), t.dtype(), Device::cpu(), nullptr).copy_from(t);
  return b;
}

TEST(ShardedBackbone, SharesGiveBackEveryLayersBytes) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1, 1);
  const auto random = [&](Shape s, DType d) {
    std::vector<float> v(size_t(shape_numel(s)));
    for (float& x : v) x = u(rng);
    Tensor f = Tensor::from_vector(v, s);
    if (d == DType::F32) return f;
    Tensor t = Tensor::empty(s, d);  // one-byte codes: the floats' bytes, any pattern will do
    std::memcpy(t.data(), f.data(), t.nbytes());
    return t;
  };
  for (int world : {1, 2, 3, 4}) {
    SCOPED_TRACE(world);
    // Per rank, its own copy of three layers of odd-sized tensors (what each rank's model holds).
    const std::vector<std::vector<std::pair<Shape, DType>>> layout = {
        {{{3, 5}, DType::F32}, {{7}, DType::U8}, {{1}, DType::F32}},
        {{{513}, DType::U8}},
        {{{2, 3}, DType::F32}, {{300}, DType::I8}, {{64, 65}, DType::F32}}};
    std::vector<std::vector<Tensor>> want;
    for (const auto& layer : layout) {
      want.emplace_back();
      for (const auto& [s, d] : layer) want.back().push_back(random(s, d));
    }
    test::LocalShards shards(world);
    std::vector<std::vector<std::vector<Tensor>>> held(static_cast<size_t>(world));
    std::vector<std::unique_ptr<ShardedBackbone>> ranks;
    for (int r = 0; r < world; ++r) {
      held[size_t(r)] = want;
      for (auto& layer : held[size_t(r)])
        for (Tensor& t : layer) t = t.clone();
      ranks.push_back(std::make_unique<ShardedBackbone>(shards.rank(r)));
      for (auto& layer : held[size_t(r)]) {
        std::vector<Tensor*> stored;
        for (Tensor& t : layer) stored.push_back(&t);
        ranks.back()->add_layer(stored);
      }
    }
    size_t padded = 0;
    for (const auto& layer : want) {
      size_t b = 0;
      for (const Tensor& t : layer) b = (b + 255) / 256 * 256 + t.nbytes();
      padded += (b + size_t(world) * 256 - 1) / (size_t(world) * 256) * (size_t(world) * 256);
    }
    for (int r = 0; r < world; ++r) {
      EXPECT_EQ(ranks[size_t(r)]->local_bytes() * size_t(world), padded);
      // Forward, then backward, then a forward again: each layer's tensors hold its bytes when used.
      const std::vector<std::pair<int, int>> order = {{0, 1}, {1, 2}, {2, -1}, {2, 1}, {1, 0},
                                                      {0, -1}, {0, 1}, {1, 2}, {2, -1}};
      for (const auto& [l, next] : order) {
        ranks[size_t(r)]->use(l, next);
        for (size_t k = 0; k < want[size_t(l)].size(); ++k) {
          const Tensor& got = held[size_t(r)][size_t(l)][k];
          ASSERT_EQ(got.shape(), want[size_t(l)][k].shape());
          ASSERT_EQ(got.dtype(), want[size_t(l)][k].dtype());
          ASSERT_EQ(bytes_of(got), bytes_of(want[size_t(l)][k])) << "rank " << r << " layer " << l;
        }
      }
    }
    // Per rank: 3 gathers in the first forward, 1 in the backward (the slots still held layers 2
    // and 1), 1 in the second forward (they held 0 and 1): 5.
    EXPECT_EQ(shards.gathers(), 5 * world);
  }
}

struct Trained {
  std::vector<double> losses, evaluated;
  std::vector<std::vector<float>> params;
  std::map<std::string, Tensor> state;  // the method state after the last step
};

// A tiny bench model with `method` (the same weights and adapter init every time), sharded as
// rank `rank` of `shards` when given (once built, or as it is built: `at_build`, its projections
// drawn only then), its optimizer and a fixed batch.
struct Replica {
  std::unique_ptr<LlamaModel> model;
  std::unique_ptr<AdamW> opt;
  ModelBatch batch;

  Replica(const std::string& method, bool checkpointing, test::LocalShards* shards, int rank,
          bool at_build = false)
      : Replica(method, checkpointing, shards ? &shards->rank(rank) : nullptr, at_build) {}
  Replica(const std::string& method, bool checkpointing, ShardGather* gather, bool at_build = false,
          int layers = 0)
      : model(test::method_model("tiny", method, DType::F32, Device::cpu(), 8, 3, 1,
                                 at_build ? gather : nullptr, layers)) {
    model->set_grad_checkpointing(checkpointing);
    if (gather && !at_build) model->shard_backbone(*gather);
    opt = std::make_unique<AdamW>(model->params(), AdamWConfig{.weight_decay = 0.01});
    batch = test::random_token_batch(model->config().vocab_size, 2, 24);
  }

  // The method's calibration pass, then three steps, each followed by an evaluation.
  Trained train() {
    run_calibration(*model, [&]() -> std::optional<ModelBatch> { return batch; });
    Trained out;
    for (int step = 1; step <= 3; ++step) {
      out.losses.push_back(train_step(*model, *opt, std::span(&batch, 1), 1.0, 1e-3, step).loss_sum);
      out.evaluated.push_back(model->evaluate(batch).loss_sum);
    }
    for (Param* p : model->params()) out.params.push_back(p->value.to_float_vector());
    model->gather_method_state();  // a collective where the state's codes are sharded
    out.state = model->method_state();
    return out;
  }
};

bool same_state(const std::map<std::string, Tensor>& a, const std::map<std::string, Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (auto ia = a.begin(), ib = b.begin(); ia != a.end(); ++ia, ++ib)
    if (ia->first != ib->first || ia->second.shape() != ib->second.shape() ||
        ia->second.dtype() != ib->second.dtype() || bytes_of(ia->second) != bytes_of(ib->second))
      return false;
  return true;
}

// fn(r) for each of `world` ranks on a thread of its own, taking turns through `shards` (its
// collectives need the ranks side by side); rethrows the first rank's error.
template <typename Fn>
void on_rank_threads(test::ThreadShards& shards, int world, Fn fn) {
  std::vector<std::exception_ptr> errors(static_cast<size_t>(world));
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      shards.take_turn();
      try {
        fn(r);
      } catch (...) {
        errors[size_t(r)] = std::current_exception();
      }
      shards.give_turn();
    });
  for (std::thread& t : threads) t.join();
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
}

// The methods whose codes never change (LocalShards runs the ranks one after the other, which only
// such codes allow); FALQON has its own test, with its ranks in threads.
std::vector<std::string> shardable_methods() {
  std::vector<std::string> out;
  for (const std::string& m : test::every_method_and_variant_example())
    if (m.rfind("falqon", 0) != 0) out.push_back(m);
  return out;
}

TEST(ShardedBackbone, EveryRankTrainsBitForBitAsTheUnshardedModel) {
  for (const std::string& method : shardable_methods()) {
    for (const auto& [gc, at_build] : {std::pair{false, false}, {true, false}, {false, true}}) {
      SCOPED_TRACE(method + (gc ? " with checkpointing" : "") + (at_build ? ", sharded as built" : ""));
      const Trained plain = Replica(method, gc, nullptr, 0).train();
      // Both ranks' models exist (and have shared their codes) before either computes, as a
      // collective's ranks run side by side.
      test::LocalShards shards(2);
      Replica rank0(method, gc, &shards, 0, at_build), rank1(method, gc, &shards, 1, at_build);
      const Trained r0 = rank0.train(), r1 = rank1.train();
      for (const Trained* r : {&r0, &r1}) {
        EXPECT_EQ(r->losses, plain.losses);
        EXPECT_EQ(r->evaluated, plain.evaluated);
        ASSERT_EQ(r->params.size(), plain.params.size());
        for (size_t p = 0; p < plain.params.size(); ++p)
          ASSERT_EQ(r->params[p], plain.params[p]) << "param " << p;
      }
      // Every layer of the tiny shape holds the same codes: each rank keeps half of them.
      const ShardedBackbone& s = *rank0.model->backbone_shards();
      EXPECT_EQ(2 * s.local_bytes(), s.slot_bytes() * size_t(rank0.model->config().num_layers));
    }
  }
}

// Sharded as it is built, with each projection drawn just before its method re-encodes it, a
// rank holds its shares, two slots and one layer's whole codes at a time: a 16-layer model built
// as rank 0 of 4 peaks far below the same model built whole.
TEST(ShardedBackbone, AModelShardedAsItIsBuiltNeverHoldsTheWholeBackbone) {
  LlamaConfig c = *bench_shape_config("tiny");
  c.num_layers = 16;
  MethodOptions m{"lora", {8, 16.0f}, parse_lora_targets("all"), 0};
  apply_method_invariants(m);
  const auto peak_of_build = [&](ShardGather* shard) {
    reset_peak_memory(Device::cpu());
    const int64_t before = memory_stats(Device::cpu()).allocated;
    std::mt19937_64 init(1);
    LlamaModel model(c, random_llama_weights(c, DType::F32, Device::cpu(), 3, true),
                     make_linear_factory(m, init), shard);
    return memory_stats(Device::cpu()).peak_allocated - before;
  };
  const int64_t whole = peak_of_build(nullptr);
  test::LocalShards shards(4);
  const int64_t sharded = peak_of_build(&shards.rank(0));
  int64_t codes = 0;
  for (const ProjShape& p : c.projections()) codes += p.out * p.in * 4;
  codes *= c.num_layers;
  std::printf("[shard] building 16 layers (%.2f MiB of codes): peak %.2f MiB whole, %.2f MiB as "
              "rank 0 of 4\n", double(codes) / (1 << 20), double(whole) / (1 << 20),
              double(sharded) / (1 << 20));
  EXPECT_GE(whole, codes);
  // A quarter of the codes, two slots and a layer in flight (plus the same embedding and
  // adapters as the whole build): under half of the codes more than those.
  EXPECT_LT(sharded, whole - codes / 2);
}

// FALQON writes its backbone rows after every step. Two ranks in threads (ThreadShards: each
// gather a collective) keep half of every layer's melded codes each, apply the row update to the
// gathered layer alike and keep their halves: both train bit for bit as the unsharded model, and
// their method state (gathered on both) is its state. A fresh sharded pair restored from that
// state (written layer by layer into the shares) evaluates and gathers it back the same.
TEST(ShardedBackbone, FalqonRanksWriteTheirSharesAndTrainAsTheUnshardedModel) {
  for (const std::string& method : {std::string("falqon"), std::string("falqon:reset")}) {
    for (bool gc : {false, true}) {
      SCOPED_TRACE(method + (gc ? " with checkpointing" : ""));
      // Four layers: more than the two slots hold, so every step gathers the shares the last one wrote.
      const int layers = 4;
      Replica whole(method, gc, static_cast<ShardGather*>(nullptr), false, layers);
      const Trained plain = whole.train();
      ASSERT_FALSE(plain.state.empty());
      test::ThreadShards shards(2);
      Replica rank0(method, gc, &shards.rank(0), false, layers), rank1(method, gc, &shards.rank(1), false, layers);
      Trained got[2];
      on_rank_threads(shards, 2, [&](int r) { got[r] = (r == 0 ? rank0 : rank1).train(); });
      for (const Trained& t : got) {
        EXPECT_EQ(t.losses, plain.losses);
        EXPECT_EQ(t.evaluated, plain.evaluated);
        ASSERT_EQ(t.params.size(), plain.params.size());
        for (size_t p = 0; p < plain.params.size(); ++p) ASSERT_EQ(t.params[p], plain.params[p]) << "param " << p;
        EXPECT_TRUE(same_state(t.state, plain.state));
      }
      // Restored: the trained params and the state, into a fresh pair sharded as built.
      test::ThreadShards again(2);
      Replica fresh0(method, gc, &again.rank(0), true, layers), fresh1(method, gc, &again.rank(1), true, layers);
      double evaluated[2] = {0, 0};
      std::map<std::string, Tensor> state[2];
      on_rank_threads(again, 2, [&](int r) {
        Replica& m = r == 0 ? fresh0 : fresh1;
        const std::vector<Param*> params = m.model->params();
        for (size_t p = 0; p < params.size(); ++p)
          params[p]->value.copy_from(Tensor::from_vector(plain.params[p], params[p]->value.shape()));
        m.model->refresh_copies();
        m.model->load_method_state(plain.state, "test");
        evaluated[r] = m.model->evaluate(m.batch).loss_sum;
        m.model->gather_method_state();
        state[r] = m.model->method_state();
      });
      for (int r = 0; r < 2; ++r) {
        EXPECT_EQ(evaluated[r], plain.evaluated.back()) << "rank " << r;
        EXPECT_TRUE(same_state(state[r], plain.state)) << "rank " << r;
      }
    }
  }
}

// The tiny Llama with FALQON, four layers (more than the two slots), sharded through `shard`
// (or not).
std::unique_ptr<LlamaModel> falqon_tiny(ShardGather* shard) {
  LlamaConfig c = test::tiny_llama_config();
  c.num_layers = 4;
  MethodOptions m{"falqon", {8, 16.0f}, parse_lora_targets("all"), 0};
  apply_method_invariants(m);
  std::mt19937_64 rng(1);
  auto model = std::make_unique<LlamaModel>(c, random_llama_weights(c, DType::F32, Device::cpu(), 3),
                                            make_linear_factory(m, rng));
  if (shard) model->shard_backbone(*shard);
  return model;
}

TrainerConfig four_steps(const std::filesystem::path& dir) {
  TrainerConfig c;
  c.steps = 4;
  c.grad_accum = 2;
  c.schedule = {ScheduleKind::Constant, 1e-3, 0, 4};
  c.max_grad_norm = 1.0;
  c.run_dir = dir;
  c.quiet = true;
  c.save_every = 2;
  return c;
}

// The trainer with a sharded FALQON model (a world of one, whose gathers are its own shares): a
// checkpoint holds the method state gathered from the shares, a run resumed from it (sharded
// again, or not) ends as the run that went on, and after run() the state is there for the
// adapter; all bit for bit as the unsharded run.
TEST(ShardedBackbone, AShardedFalqonRunCheckpointsAndResumes) {
  test::TempDir dir;
  auto plain = falqon_tiny(nullptr);
  test::TokenStream d0;
  Trainer(*plain, d0, four_steps(dir / "plain")).run();
  const std::map<std::string, Tensor> want = plain->method_state();
  test::LocalShards one(1);
  auto sharded = falqon_tiny(&one.rank(0));
  test::TokenStream d1;
  Trainer(*sharded, d1, four_steps(dir / "sharded")).run();
  EXPECT_TRUE(same_state(sharded->method_state(), want));
  const std::filesystem::path step2 = dir / "sharded" / "checkpoints" / "step-2";
  ASSERT_TRUE(std::filesystem::exists(step2 / kMethodStateFile));
  for (bool shard_again : {true, false}) {
    SCOPED_TRACE(shard_again ? "resumed sharded" : "resumed whole");
    test::LocalShards again(1);
    auto resumed = falqon_tiny(shard_again ? &again.rank(0) : nullptr);
    test::TokenStream d2;
    Trainer t(*resumed, d2, four_steps(dir / (shard_again ? "r1" : "r2")));
    ASSERT_EQ(t.resume(step2), 2);
    t.run();
    const std::vector<Param*> got = resumed->params(), ref = plain->params();
    ASSERT_EQ(got.size(), ref.size());
    for (size_t p = 0; p < ref.size(); ++p)
      ASSERT_EQ(got[p]->value.to_float_vector(), ref[p]->value.to_float_vector()) << "param " << p;
    EXPECT_TRUE(same_state(resumed->method_state(), want));
  }
}

// Without a gather, a sharded FALQON model's method state is refused, not read from a stale slot.
TEST(ShardedBackbone, FalqonStateIsGatheredFirst) {
  test::LocalShards shards(1);
  Replica one("falqon", false, &shards, 0);
  EXPECT_THROW(one.model->method_state(), Error);
  one.model->gather_method_state();
  EXPECT_FALSE(one.model->method_state().empty());
}

// Gathered once a step: a second call (a replica check, then a checkpoint of the same step) makes
// no collective; after a step it gathers again. Four layers, so two slots cannot hold them all.
TEST(ShardedBackbone, FalqonStateIsGatheredOnceAStep) {
  test::LocalShards shards(1);
  Replica one("falqon", false, &shards.rank(0), false, 4);
  one.model->gather_method_state();
  const int gathers = shards.gathers();
  one.model->gather_method_state();
  EXPECT_EQ(shards.gathers(), gathers);
  train_step(*one.model, *one.opt, std::span(&one.batch, 1), 1.0, 1e-3, 1);
  EXPECT_THROW(one.model->method_state(), Error);
  const int after_step = shards.gathers();
  one.model->gather_method_state();
  EXPECT_GT(shards.gathers(), after_step);
  EXPECT_FALSE(one.model->method_state().empty());
}

}  // namespace
}  // namespace loft::llama
