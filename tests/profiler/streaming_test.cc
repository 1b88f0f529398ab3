// Memory placements: streamed layers (pread into a ring) give exactly the logits and greedy tokens
// of the mapped model, on bitnet and llama models and with repacked (TQ1_0) weights; placements
// can change after load; the streamer survives out-of-order visits; a budget-only plan; and the
// peak RSS of `trine generate --mem-budget` (VmHWM, in a child process) stays under budget + 10 %.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <sys/stat.h>

#include <cstring>
#include <filesystem>

#include "common/test_util.h"
#include "core/page_memory.h"
#include "profiler/plan.h"
#include "profiler/plan_load.h"
#include "profiler/profiler.h"
#include "runtime/context.h"
#include "runtime/weight_streamer.h"

namespace trine {
namespace {

struct GenRun {
  std::vector<float> logits;    // every position of the prompt, then each greedy step's
  std::vector<int32_t> tokens;  // greedy continuation
};

int Argmax(const float* v, int n) {
  int best = 0;
  for (int i = 1; i < n; ++i) {
    if (v[i] > v[best]) best = i;
  }
  return best;
}

// A 6-token prompt with all logits, then `steps` greedy single-token decodes (two batches of
// prompt via n_batch 4 exercise several passes per Decode).
GenRun Generate(const Model& m, int steps, int slots = 2) {
  GenRun r;
  ContextParams cp;
  cp.n_ctx = 64;
  cp.n_batch = 4;
  cp.n_threads = 2;
  cp.stream_slots = slots;
  std::unique_ptr<Context> ctx;
  Status st = Context::Create(m, cp, &ctx);
  EXPECT_TRUE(st.ok()) << st.message();
  if (!st.ok()) return r;
  const std::vector<int32_t> prompt = {1, 100, 200, 300, 400, 500};
  st = ctx->Decode(prompt.data(), static_cast<int>(prompt.size()), true);
  EXPECT_TRUE(st.ok()) << st.message();
  const int V = ctx->n_vocab();
  r.logits.assign(ctx->logits(0), ctx->logits(0) + prompt.size() * static_cast<size_t>(V));
  int32_t tok = Argmax(ctx->logits(static_cast<int>(prompt.size()) - 1), V);
  for (int i = 0; i < steps; ++i) {
    r.tokens.push_back(tok);
    st = ctx->Decode(&tok, 1, false);
    EXPECT_TRUE(st.ok()) << st.message();
    r.logits.insert(r.logits.end(), ctx->logits(0), ctx->logits(0) + V);
    tok = Argmax(ctx->logits(0), V);
  }
  return r;
}

std::unique_ptr<Model> Load(const std::string& name, std::vector<Placement> placements = {}) {
  ModelLoadOptions lo;
  lo.layer_placements = std::move(placements);
  std::unique_ptr<Model> m;
  const Status st = Model::Load(testing::ModelPath(name), lo, &m);
  EXPECT_TRUE(st.ok()) << st.message();
  return m;
}

struct StreamCase {
  const char* model;
  std::vector<Placement> placements;
  int slots;
};

class Streaming : public ::testing::TestWithParam<StreamCase> {};

TEST_P(Streaming, SameLogitsAndTokensAsMapped) {
  const StreamCase& c = GetParam();
  std::unique_ptr<Model> mapped = Load(c.model);
  std::unique_ptr<Model> streamed = Load(c.model, c.placements);
  ASSERT_TRUE(mapped && streamed);
  EXPECT_TRUE(streamed->has_streamed_layers());
  for (size_t l = 0; l < c.placements.size(); ++l) {
    EXPECT_EQ(streamed->placement(static_cast<int>(l)), c.placements[l]);
    if (c.placements[l] == Placement::kStreamed) {
      for (const auto* w : streamed->layers()[l].Matrices()) EXPECT_EQ(w->data, nullptr);  // not mapped
    }
  }
  const GenRun a = Generate(*mapped, 12);
  const GenRun b = Generate(*streamed, 12, c.slots);
  EXPECT_EQ(a.tokens, b.tokens);
  ASSERT_EQ(a.logits.size(), b.logits.size());
  EXPECT_EQ(0, std::memcmp(a.logits.data(), b.logits.data(), a.logits.size() * sizeof(float)));
}

using P = Placement;
constexpr P S = P::kStreamed, R = P::kResident, C = P::kPageCache;
INSTANTIATE_TEST_SUITE_P(
    Models, Streaming,
    ::testing::Values(
        // bitnet TQ2_0: every layer streamed through 2 slots (the ring cycles), 1 slot, and mixed.
        StreamCase{"bitnet-tiny-stories-TQ2_0-f16emb.gguf", {S, S, S, S}, 2},
        StreamCase{"bitnet-tiny-stories-TQ2_0-f16emb.gguf", {S, S, S, S}, 1},
        StreamCase{"bitnet-tiny-stories-TQ2_0-f16emb.gguf", {R, S, C, S}, 2},  // 2 streamed = 2 slots: kept
        StreamCase{"bitnet-tiny-stories-TQ2_0-f16emb.gguf", {S, R, S, S}, 2},
        // TQ1_0: repacked to TQ2_0 after every read.
        StreamCase{"bitnet-tiny-stories-TQ1_0-f16emb.gguf", {S, S, R, S}, 2},
        // llama: Q4_0 and TQ1_0 (repack) weights.
        StreamCase{"tiny-tern-q4_0.gguf", {S, S, S, C}, 2},
        StreamCase{"tiny-tern-tq1_0-e8.gguf", {C, S, S, S}, 3}),
    [](const ::testing::TestParamInfo<StreamCase>& pi) { return "case" + std::to_string(pi.index); });

TEST(Placement, ChangesAfterLoadAndContextsFollow) {
  std::unique_ptr<Model> ref = Load("bitnet-tiny-stories-TQ2_0-f16emb.gguf");
  std::unique_ptr<Model> m = Load("bitnet-tiny-stories-TQ2_0-f16emb.gguf");
  const GenRun want = Generate(*ref, 6);
  ContextParams cp;
  cp.n_ctx = 64;
  cp.n_threads = 1;
  std::unique_ptr<Context> ctx;
  ASSERT_TRUE(Context::Create(*m, cp, &ctx).ok());
  EXPECT_EQ(ctx->streamer(), nullptr);
  for (int l = 0; l < 4; ++l) ASSERT_TRUE(m->SetLayerPlacement(l, l == 2 ? P::kResident : P::kStreamed, false).ok());
  EXPECT_GT(m->placement_epoch(), 0u);
  const GenRun streamed = Generate(*m, 6);
  EXPECT_EQ(streamed.tokens, want.tokens);
  EXPECT_EQ(streamed.logits, want.logits);
  // The context made before the change rebuilds its streamer at its next decode.
  const int32_t tok = 1;
  ASSERT_TRUE(ctx->Decode(&tok, 1, false).ok());
  ASSERT_NE(ctx->streamer(), nullptr);
  EXPECT_GT(ctx->streamer()->stats().layers_read, 0u);
  // And back to mapped.
  for (int l = 0; l < 4; ++l) ASSERT_TRUE(m->SetLayerPlacement(l, P::kPageCache, false).ok());
  EXPECT_FALSE(m->has_streamed_layers());
  const GenRun back = Generate(*m, 6);
  EXPECT_EQ(back.logits, want.logits);
  EXPECT_FALSE(m->SetLayerPlacement(4, P::kStreamed, false).ok());
}

TEST(Placement, TQ1RepackedLayersSwitchBothWays) {
  std::unique_ptr<Model> ref = Load("bitnet-tiny-stories-TQ1_0-f16emb.gguf");
  std::unique_ptr<Model> m = Load("bitnet-tiny-stories-TQ1_0-f16emb.gguf", {S, S, S, S});
  for (int l = 0; l < 4; ++l) ASSERT_TRUE(m->SetLayerPlacement(l, P::kResident, false).ok());
  EXPECT_EQ(Generate(*m, 4).logits, Generate(*ref, 4).logits);
}

TEST(Placement, StreamingNeedsAMappedFile) {
  ModelLoadOptions lo;
  lo.use_mmap = false;
  lo.layer_placements = {S, S, S, S};
  std::unique_ptr<Model> m;
  const Status st = Model::Load(testing::ModelPath("bitnet-tiny-stories-TQ2_0-f16emb.gguf"), lo, &m);
  EXPECT_EQ(st.code(), StatusCode::kUnsupported);
  EXPECT_NE(st.message().find("memory-mapped"), std::string::npos) << st.message();
  lo.layer_placements = {S, S};
  lo.use_mmap = true;
  EXPECT_EQ(Model::Load(testing::ModelPath("bitnet-tiny-stories-TQ2_0-f16emb.gguf"), lo, &m).code(),
            StatusCode::kInvalidArgument);
}

// Visits in any order (a failed or partial pass) get the right bytes.
TEST(WeightStreamer, OutOfOrderVisitsResynchronise) {
  std::unique_ptr<Model> m = Load("tiny-tern-q4_0.gguf", {S, S, S, S});
  std::unique_ptr<WeightStreamer> ws;
  ASSERT_TRUE(WeightStreamer::Create(*m, 2, &ws).ok());
  EXPECT_EQ(ws->n_slots(), 2);
  EXPECT_GT(ws->ring_bytes(), 0u);
  for (int layer : {0, 1, 2, 3, 0, 1, 3, 0, 2, 2, 1, 0, 1, 2, 3}) {
    const LayerWeights* w = nullptr;
    ASSERT_TRUE(ws->Acquire(layer, &w).ok());
    const auto views = w->Matrices();
    for (size_t i = 0; i < views.size(); ++i) {
      const StreamMatrix& sm = m->stream_matrices(layer)[i];
      const GgufTensorInfo* t = m->file().FindTensor(sm.name);
      ASSERT_NE(t, nullptr);
      ASSERT_EQ(0, std::memcmp(views[i]->data, t->data, t->n_bytes)) << sm.name;
      EXPECT_EQ(views[i]->gemm, m->layers()[static_cast<size_t>(layer)].Matrices()[i]->gemm);
    }
    ws->Release(layer);
  }
  EXPECT_GE(ws->stats().layers_read, 15u);
}

TEST(PlanLoad, BudgetOnlyPlanStreamsAndMatches) {
  const std::string path = testing::ModelPath("bitnet-tiny-stories-TQ2_0-f16emb.gguf");
  profiler::PlanRequest req;
  req.mem_budget = 1;  // nothing fits: every layer streamed (and the summary says over budget)
  req.no_cache = true;
  req.n_ctx = 64;
  std::unique_ptr<Model> m;
  profiler::PlanOutcome out;
  const Status st = profiler::LoadModelWithPlan(path, ModelLoadOptions(), req, &m, &out);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_TRUE(out.active);
  EXPECT_EQ(out.plan.samples, 0);
  for (int l = 0; l < 4; ++l) EXPECT_EQ(m->placement(l), P::kStreamed);
  EXPECT_NE(out.summary.find("0 resident / 0 page cache / 4 streamed"), std::string::npos) << out.summary;
  EXPECT_NE(out.summary.find("OVER BUDGET"), std::string::npos) << out.summary;
  EXPECT_EQ(out.plan.memory.stream_ring, 2 * out.plan.units[0].weight_bytes);
  std::unique_ptr<Model> ref = Load("bitnet-tiny-stories-TQ2_0-f16emb.gguf");
  EXPECT_EQ(Generate(*m, 4).logits, Generate(*ref, 4).logits);

  // A generous budget keeps every layer resident; no budget, no plan.
  req.mem_budget = 1ull << 32;
  ASSERT_TRUE(profiler::LoadModelWithPlan(path, ModelLoadOptions(), req, &m, &out).ok());
  for (int l = 0; l < 4; ++l) EXPECT_EQ(m->placement(l), P::kResident);
  ASSERT_TRUE(profiler::LoadModelWithPlan(path, ModelLoadOptions(), profiler::PlanRequest(), &m, &out).ok());
  EXPECT_FALSE(out.active);
  for (int l = 0; l < 4; ++l) EXPECT_EQ(m->placement(l), P::kPageCache);

  // A plan file for another model is refused.
  profiler::Plan other = out.plan;
  other.model_hash = "0123456789abcdef";
  const std::string plan_path = testing::TempPath("other-plan.json");
  ASSERT_TRUE(profiler::WritePlanFile(other, plan_path).ok());
  req = profiler::PlanRequest();
  req.plan_path = plan_path;
  const Status bad = profiler::LoadModelWithPlan(path, ModelLoadOptions(), req, &m, &out);
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("another model"), std::string::npos) << bad.message();
}

TEST(PlanLoad, ParseMemBudget) {
  EXPECT_EQ(profiler::ParseMemBudget("123"), 123u);
  EXPECT_EQ(profiler::ParseMemBudget("2K"), 2048u);
  EXPECT_EQ(profiler::ParseMemBudget("1.5M"), 1572864u);
  EXPECT_EQ(profiler::ParseMemBudget("1G"), 1ull << 30);
  EXPECT_GT(profiler::ParseMemBudget("50%"), 0u);
  for (const char* bad : {"", "0", "-5", "12X", "150%", "abc"}) EXPECT_EQ(profiler::ParseMemBudget(bad), 0u) << bad;
}

// Peak RSS under --mem-budget = 50 % of the file, measured by the child `trine generate` itself
// (VmHWM from /proc/self/status, in its --json timings): a bitnet-2b-shaped model with 8 layers
// and a 32000-token vocabulary (~164 MB; real layer sizes, so the ring holds two 17 MB layers).
TEST(PlanLoad, PeakRssStaysUnderHalfFileBudget) {
  const std::string model = testing::TempPath("rss-8layer.gguf");
  std::string out, err;
  ASSERT_EQ(testing::RunTrine("mkmodel -o " + model +
                                  " --preset bitnet-2b --layers 8 --type tq2_0 --token-embedding-type tq2_0 "
                                  "--vocab " + testing::ModelPath("vocab/ggml-vocab-llama-spm.gguf") + " -t 2",
                              &out, &err),
            0)
      << err;
  struct stat sb;
  ASSERT_EQ(::stat(model.c_str(), &sb), 0);
  const uint64_t file = static_cast<uint64_t>(sb.st_size);
  const uint64_t budget = file / 2;
  auto peak = [&](const std::string& extra, std::vector<int>* ids, std::string* plan) -> uint64_t {
    std::string o, e;
    const int rc = testing::RunTrine("generate -m " + model + " -p 'Once upon a time' -n 4 --temp 0 -c 64 -t 2 --json " +
                                         extra,
                                     &o, &e);
    EXPECT_EQ(rc, 0) << e;
    if (rc != 0) return 0;
    const nlohmann::json j = nlohmann::json::parse(o);
    *ids = j["generated_ids"].get<std::vector<int>>();
    *plan = j.value("plan", "");
    return j["timings"]["peak_rss_bytes"].get<uint64_t>();
  };
  std::vector<int> ids_full, ids_budget;
  std::string plan_full, plan_budget;
  const uint64_t full = peak("", &ids_full, &plan_full);
  const uint64_t constrained = peak("--no-cache --mem-budget " + std::to_string(budget), &ids_budget, &plan_budget);
  EXPECT_TRUE(plan_full.empty());
  EXPECT_NE(plan_budget.find("streamed"), std::string::npos) << plan_budget;
  EXPECT_EQ(ids_full, ids_budget);
  // The budget matters: unconstrained, the whole file is mapped and read.
  EXPECT_GT(full, budget * 11 / 10) << "file " << file;
  EXPECT_LE(constrained, budget * 11 / 10) << "file " << file << ", unconstrained peak " << full << ", " << plan_budget;
}

}  // namespace
}  // namespace trine
