// The gradient-ready hook (TrainableModel::set_grad_ready_hook) and the all-reduce it lets
// overlap the backward (GradReducer, docs/multi-gpu.md step 2), on CPU replicas:
// - for every method, with adapters on every projection or on some (the others frozen), with and
//   without grad checkpointing, LlamaModel reports each layer's params right after that layer's
//   backward, last layer first, each once, and nothing adds to them afterwards (bit for bit);
// - train_step drives the hook into a GradReducer: with 2+ buckets the first is launched before
//   the backward of layer 0 has run, every grad is summed exactly once, and the step equals the
//   one whose sync learns nothing before sum(), bit for bit;
// - a hook that reports too early is caught, by the reducer's sums and by ThreadGradSum.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <random>
#include <set>

#include "engine/parallel/grad_reducer.h"
#include "engine/optim/adamw.h"
#include "engine/peft/method.h"
#include "engine/train/train_step.h"
#include "models/llama/bench_model.h"
#include "models/llama/model.h"
#include "tests/common/recording_comm.h"
#include "tests/common/thread_grad_sum.h"
#include "tests/common/tiny_llama.h"
#include "tests/common/token_stream.h"

namespace loft::llama {
namespace {

LlamaConfig config(int layers) {
  LlamaConfig c = test::tiny_llama_config();
  c.num_layers = layers;
  return c;
}

std::unique_ptr<LlamaModel> model(const std::string& method, const std::string& targets,
                                  int layers) {
  const LlamaConfig c = config(layers);
  MethodOptions m{method, {8, 16.0f}, parse_lora_targets(targets), 0};
  apply_method_invariants(m);
  std::mt19937_64 rng(1);
  return std::make_unique<LlamaModel>(c, random_llama_weights(c, DType::F32, Device::cpu(), 3),
                                      make_linear_factory(m, rng));
}

ModelBatch micro(int k) {  // micro-batch k of the trainer tests' fixed stream
  test::TokenStream stream;
  stream.restore(k);
  return *stream.next();
}

bool same_bytes(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// A step first, so that LoRA's B (zero at the start) is not, and no gradient is zero by chance.
void take_a_step(TrainableModel& m) {
  AdamW opt(m.params(), AdamWConfig{});
  const ModelBatch b = micro(0);
  train_step(m, opt, std::span(&b, 1), 1.0, 1e-2, 1);
}

TEST(GradReady, EveryMethodsLayerGradientsAreFinalWhenReported) {
  const int layers = 3;
  for (const std::string& method : method_names()) {
    for (const char* targets : {"all", "q_proj,down_proj"}) {
      for (bool checkpointing : {false, true}) {
        SCOPED_TRACE(std::string(method) + " " + targets + (checkpointing ? " checkpointed" : ""));
        auto m = model(method, targets, layers);
        m->set_grad_checkpointing(checkpointing);
        take_a_step(*m);
        m->forward_backward(micro(1), 0.01f);  // an earlier micro-batch: grads accumulate
        std::vector<std::vector<Param*>> reports;
        std::map<const Param*, std::vector<float>> at_report;
        m->set_grad_ready_hook([&](std::span<Param* const> ps) {
          reports.emplace_back(ps.begin(), ps.end());
          for (Param* p : ps) at_report[p] = p->grad.to_float_vector();
        });
        m->forward_backward(micro(2), 0.01f);
        m->set_grad_ready_hook({});
        // One report a layer, the last layer first, each with that layer's params.
        ASSERT_EQ(reports.size(), size_t(layers));
        std::vector<Param*> in_order;
        for (size_t i = 0; i < reports.size(); ++i) {
          const std::string layer = "model.layers." + std::to_string(layers - 1 - int(i)) + ".";
          EXPECT_FALSE(reports[i].empty());
          for (Param* p : reports[i]) {
            EXPECT_EQ(p->name.rfind(layer, 0), 0u) << p->name << " reported with " << layer;
            in_order.push_back(p);
          }
        }
        EXPECT_EQ(in_order, m->grad_order());
        const std::vector<Param*> all = m->params();
        EXPECT_EQ(std::set<Param*>(in_order.begin(), in_order.end()),
                  std::set<Param*>(all.begin(), all.end()));
        EXPECT_EQ(at_report.size(), all.size()) << "a param reported twice";
        for (Param* p : all)
          EXPECT_TRUE(same_bytes(at_report[p], p->grad.to_float_vector()))
              << p->name << " changed after it was reported ready";
      }
    }
  }
}

// LlamaModel as the trainer sees it, with what reaches its hook changed: Pass sets `mark` to the
// layer being reported (-1 outside the backward) and passes the report on; Hide keeps the hook
// from the model (a sync that learns nothing before sum()); Early reports every param with the
// first layer's report, before the other layers' backward has run.
enum class Hook { Pass, Hide, Early };

class Wrapped : public TrainableModel {
 public:
  Wrapped(LlamaModel& inner, Hook how, int* mark) : inner_(inner), how_(how), mark_(mark) {}
  LossSums forward_backward(const ModelBatch& b, float s) override {
    layer_ = inner_.config().num_layers;
    const LossSums r = inner_.forward_backward(b, s);
    if (mark_) *mark_ = -1;
    return r;
  }
  LossSums evaluate(const ModelBatch& b) override { return inner_.evaluate(b); }
  std::vector<Param*> params() override { return inner_.params(); }
  std::vector<Param*> grad_order() override { return inner_.grad_order(); }
  void after_step() override { inner_.after_step(); }
  void refresh_copies() override { inner_.refresh_copies(); }
  void set_grad_ready_hook(GradReadyHook hook) override {
    if (how_ == Hook::Hide || !hook) return inner_.set_grad_ready_hook({});
    inner_.set_grad_ready_hook([this, hook](std::span<Param* const> ps) {
      --layer_;
      if (mark_) *mark_ = layer_;
      if (how_ == Hook::Pass) return hook(ps);
      if (layer_ + 1 == inner_.config().num_layers) hook(inner_.grad_order());
    });
  }

 private:
  LlamaModel& inner_;
  Hook how_;
  int* mark_;
  int layer_ = 0;
};

struct Stepped {
  StepResult result;
  std::vector<std::vector<float>> values;
  // The last step's all-reduce groups: the params() index of each grad in it (-1: the scalars),
  // and the RecordingComm's mark at its launch.
  std::vector<std::vector<int>> groups;
  std::vector<int> launched_at;
  std::vector<BucketRange> buckets;
};

// Two steps of three micro-batches through a GradReducer on a RecordingComm (a world of two
// identical ranks): buckets of a third of a layer's gradients.
Stepped step_through_reducer(const std::string& method, Hook how) {
  const int layers = 3;
  auto m = model(method, "all", layers);
  Stepped out;
  size_t layer_bytes = 0;
  std::map<const Tensor*, int> index;
  for (Param* p : m->params()) {
    layer_bytes += p->grad.nbytes();
    index.emplace(&p->grad, int(index.size()));
  }
  layer_bytes /= size_t(layers);
  test::RecordingComm comm;
  comm.now = -1;
  Wrapped w(*m, how, &comm.now);
  GradReducer reducer(comm, layer_bytes / 3);
  AdamW opt(w.params(), AdamWConfig{.weight_decay = 0.01});
  for (int step = 1; step <= 2; ++step) {
    const std::vector<ModelBatch> batches{micro(3 * step), micro(3 * step + 1), micro(3 * step + 2)};
    int64_t targets = 0;
    for (const ModelBatch& b : batches) targets += b.target_count;
    const RankStep rank{&reducer, 2 * targets};
    comm.groups.clear();
    out.result = train_step(w, opt, batches, 1.0, 1e-3, step, &rank);
  }
  for (Param* p : m->params()) out.values.push_back(p->value.to_float_vector());
  for (const test::RecordingComm::Group& g : comm.groups) {
    out.groups.emplace_back();
    for (const Tensor* t : g.tensors) out.groups.back().push_back(index.count(t) ? index[t] : -1);
    out.launched_at.push_back(g.now);
  }
  out.buckets = reducer.buckets();
  return out;
}

TEST(GradReady, TheReducerSumsDuringTheBackwardAndTheStepIsUnchanged) {
  for (const std::string& method : method_names()) {
    SCOPED_TRACE(method);
    const Stepped after = step_through_reducer(method, Hook::Hide),
                  during = step_through_reducer(method, Hook::Pass);
    // The same groups on every rank whenever they were launched: one per bucket, the last with the
    // two loss scalars.
    ASSERT_GE(during.buckets.size(), 4u);
    EXPECT_EQ(during.buckets, after.buckets);
    ASSERT_EQ(during.groups.size(), during.buckets.size());
    ASSERT_EQ(after.groups.size(), during.groups.size());
    std::vector<int> summed(during.values.size(), 0);
    for (size_t g = 0; g < during.groups.size(); ++g) {
      const std::vector<int>& grp = during.groups[g];
      const bool last = g + 1 == during.groups.size();
      EXPECT_EQ(grp, after.groups[g]) << "group " << g;
      EXPECT_EQ(grp.size(), during.buckets[g].last - during.buckets[g].first + (last ? 1 : 0));
      for (int p : grp) {
        if (p >= 0) ++summed[size_t(p)];
        else EXPECT_TRUE(last && p == grp.back()) << "the scalars go last, in the last group";
      }
      EXPECT_EQ(after.launched_at[g], -1) << "without reports, every bucket waits for sum()";
    }
    for (size_t p = 0; p < summed.size(); ++p) EXPECT_EQ(summed[p], 1) << "param " << p;
    // The first bucket left while the last layer was reported, before layer 0's backward ran;
    // launches follow the backward; the last bucket goes with sum().
    const auto progress = [](int now) { return now < 0 ? 3 : 3 - now; };  // layers done by then
    EXPECT_EQ(progress(during.launched_at.front()), 1);
    for (size_t g = 1; g < during.groups.size(); ++g)
      EXPECT_LE(progress(during.launched_at[g - 1]), progress(during.launched_at[g]));
    EXPECT_EQ(progress(during.launched_at.back()), 3);
    EXPECT_EQ(during.result.loss_sum, after.result.loss_sum);
    EXPECT_EQ(during.result.grad_norm, after.result.grad_norm);
    ASSERT_EQ(during.values.size(), after.values.size());
    for (size_t p = 0; p < during.values.size(); ++p)
      EXPECT_TRUE(same_bytes(during.values[p], after.values[p])) << "param " << p;
  }
}

TEST(GradReady, AReportTooEarlyIsCaught) {
  // By the reducer's sums: a bucket summed before its gradients were final ends wrong.
  const Stepped after = step_through_reducer("lora", Hook::Hide),
                early = step_through_reducer("lora", Hook::Early);
  bool differ = early.result.grad_norm != after.result.grad_norm;
  for (size_t p = 0; p < early.values.size(); ++p) differ |= !same_bytes(early.values[p], after.values[p]);
  EXPECT_TRUE(differ) << "a sum launched too early went unnoticed";
  // By ThreadGradSum, before the ranks exchange anything.
  for (Hook how : {Hook::Pass, Hook::Early}) {
    auto m = model("falqon", "all", 3);
    Wrapped w(*m, how, nullptr);
    AdamW opt(w.params(), AdamWConfig{});
    test::ThreadGradSum sum(1);
    const std::vector<ModelBatch> batches{micro(1), micro(2)};
    const RankStep rank{&sum.rank(0), batches[0].target_count + batches[1].target_count};
    if (how == Hook::Pass) {
      EXPECT_NO_THROW(train_step(w, opt, batches, 1.0, 1e-3, 1, &rank));
      continue;
    }
    try {
      train_step(w, opt, batches, 1.0, 1e-3, 1, &rank);
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("changed after it was reported ready"), std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace loft::llama
