// Profiler, planner, plan cache and report: synthetic planner checks, a real profile of the
// bundled model, plan round trip and validation, the content hash, the report, and the CLI.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "common/test_util.h"
#include "profiler/plan.h"
#include "profiler/profiler.h"
#include "profiler/report.h"

namespace trine::profiler {
namespace {

const char* kModel = "bitnet-tiny-stories-TQ2_0-f16emb.gguf";

ModelConfig TinyConfig() {
  ModelConfig c;
  c.n_layer = 4;
  c.n_embd = 64;
  c.n_head = 4;
  c.n_head_kv = 4;
  c.n_ff = 128;
  c.head_dim = 16;
  c.n_ctx_train = 128;
  c.n_vocab = 256;
  return c;
}

// Four layers and a head with given KLs; each unit saves 1 ms with int8, weighs 1 MiB.
Plan SyntheticPlan(std::vector<double> kl, double max_kl, uint64_t budget) {
  Plan p;
  for (size_t i = 0; i < kl.size(); ++i) {
    PlanUnit u;
    u.layer = i + 1 < kl.size() ? static_cast<int>(i) : -1;
    u.unit = u.layer >= 0 ? "blk." + std::to_string(i) : "output";
    u.tensors = {u.unit + ".w"};
    u.kl_int8 = kl[i];
    u.ms_fp32 = 2;
    u.ms_int8 = 1;
    u.weight_bytes = 1 << 20;
    p.units.push_back(u);
  }
  p.key.max_kl = max_kl;
  p.key.mem_budget = budget;
  p.key.n_ctx = 128;
  p.pred_tok_s_fp32 = 100;  // 10 ms per token
  return p;
}

int CountInt8(const Plan& p) {
  int n = 0;
  for (const auto& u : p.units) n += u.precision == "int8";
  return n;
}

TEST(Planner, RespectsMaxKlAndPicksCheapestFirst) {
  Plan p = SyntheticPlan({0.004, 0.001, 0.02, 0.002, 0.0005}, 0.004, 1ull << 34);
  PlanFromProfile(TinyConfig(), 0, &p);
  EXPECT_LE(p.pred_kl, 0.004);
  EXPECT_EQ(p.units[4].precision, "int8");  // 0.0005
  EXPECT_EQ(p.units[1].precision, "int8");  // 0.001
  EXPECT_EQ(p.units[3].precision, "int8");  // 0.002 (total 0.0035)
  EXPECT_EQ(p.units[0].precision, "fp32");
  EXPECT_EQ(p.units[2].precision, "fp32");
  EXPECT_NEAR(p.pred_tok_s, 1000.0 / 7.0, 1e-9);
  EXPECT_EQ(p.tensors.size(), 5u);
  EXPECT_EQ(p.tensors["output.w"], "int8");
}

TEST(Planner, MonotoneInKlBudget) {
  int prev = -1;
  double prev_speed = 0;
  for (double max_kl : {0.0, 0.0006, 0.002, 0.004, 0.01, 0.1}) {
    Plan p = SyntheticPlan({0.004, 0.001, 0.02, 0.002, 0.0005}, max_kl, 1ull << 34);
    PlanFromProfile(TinyConfig(), 0, &p);
    EXPECT_LE(p.pred_kl, max_kl + 1e-15);
    EXPECT_GE(CountInt8(p), prev);
    EXPECT_GE(p.pred_tok_s, prev_speed);
    prev = CountInt8(p);
    prev_speed = p.pred_tok_s;
  }
  EXPECT_EQ(prev, 5);
}

TEST(Planner, NoGainNoInt8) {
  Plan p = SyntheticPlan({0, 0, 0, 0, 0}, 1, 1ull << 34);
  for (auto& u : p.units) u.ms_int8 = u.ms_fp32;
  PlanFromProfile(TinyConfig(), 0, &p);
  EXPECT_EQ(CountInt8(p), 0);
}

TEST(Planner, PlacementUnderMemoryBudget) {
  // Plenty of memory: every layer resident.
  Plan big = SyntheticPlan({0.004, 0.001, 0.02, 0.002, 0.0005}, 0.01, 1ull << 34);
  PlanFromProfile(TinyConfig(), 0, &big);
  for (const auto& u : big.units) EXPECT_EQ(u.placement, "resident") << u.unit;
  EXPECT_EQ(big.memory.weights, 5u << 20);
  EXPECT_GT(big.memory.kv, 0u);
  EXPECT_GT(big.memory.activations, 0u);
  // Tight budgets: the most sensitive layer (blk.2) stays resident longest; residency is monotone.
  const uint64_t fixed = big.memory.kv + big.memory.activations + big.memory.buffers + (1u << 20);
  int prev_resident = -1;
  for (uint64_t extra_mib : {0, 1, 2, 3, 4, 8}) {
    Plan p = SyntheticPlan({0.004, 0.001, 0.02, 0.002, 0.0005}, 0.01, fixed + (extra_mib << 20));
    PlanFromProfile(TinyConfig(), 0, &p);
    int resident = 0;
    for (const auto& u : p.units) {
      if (u.layer >= 0) resident += u.placement == "resident";
    }
    EXPECT_GE(resident, prev_resident) << extra_mib;
    prev_resident = resident;
    EXPECT_EQ(p.units.size(), 5u);  // never skips a layer
    if (extra_mib == 0) {
      EXPECT_EQ(resident, 0);
      EXPECT_EQ(p.memory.streamed, 4u << 20);
    }
    if (extra_mib == 2) {  // exactly the streamer's ring (2 slots x the largest layer): nothing else fits
      EXPECT_EQ(resident, 0);
      EXPECT_EQ(p.memory.stream_ring, 2u << 20);
      EXPECT_EQ(p.memory.streamed, 4u << 20);
    }
    if (extra_mib == 3) {  // ring + 1 MiB: the most sensitive layer in the page cache, the rest streamed
      EXPECT_EQ(p.units[2].placement, "page_cache");
      EXPECT_EQ(p.memory.page_cache, 1u << 20);
      EXPECT_EQ(p.memory.streamed, 3u << 20);
      EXPECT_EQ(p.memory.stream_ring, 2u << 20);
    }
    if (extra_mib >= 4) {  // every layer fits: all resident, no ring
      EXPECT_EQ(resident, 4);
      EXPECT_EQ(p.memory.stream_ring, 0u);
    }
    if (p.memory.streamed > 0) {
      EXPECT_EQ(p.memory.stream_ring, 2u << 20);
    }
    if (extra_mib >= 2) {  // what is planned in memory stays within the budget once the ring fits
      EXPECT_LE(fixed + p.memory.resident - (1u << 20) + p.memory.page_cache + p.memory.stream_ring, p.memory.budget);
    }
    EXPECT_EQ(p.memory.resident + p.memory.page_cache + p.memory.streamed, p.memory.weights);
  }
  EXPECT_EQ(prev_resident, 4);
}

// KV cache and head candidates: the planner takes the least memory overflow, then the fastest,
// then the lowest KL, always within max_kl (candidate KLs count against it).
Plan WithCandidates(double max_kl, uint64_t budget) {
  Plan p = SyntheticPlan({0.004, 0.001, 0.02, 0.002, 0.0005}, max_kl, budget);
  p.output_file_type = "f16";
  p.key.kv_type = "auto";  // the planner chooses the cache only when the key leaves it open
  p.kv_candidates = {{"f16", 4u << 20, 0, 0}, {"q8_0", 2u << 20, 0.0001, 0}, {"q4_0", 1u << 20, 0.003, 0}};
  p.output_candidates = {
      {"f16", 1u << 20, 0.0005, 1}, {"q8_0", 1u << 19, 0.0006, 0.5}, {"q4_0", 1u << 18, 0.02, 0.3}};
  return p;
}

TEST(Planner, KvAndHeadCandidates) {
  // Plenty of memory: the F16 cache (no speed difference, lowest KL); the q8_0 head (faster than
  // the file's f16 head at int8, 1 ms, within the KL budget); never the q4_0 head (KL 0.02 > max).
  Plan big = WithCandidates(0.01, 1ull << 34);
  PlanFromProfile(TinyConfig(), 0, &big);
  EXPECT_EQ(big.kv_type, "f16");
  EXPECT_EQ(big.output_type, "q8_0");
  EXPECT_EQ(big.memory.kv, 4u << 20);
  EXPECT_EQ(big.memory.weights, (4u << 20) + (1u << 19));
  EXPECT_EQ(big.tensors["output.w"], "int8");
  EXPECT_LE(big.pred_kl, 0.01);
  EXPECT_GE(big.pred_kl, 0.0006);
  const uint64_t need = big.memory.kv + big.memory.activations + big.memory.buffers + big.memory.weights;
  // 1 MiB short: the q8_0 cache fits; 3 MiB short: the q4_0 cache; with max_kl 0.002 the q4_0
  // cache (KL 0.003) is out and q8_0 overflows least among the rest.
  Plan a = WithCandidates(0.01, need - (1u << 20));
  PlanFromProfile(TinyConfig(), 0, &a);
  EXPECT_EQ(a.kv_type, "q8_0");
  EXPECT_EQ(a.memory.kv, 2u << 20);
  Plan b = WithCandidates(0.01, need - (3u << 20));
  PlanFromProfile(TinyConfig(), 0, &b);
  EXPECT_EQ(b.kv_type, "q4_0");
  EXPECT_LE(b.pred_kl, 0.01);
  Plan c = WithCandidates(0.002, need - (3u << 20));
  PlanFromProfile(TinyConfig(), 0, &c);
  EXPECT_EQ(c.kv_type, "q8_0");
  EXPECT_LE(c.pred_kl, 0.002);
  // Monotone: a smaller budget never takes a bigger cache or head.
  uint64_t prev_kv = ~0ull, prev_w = ~0ull;
  for (int short_mib = 0; short_mib <= 8; ++short_mib) {
    Plan p = WithCandidates(0.01, need - (static_cast<uint64_t>(short_mib) << 20));
    PlanFromProfile(TinyConfig(), 0, &p);
    EXPECT_LE(p.memory.kv, prev_kv) << short_mib;
    EXPECT_LE(p.memory.weights, prev_w) << short_mib;
    EXPECT_LE(p.pred_kl, 0.01 + 1e-12);
    prev_kv = p.memory.kv;
    prev_w = p.memory.weights;
  }
  // A KL budget below every cache but F16's, and 0: only exact choices.
  Plan z = WithCandidates(0.0, 1ull << 34);
  PlanFromProfile(TinyConfig(), 0, &z);
  EXPECT_EQ(z.kv_type, "f16");
  EXPECT_EQ(z.output_type, "f16");
  EXPECT_EQ(CountInt8(z), 0);
}

TEST(PlanFile, Version1PlansStillLoad) {
  nlohmann::json j = PlanToJson(SyntheticPlan({0.1, 0.1}, 0.01, 1 << 30));
  j["version"] = 1;
  j.erase("kv");
  j.erase("output");
  j["key"].erase("output_type");
  j["key"]["kv_type"] = "f32";
  Plan p;
  const Status st = PlanFromJson(j, "v1.json", &p);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(p.version, 1);
  EXPECT_EQ(p.kv_type, "f32");
  EXPECT_EQ(PlanKvType(p), KvType::kF32);
  EXPECT_EQ(PlanOutputType(p), TypeId::kCount);  // the file's head
  EXPECT_FALSE(PlanKeyMatches(p, p.model_hash, p.isa, p.ram_bytes, p.key));  // re-profiled, not reused
  // Version 2 with quantized choices round-trips; unknown types are clear errors.
  Plan q = WithCandidates(0.01, 1ull << 34);
  PlanFromProfile(TinyConfig(), 0, &q);
  q.kv_type = "q4_0";
  Plan back;
  ASSERT_TRUE(PlanFromJson(PlanToJson(q), "v2.json", &back).ok());
  EXPECT_EQ(PlanToJson(back), PlanToJson(q));
  EXPECT_EQ(PlanKvType(back), KvType::kQ4_0);
  EXPECT_EQ(PlanOutputType(back), TypeId::kQ8_0);
  nlohmann::json bad = PlanToJson(q);
  bad["kv"]["type"] = "q5_9";
  Status e = PlanFromJson(bad, "bad.json", &back);
  EXPECT_EQ(e.code(), StatusCode::kInvalidFile);
  EXPECT_NE(e.message().find("KV cache type"), std::string::npos) << e.message();
  bad = PlanToJson(q);
  bad["output"]["type"] = "q7_z";
  e = PlanFromJson(bad, "bad.json", &back);
  EXPECT_NE(e.message().find("output head type"), std::string::npos) << e.message();
}

// Integer fields accept integers in range only (found by fuzzing: a float past uint64's range was
// converted unchecked, which is undefined behaviour).
TEST(PlanFile, IntegerFieldsRejectFloatsAndOutOfRangeValues) {
  const nlohmann::json good = PlanToJson(SyntheticPlan({0.1, 0.2}, 0.01, 1 << 30));
  Plan back;
  ASSERT_TRUE(PlanFromJson(good, "good.json", &back).ok());
  struct Case {
    std::vector<std::string> path;
    nlohmann::json value;
    const char* field;
  } cases[] = {{{"machine", "ram_bytes"}, 4.19e20, "ram_bytes"},
               {{"machine", "ram_bytes"}, -1, "ram_bytes"},
               {{"key", "n_ctx"}, 1.5, "n_ctx"},
               {{"key", "n_ctx"}, 1ll << 40, "n_ctx"},
               {{"key", "seed"}, -3, "seed"},
               {{"memory", "kv"}, 1e30, "kv"},
               {{"model", "file_size"}, "12", "file_size"}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.field);
    nlohmann::json bad = good;
    nlohmann::json* at = &bad;
    for (const std::string& k : c.path) at = &(*at)[k];
    *at = c.value;
    const Status st = PlanFromJson(bad, "bad.json", &back);
    EXPECT_EQ(st.code(), StatusCode::kInvalidFile);
    EXPECT_NE(st.message().find(c.field), std::string::npos) << st.message();
  }
  nlohmann::json bad = good;
  bad["layers"][0]["layer"] = 0.5;
  EXPECT_EQ(PlanFromJson(bad, "bad.json", &back).code(), StatusCode::kInvalidFile);
  bad = good;
  bad["version"] = 1ll << 40;
  EXPECT_NE(PlanFromJson(bad, "bad.json", &back).message().find("version"), std::string::npos);
}

// The head requantized at load or later: close logits, the file's type restores them exactly.
TEST(OutputType, RequantizedHeadIsCloseAndRestores) {
  std::unique_ptr<Model> model;
  ASSERT_TRUE(Model::Load(testing::ModelPath(kModel), ModelLoadOptions(), &model).ok());
  ASSERT_EQ(model->output_file_type(), TypeId::kF16);
  const std::vector<int32_t> toks = {1, 100, 200, 300, 400, 500};
  auto logits = [&](const Model& m) {
    ContextParams cp;
    cp.n_ctx = 16;
    cp.n_threads = 1;
    std::unique_ptr<Context> ctx;
    EXPECT_TRUE(Context::Create(m, cp, &ctx).ok());
    EXPECT_TRUE(ctx->Decode(toks.data(), static_cast<int>(toks.size()), false).ok());
    return std::vector<float>(ctx->logits(0), ctx->logits(0) + ctx->n_vocab());
  };
  const std::vector<float> f16 = logits(*model);
  std::map<TypeId, std::vector<float>> by_type;
  for (TypeId t : {TypeId::kQ8_0, TypeId::kQ6_K, TypeId::kQ4_0}) {
    SCOPED_TRACE(TypeName(t));
    ASSERT_TRUE(model->SetOutputType(t).ok());
    EXPECT_EQ(model->output_type(), t);
    EXPECT_LT(model->output_bytes(), 2u * 256u * 2048u);
    const std::vector<float> q = logits(*model);
    float max_diff = 0;
    for (size_t i = 0; i < q.size(); ++i) max_diff = std::max(max_diff, std::fabs(q[i] - f16[i]));
    EXPECT_GT(max_diff, 0.0f);
    EXPECT_LT(max_diff, t == TypeId::kQ4_0 ? 1.5f : 0.5f);
    by_type[t] = q;
    // The same type given at load gives the same logits.
    ModelLoadOptions lo;
    lo.output_type = t;
    std::unique_ptr<Model> at_load;
    ASSERT_TRUE(Model::Load(testing::ModelPath(kModel), lo, &at_load).ok());
    EXPECT_EQ(logits(*at_load), q);
  }
  ASSERT_TRUE(model->SetOutputType(TypeId::kF16).ok());
  EXPECT_EQ(logits(*model), f16);
  // Switching back and forth swaps in the spare head (the last one left) or requantizes again:
  // the same logits either way, and the same bytes as bound.
  for (TypeId t : {TypeId::kQ4_0, TypeId::kQ8_0, TypeId::kQ4_0, TypeId::kF16, TypeId::kQ8_0, TypeId::kQ6_K}) {
    SCOPED_TRACE(std::string("again ") + TypeName(t));
    ASSERT_TRUE(model->SetOutputType(t).ok());
    EXPECT_EQ(model->output_type(), t);
    EXPECT_EQ(logits(*model), t == TypeId::kF16 ? f16 : by_type[t]);
  }
  model->DropSpareOutputHead();
  ASSERT_TRUE(model->SetOutputType(TypeId::kQ8_0).ok());
  EXPECT_EQ(logits(*model), by_type[TypeId::kQ8_0]);
  ASSERT_TRUE(model->SetOutputType(TypeId::kF16).ok());
  EXPECT_EQ(logits(*model), f16);
  const Status st = model->SetOutputType(TypeId::kI2_S);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("cannot requantize"), std::string::npos) << st.message();
  // A plan's head type is applied by ApplyPlan.
  Plan p = WithCandidates(0.01, 1ull << 34);
  p.units.clear();
  p.tensors.clear();
  p.output_type = "q8_0";
  ASSERT_TRUE(ApplyPlan(p, model.get(), false, nullptr).ok());
  EXPECT_EQ(model->output_type(), TypeId::kQ8_0);
}

TEST(Ranking, SpearmanAndTopK) {
  EXPECT_DOUBLE_EQ(Spearman({1, 2, 3, 4}, {10, 20, 30, 40}), 1.0);
  EXPECT_DOUBLE_EQ(Spearman({1, 2, 3, 4}, {4, 3, 2, 1}), -1.0);
  EXPECT_DOUBLE_EQ(TopKOverlap({1, 5, 3, 4}, {0, 9, 1, 8}, 2), 1.0);
  EXPECT_DOUBLE_EQ(TopKOverlap({1, 5, 3, 4}, {9, 0, 8, 1}, 2), 0.0);
}

// One real profile of the bundled model (single-threaded: no OpenMP barriers, robust when ctest
// shares the cores); the checks share it so ctest runs it once.
TEST(RealProfile, KlFiniteMaxKlRespectedAndFp32PlanExact) {
  std::unique_ptr<Model> model;
  ASSERT_TRUE(Model::Load(testing::ModelPath(kModel), ModelLoadOptions(), &model).ok());
  ProfileOptions options;
  options.samples = 4;
  options.n_threads = 1;
  Plan plan;
  plan.key.max_kl = 0.0002;
  plan.key.mem_budget = 1ull << 32;
  const Status st = ProfileModel(model.get(), options, &plan);
  ASSERT_TRUE(st.ok()) << st.message();

  ASSERT_EQ(plan.units.size(), static_cast<size_t>(model->config().n_layer) + 1);
  double total = 0;
  for (const auto& u : plan.units) {
    EXPECT_TRUE(std::isfinite(u.kl_int8)) << u.unit;
    EXPECT_GE(u.kl_int8, 0.0) << u.unit;
    EXPECT_GT(u.act_norm, 0.0) << u.unit;
    EXPECT_GT(u.ms_fp32, 0.0) << u.unit;
    EXPECT_GT(u.ms_int8, 0.0) << u.unit;
    EXPECT_FALSE(u.tensors.empty()) << u.unit;
    EXPECT_EQ(u.placement, "resident") << u.unit;
    total += u.kl_int8;
  }
  EXPECT_GT(total, 0.0);  // int8 activations do change the distributions a little
  EXPECT_TRUE(std::isfinite(plan.kl_all_int8));
  EXPECT_GT(plan.kl_all_int8, 0.0);
  EXPECT_LT(plan.kl_all_int8, 0.1);
  EXPECT_GE(plan.spearman, -1.0);
  EXPECT_LE(plan.spearman, 1.0);
  EXPECT_EQ(plan.tensors.size(), model->MatrixNames().size());

  // The planner respects --max-kl; the measured KL of the plan stays near the (additive) prediction.
  EXPECT_LE(plan.pred_kl, plan.key.max_kl);
  EXPECT_GE(plan.kl_plan, 0.0);
  EXPECT_LT(plan.kl_plan, 2 * plan.key.max_kl + 1e-6);
  {
    double kl = -1;
    ASSERT_TRUE(MeasurePlanKl(model.get(), options, plan, &kl).ok());
    EXPECT_NEAR(plan.kl_plan, kl, 1e-6 * kl + 1e-12);
  }

  // A plan applied to a loaded model gives the same logits as the same precisions given at load.
  {
    Plan mixed = plan;
    int i = 0;
    for (auto& [name, prec] : mixed.tensors) prec = (i++ % 3 == 0) ? "fp32" : "int8";
    ModelLoadOptions lo;
    lo.f32_activation_tensors = PlanF32Tensors(mixed);
    lo.output_type = PlanOutputType(mixed);  // the head type the plan chose (kCount: the file's)
    ASSERT_FALSE(lo.f32_activation_tensors.empty());
    std::unique_ptr<Model> at_load;
    ASSERT_TRUE(Model::Load(testing::ModelPath(kModel), lo, &at_load).ok());
    ASSERT_TRUE(ApplyPlan(mixed, model.get(), false, nullptr).ok());
    const std::vector<int32_t> toks = {1, 100, 200, 300, 400, 500};
    std::vector<std::vector<float>> logits;
    for (Model* m : {model.get(), at_load.get()}) {
      ContextParams cp;
      cp.n_ctx = 16;
      cp.n_threads = 1;
      std::unique_ptr<Context> ctx;
      ASSERT_TRUE(Context::Create(*m, cp, &ctx).ok());
      ASSERT_TRUE(ctx->Decode(toks.data(), static_cast<int>(toks.size()), false).ok());
      logits.emplace_back(ctx->logits(0), ctx->logits(0) + ctx->n_vocab());
    }
    EXPECT_EQ(logits[0], logits[1]);
    Plan bad = mixed;
    bad.tensors["no.such.weight"] = "fp32";
    EXPECT_FALSE(ApplyPlan(bad, model.get(), false, nullptr).ok());
  }

  // The all-fp32 plan reproduces the baseline.
  Plan fp32 = plan;
  for (auto& [name, prec] : fp32.tensors) prec = "fp32";
  fp32.output_type = fp32.output_file_type;  // and the file's head (the plan may requantize it)
  fp32.kv_type = "f16";                      // and the reference's KV cache (the plan may quantize it)
  double kl = -1;
  options.samples = 2;
  ASSERT_TRUE(MeasurePlanKl(model.get(), options, fp32, &kl).ok());
  EXPECT_GE(kl, 0.0);
  EXPECT_LT(kl, 1e-9);
}

TEST(Report, RoundTripAndWellFormedHtml) {
  Plan plan = SyntheticPlan({0.004, 0.001, 0.02, 0.002, 0.0005}, 0.004, 1ull << 34);
  for (size_t i = 0; i < plan.units.size(); ++i) plan.units[i].act_norm = 0.1 * static_cast<double>(i + 1);
  plan.model_path = "m<&>.gguf";  // escaped in the HTML
  plan.model_hash = "0123456789abcdef";
  plan.isa = "avx2";
  PlanFromProfile(TinyConfig(), 1000, &plan);
  const Plan* plan_ = &plan;
  const std::string path = testing::TempPath("plan.json");
  ASSERT_TRUE(WritePlanFile(*plan_, path).ok());
  Plan back;
  const Status st = ReadPlanFile(path, &back);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(PlanToJson(back), PlanToJson(*plan_));

  const std::string dir = testing::TempPath("report");
  ASSERT_TRUE(WriteReport(*plan_, dir).ok());
  EXPECT_TRUE(std::filesystem::exists(dir + "/report.json"));
  std::ifstream f(dir + "/report.html");
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string html = ss.str();
  for (const char* id : {"importance-chart", "time-chart", "memory-chart", "speed-chart", "plan-table"}) {
    EXPECT_NE(html.find(id), std::string::npos) << id;
  }
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("<link"), std::string::npos);  // self-contained
  // Well formed: every non-void element closes in order.
  std::vector<std::string> stack;
  size_t svgs = 0;
  for (size_t i = html.find('<'); i != std::string::npos; i = html.find('<', i + 1)) {
    const size_t end = html.find('>', i);
    ASSERT_NE(end, std::string::npos);
    std::string tag = html.substr(i + 1, end - i - 1);
    if (tag.empty() || tag[0] == '!') continue;
    const bool closing = tag[0] == '/';
    const bool self_closing = tag.back() == '/';
    std::string name = tag.substr(closing ? 1 : 0);
    name = name.substr(0, name.find_first_of(" /"));
    if (name == "meta" || self_closing) continue;
    if (closing) {
      ASSERT_FALSE(stack.empty()) << name;
      ASSERT_EQ(stack.back(), name);
      stack.pop_back();
    } else {
      stack.push_back(name);
      svgs += name == "svg";
    }
  }
  EXPECT_TRUE(stack.empty());
  EXPECT_EQ(svgs, 5u);  // importance, norms, time, memory, speed
  // The importance and norm charts' bars carry the JSON's numbers: KL per unit, activation norms.
  const auto chart_values = [&](const char* id) {
    std::vector<double> values;
    const size_t a = html.find(std::string("<svg id=\"") + id + "\"");
    if (a == std::string::npos) return values;
    const size_t b = html.find("</svg>", a);
    for (size_t i = html.find("data-value=\"", a); i < b; i = html.find("data-value=\"", i + 1)) {
      values.push_back(std::strtod(html.c_str() + i + 12, nullptr));
    }
    return values;
  };
  {
    const nlohmann::json j = PlanToJson(*plan_);
    const std::vector<double> kl = chart_values("importance-chart"), norm = chart_values("norm-chart");
    ASSERT_EQ(kl.size(), j["layers"].size());
    ASSERT_EQ(norm.size(), j["layers"].size());
    for (size_t u = 0; u < j["layers"].size(); ++u) {
      EXPECT_NEAR(kl[u], j["layers"][u]["kl_int8"].get<double>(), 1e-9);
      EXPECT_NEAR(norm[u], j["layers"][u]["act_norm"].get<double>(), 1e-8);
    }
  }
  EXPECT_NE(html.find("m&lt;&amp;&gt;.gguf"), std::string::npos);
  const std::string table = TerminalTable(*plan_);
  EXPECT_NE(table.find("blk.0"), std::string::npos);
  EXPECT_NE(table.find("output"), std::string::npos);
}

// The profiler's sensitivity runs resume at the unit's layer from the baseline's recorded stream
// (the samples concatenated into contexts of up to 128 tokens) and normalise in float; recomputed
// here from scratch through Context (whole passes, double log-softmax), every unit's KL must
// agree: KL(unit u fp32, the rest int8 || all int8). 12 samples of 12 tokens make two contexts.
TEST(RealProfile, ResumedSensitivityEqualsWholePasses) {
  std::unique_ptr<Model> model;
  ASSERT_TRUE(Model::Load(testing::ModelPath(kModel), ModelLoadOptions(), &model).ok());
  ProfileOptions options;
  options.samples = 12;
  options.sample_tokens = 12;
  options.n_threads = 1;
  Plan plan;
  plan.key.kv_type = "f16";
  // A q8_0 head candidate and a budget every plan exceeds: the planner takes the least overflow,
  // the smaller q8_0 head, whatever the timings, so the plan's layers run as the baseline's and its
  // head does not (the plan check then runs the head alone).
  plan.key.output_type = "q8_0";
  plan.key.mem_budget = 1ull << 20;
  ASSERT_TRUE(ProfileModel(model.get(), options, &plan).ok());
  ASSERT_EQ(plan.output_type, "q8_0");
  for (const auto& [t, prec] : plan.tensors) {
    if (t.rfind("blk.", 0) == 0) {
      ASSERT_EQ(prec, "int8") << t;
    }
  }
  const auto samples = ProfileSamples(*model, options);
  ASSERT_EQ(samples.size(), 12u);
  std::vector<std::vector<int32_t>> contexts;
  std::vector<std::vector<int>> scored;  // per context, the positions whose distributions count
  for (const auto& ids : samples) {
    if (contexts.empty() || contexts.back().size() + ids.size() > 128) {
      contexts.emplace_back();
      scored.emplace_back();
    }
    const int n = static_cast<int>(ids.size());
    for (int i = std::max(0, n - options.scored_positions); i < n; ++i) {
      scored.back().push_back(static_cast<int>(contexts.back().size()) + i);
    }
    contexts.back().insert(contexts.back().end(), ids.begin(), ids.end());
  }
  ASSERT_EQ(contexts.size(), 2u);
  // The plan check (whole passes, or the head alone when the layers run as in the baseline)
  // equals MeasurePlanKl's whole passes.
  {
    double kl = -1;
    ASSERT_TRUE(MeasurePlanKl(model.get(), options, plan, &kl).ok());
    EXPECT_NEAR(plan.kl_plan, kl, 1e-6 * kl + 1e-12);
  }
  const int V = model->config().n_vocab;
  // Log-probabilities at the scored positions with the model as it is; per sample the profiler
  // averages its rows, and both samples have the same number of rows.
  auto run = [&]() {
    std::vector<std::vector<double>> out;
    for (size_t k = 0; k < contexts.size(); ++k) {
    ContextParams cp;
    cp.n_ctx = static_cast<int>(contexts[k].size());
    cp.n_batch = cp.n_ctx;
    cp.n_threads = 1;
    std::unique_ptr<Context> ctx;
    EXPECT_TRUE(Context::Create(*model, cp, &ctx).ok());
    EXPECT_TRUE(ctx->Decode(contexts[k].data(), static_cast<int>(contexts[k].size()), true).ok());
    for (int i : scored[k]) {
      const float* lg = ctx->logits(i);
      double mx = -INFINITY, sum = 0;
      for (int v = 0; v < V; ++v) mx = std::max(mx, static_cast<double>(lg[v]));
      for (int v = 0; v < V; ++v) sum += std::exp(static_cast<double>(lg[v]) - mx);
      std::vector<double> lp(static_cast<size_t>(V));
      for (int v = 0; v < V; ++v) lp[static_cast<size_t>(v)] = static_cast<double>(lg[v]) - mx - std::log(sum);
      out.push_back(std::move(lp));
    }
    }
    return out;
  };
  const auto base = run();  // every matrix int8: the loaded model's default
  for (const PlanUnit& u : plan.units) {
    for (const std::string& t : u.tensors) ASSERT_TRUE(model->SetF32Activations(t, true).ok());
    const auto up = run();
    for (const std::string& t : u.tensors) ASSERT_TRUE(model->SetF32Activations(t, false).ok());
    double kl = 0;
    for (size_t r = 0; r < base.size(); ++r) {
      double k = 0;
      for (int v = 0; v < V; ++v) k += std::exp(up[r][static_cast<size_t>(v)]) * (up[r][static_cast<size_t>(v)] - base[r][static_cast<size_t>(v)]);
      kl += k;
    }
    kl /= static_cast<double>(base.size());
    EXPECT_GT(kl, 0.0) << u.unit;
    EXPECT_NEAR(u.kl_int8, kl, 1e-3 * kl + 1e-7) << u.unit;
  }
}

TEST(PlanFile, CorruptForeignAndFutureAreErrors) {
  Plan p;
  const std::string corrupt = testing::TempPath("corrupt.json");
  { std::ofstream(corrupt) << "{\"schema\": \"trine.plan\", \"version\": 1, "; }
  Status st = ReadPlanFile(corrupt, &p);
  EXPECT_EQ(st.code(), StatusCode::kInvalidFile);
  EXPECT_NE(st.message().find("corrupt"), std::string::npos) << st.message();

  nlohmann::json j = PlanToJson(SyntheticPlan({0.1, 0.1}, 0.01, 1 << 30));
  j["version"] = kPlanVersion + 1;
  st = PlanFromJson(j, "x.json", &p);
  EXPECT_EQ(st.code(), StatusCode::kInvalidFile);
  EXPECT_NE(st.message().find("newer"), std::string::npos) << st.message();

  j["version"] = kPlanVersion;
  j["schema"] = "something.else";
  EXPECT_EQ(PlanFromJson(j, "x.json", &p).code(), StatusCode::kInvalidFile);
  j["schema"] = kPlanSchema;
  EXPECT_TRUE(PlanFromJson(j, "x.json", &p).ok());
  j.erase("key");
  EXPECT_EQ(PlanFromJson(j, "x.json", &p).code(), StatusCode::kInvalidFile);
  EXPECT_EQ(ReadPlanFile("/nonexistent/plan.json", &p).code(), StatusCode::kIoError);
}

TEST(PlanFile, KeyMatching) {
  Plan p = SyntheticPlan({0.1}, 0.01, 1 << 30);
  p.model_hash = "abc";
  p.isa = "avx2";
  p.ram_bytes = 42;
  EXPECT_TRUE(PlanKeyMatches(p, "abc", "avx2", 42, p.key));
  EXPECT_FALSE(PlanKeyMatches(p, "abd", "avx2", 42, p.key));
  EXPECT_FALSE(PlanKeyMatches(p, "abc", "avx512", 42, p.key));
  PlanKey k = p.key;
  k.mem_budget += 1;
  EXPECT_FALSE(PlanKeyMatches(p, "abc", "avx2", 42, k));
  k = p.key;
  k.max_kl = 0.02;
  EXPECT_FALSE(PlanKeyMatches(p, "abc", "avx2", 42, k));
  // A plan that chose its KV cache serves loads running that cache, and only those.
  p.key.kv_type = "auto";
  p.kv_type = "q8_0";
  k = p.key;
  k.kv_type = "q8_0";
  EXPECT_TRUE(PlanKeyMatches(p, "abc", "avx2", 42, k));
  k.kv_type = "f16";
  EXPECT_FALSE(PlanKeyMatches(p, "abc", "avx2", 42, k));
}

TEST(ContentHash, OneByteChangesIt) {
  const std::string copy = testing::TempPath("flip.gguf");
  std::vector<uint8_t> bytes = testing::ReadFileBytes(testing::ModelPath(kModel));
  testing::WriteFileBytes(copy, bytes);
  std::unique_ptr<GgufFile> a, b;
  ASSERT_TRUE(GgufFile::Open(testing::ModelPath(kModel), &a).ok());
  ASSERT_TRUE(GgufFile::Open(copy, &b).ok());
  const std::string ha = ModelContentHash(*a);
  EXPECT_EQ(ha.size(), 16u);
  EXPECT_EQ(ModelContentHash(*b), ha);
  // Flip one byte in the middle of the last tensor's data.
  const GgufTensorInfo& t = b->tensors().back();
  const size_t off = static_cast<size_t>(t.file_offset + t.n_bytes / 2);
  b.reset();
  bytes[off] ^= 0x01;
  testing::WriteFileBytes(copy, bytes);
  ASSERT_TRUE(GgufFile::Open(copy, &b).ok());
  EXPECT_NE(ModelContentHash(*b), ha);
  bytes[off] ^= 0x01;
  // And one byte near the end of the largest tensor, past its first 256 KiB chunk (the hash
  // digests chunks on their own, across threads), with and without releasing the pages read.
  const GgufTensorInfo* big = &a->tensors()[0];
  for (const GgufTensorInfo& ti : a->tensors()) big = ti.n_bytes > big->n_bytes ? &ti : big;
  ASSERT_GT(big->n_bytes, 512u << 10) << "the bundled model should have a tensor of several chunks";
  const size_t off2 = static_cast<size_t>(big->file_offset + big->n_bytes - 5);
  b.reset();
  bytes[off2] ^= 0x80;
  testing::WriteFileBytes(copy, bytes);
  ASSERT_TRUE(GgufFile::Open(copy, &b).ok());
  const std::string hb = ModelContentHash(*b);
  EXPECT_NE(hb, ha);
  EXPECT_EQ(ModelContentHash(*b, /*release_pages=*/true), hb);
}

// The CLI: a profile is cached and reused; a changed file is re-profiled; bad plans exit 1.
TEST(ProfileCli, CacheHitMissAndPlanErrors) {
  const std::string cache = testing::TempPath("xdg-cache");
  std::filesystem::create_directories(cache);
  ASSERT_EQ(setenv("XDG_CACHE_HOME", cache.c_str(), 1), 0);
  const std::string model = testing::ModelPath(kModel);
  const std::string report = testing::TempPath("cli-report");
  const std::string plan_out = testing::TempPath("cli-plan.json");
  std::string out, err;
  ASSERT_EQ(testing::RunTrine("profile -m " + model + " -n 2 -t 1 --report " + report + " --plan-out " + plan_out, &out,
                              &err),
            0)
      << err;
  EXPECT_NE(out.find("profiled in"), std::string::npos) << out;
  EXPECT_TRUE(std::filesystem::exists(report + "/report.html"));
  EXPECT_TRUE(std::filesystem::exists(plan_out));
  ASSERT_EQ(testing::RunTrine("profile -m " + model + " -n 2 -t 1", &out, &err), 0) << err;
  EXPECT_NE(out.find("plan: plan cache"), std::string::npos) << out;
  // --no-cache re-profiles.
  ASSERT_EQ(testing::RunTrine("profile -m " + model + " -n 2 -t 1 -q --no-cache", &out, &err), 0) << err;
  EXPECT_NE(out.find("profiled in"), std::string::npos) << out;
  // The plan applies to the same model and is refused for a changed one.
  ASSERT_EQ(testing::RunTrine("profile -m " + model + " --plan " + plan_out, &out, &err), 0) << err;
  EXPECT_NE(out.find("plan: plan file"), std::string::npos) << out;
  std::vector<uint8_t> bytes = testing::ReadFileBytes(model);
  bytes[bytes.size() - 100] ^= 0x01;
  const std::string changed = testing::TempPath("changed.gguf");
  testing::WriteFileBytes(changed, bytes);
  EXPECT_EQ(testing::RunTrine("profile -m " + changed + " --plan " + plan_out, &out, &err), 1);
  EXPECT_NE(err.find("another model"), std::string::npos) << err;
  const std::string corrupt = testing::TempPath("cli-corrupt.json");
  { std::ofstream(corrupt) << "not json"; }
  EXPECT_EQ(testing::RunTrine("profile -m " + model + " --plan " + corrupt, &out, &err), 1);
  EXPECT_NE(err.find("corrupt"), std::string::npos) << err;
  // trine report re-renders from report.json.
  ASSERT_EQ(testing::RunTrine("profile -m " + model + " -n 2 -t 1 -q --report " + report +
                                  " --ppl-text models/text/tinystories-heldout.txt",
                              &out, &err),
            0)
      << err;
  {
    std::ifstream f(report + "/report.json");
    const nlohmann::json j = nlohmann::json::parse(f);
    EXPECT_GT(j["measured"]["tok_s"].get<double>(), 0.0);
    const double ppl = j["measured"]["ppl_plan"].get<double>(), ppl32 = j["measured"]["ppl_fp32"].get<double>();
    EXPECT_GT(ppl, 1.0);
    EXPECT_LT(std::fabs(ppl - ppl32) / ppl32, 0.01);  // the default plan costs < 1 % perplexity here
  }
  ASSERT_EQ(testing::RunTrine("report " + report, &out, &err), 0) << err;
  EXPECT_NE(out.find("blk.0"), std::string::npos);
  EXPECT_EQ(testing::RunTrine("report", &out, &err), 2);  // no DIR: bad usage
  EXPECT_EQ(testing::RunTrine("profile -m " + model + " --mem-budget lots", &out, &err), 1);
  // --json: the plan on stdout, nothing on stderr.
  ASSERT_EQ(testing::RunTrine("profile -m " + model + " -n 2 -t 1 --json", &out, &err), 0) << err;
  EXPECT_TRUE(err.empty()) << err;
  Plan parsed;
  EXPECT_TRUE(PlanFromJson(nlohmann::json::parse(out), "stdout", &parsed).ok());
}

}  // namespace
}  // namespace trine::profiler
