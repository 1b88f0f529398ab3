// The C API's memory plan fields (trine_model_params: mem_budget_bytes, plan_path, auto_plan,
// no_plan_cache, mlock, plan_n_ctx, plan_n_threads) and trine_model_plan_summary: a budget that
// streams every layer gives the logits of the plain load; a bad plan file is an error.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "trine/trine.h"

namespace {

const std::string kPlanModel = trine::testing::ModelPath("bitnet-tiny-stories-TQ2_0-f16emb.gguf");

std::vector<float> PromptLogits(trine_model* m) {
  trine_context_params cp = trine_context_default_params();
  cp.n_ctx = 64;
  cp.n_threads = 1;
  trine_context* ctx = trine_context_create(m, &cp);
  EXPECT_NE(ctx, nullptr) << trine_last_error();
  if (ctx == nullptr) return {};
  const trine_token toks[] = {1, 100, 200, 300, 400};
  EXPECT_EQ(trine_context_decode(ctx, toks, 5, true), TRINE_OK) << trine_last_error();
  std::vector<float> out;
  for (int i = 0; i < 5; ++i) {
    const float* lg = trine_context_get_logits(ctx, i);
    out.insert(out.end(), lg, lg + trine_model_n_vocab(m));
  }
  trine_context_free(ctx);
  return out;
}

TEST(CApiPlan, DefaultsHaveNoPlan) {
  const trine_model_params mp = trine_model_default_params();
  EXPECT_EQ(mp.mem_budget_bytes, 0u);
  EXPECT_EQ(mp.plan_path, nullptr);
  EXPECT_FALSE(mp.auto_plan);
  EXPECT_FALSE(mp.no_plan_cache);
  EXPECT_FALSE(mp.mlock);
  EXPECT_EQ(mp.plan_n_ctx, 0);
  EXPECT_EQ(mp.plan_n_threads, 0);
  EXPECT_EQ(mp.plan_kv_type, TRINE_KV_F16);
  trine_model* m = trine_model_load(kPlanModel.c_str(), &mp);
  ASSERT_NE(m, nullptr) << trine_last_error();
  EXPECT_STREQ(trine_model_plan_summary(m), "");
  trine_model_free(m);
  EXPECT_EQ(trine_model_plan_summary(nullptr), nullptr);
  EXPECT_EQ(trine_last_status(), TRINE_ERROR_INVALID_ARGUMENT);
}

TEST(CApiPlan, TinyBudgetStreamsEveryLayerWithTheSameLogits) {
  trine_model_params mp = trine_model_default_params();
  trine_model* plain = trine_model_load(kPlanModel.c_str(), &mp);
  ASSERT_NE(plain, nullptr) << trine_last_error();
  mp.mem_budget_bytes = 1024;  // smaller than anything: all 4 layers streamed
  mp.no_plan_cache = true;
  mp.plan_n_ctx = 64;
  trine_model* planned = trine_model_load(kPlanModel.c_str(), &mp);
  ASSERT_NE(planned, nullptr) << trine_last_error();
  const std::string summary = trine_model_plan_summary(planned);
  EXPECT_NE(summary.find("4 streamed"), std::string::npos) << summary;
  EXPECT_EQ(PromptLogits(planned), PromptLogits(plain));
  trine_model_free(planned);
  trine_model_free(plain);
}

// plan_kv_type is the cache the plan budgets for: a smaller type leaves more of the budget to
// weights; a value outside trine_kv_type (or TRINE_KV_SAME) is rejected.
TEST(CApiPlan, PlanKvTypeIsBudgeted) {
  trine_model_params mp = trine_model_default_params();
  mp.mem_budget_bytes = 1024;
  mp.no_plan_cache = true;
  mp.plan_n_ctx = 2048;
  auto summary = [&](trine_kv_type t) {
    mp.plan_kv_type = t;
    trine_model* m = trine_model_load(kPlanModel.c_str(), &mp);
    EXPECT_NE(m, nullptr) << trine_last_error();
    if (m == nullptr) return std::string();
    const std::string s = trine_model_plan_summary(m);
    trine_model_free(m);
    return s;
  };
  const std::string f32 = summary(TRINE_KV_F32), f16 = summary(TRINE_KV_F16), q4 = summary(TRINE_KV_Q4_0);
  EXPECT_NE(f32.find("KV cache f32"), std::string::npos) << f32;
  EXPECT_NE(f16.find("KV cache f16"), std::string::npos) << f16;
  EXPECT_NE(q4.find("KV cache q4_0"), std::string::npos) << q4;
  // The planned memory ("memory X MiB of ...") shrinks with the cache type.
  auto planned = [](const std::string& s) { return std::stod(s.substr(s.find("; memory ") + 9)); };
  EXPECT_GT(planned(f32), planned(f16));
  EXPECT_GT(planned(f16), planned(q4));
  for (int bad : {-1, 4, 1000}) {
    mp.plan_kv_type = static_cast<trine_kv_type>(bad);
    EXPECT_EQ(trine_model_load(kPlanModel.c_str(), &mp), nullptr) << bad;
    EXPECT_EQ(trine_last_status(), TRINE_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(trine_last_error()).find("plan_kv_type"), std::string::npos) << trine_last_error();
  }
}

// auto_plan profiles at load and reports through the load's progress callback (a second pass
// 0 -> 1); returning false during the profile cancels the load.
struct ProgressLog {
  std::vector<float> values;
  int stop_after = -1;  // return false on this call (-1: never)
};
bool RecordProgress(float f, void* ud) {
  auto* log = static_cast<ProgressLog*>(ud);
  log->values.push_back(f);
  return log->stop_after < 0 || static_cast<int>(log->values.size()) <= log->stop_after;
}

TEST(CApiPlan, AutoPlanProfilesWithProgressAndCancels) {
  const std::string cache = trine::testing::TempPath("capi-auto-cache");
  ASSERT_EQ(setenv("XDG_CACHE_HOME", cache.c_str(), 1), 0);
  ProgressLog log;
  trine_model_params mp = trine_model_default_params();
  mp.auto_plan = true;
  mp.no_plan_cache = true;
  mp.plan_n_ctx = 64;
  mp.plan_n_threads = 1;
  mp.progress_callback = RecordProgress;
  mp.progress_user_data = &log;
  trine_model* m = trine_model_load(kPlanModel.c_str(), &mp);
  ASSERT_NE(m, nullptr) << trine_last_error();
  EXPECT_NE(std::string(trine_model_plan_summary(m)).find("profiled"), std::string::npos) << trine_model_plan_summary(m);
  trine_model_free(m);
  // Two passes: the load's values reach 1, then the profile's start again below 1 and reach 1.
  size_t restarts = 0;
  for (size_t i = 1; i < log.values.size(); ++i) restarts += log.values[i] < log.values[i - 1] ? 1 : 0;
  EXPECT_EQ(restarts, 1u);
  ASSERT_FALSE(log.values.empty());
  EXPECT_FLOAT_EQ(log.values.back(), 1.0f);
  // Stop a few calls into the profile.
  const int load_calls = static_cast<int>(std::find(log.values.begin(), log.values.end(), 1.0f) - log.values.begin()) + 1;
  ProgressLog stop;
  stop.stop_after = load_calls + 3;
  mp.progress_user_data = &stop;
  EXPECT_EQ(trine_model_load(kPlanModel.c_str(), &mp), nullptr);
  EXPECT_EQ(trine_last_status(), TRINE_ERROR_CANCELLED) << trine_last_error();
  EXPECT_EQ(static_cast<int>(stop.values.size()), load_calls + 4);
  unsetenv("XDG_CACHE_HOME");
}

TEST(CApiPlan, BadPlanArgumentsAreErrors) {
  trine_model_params mp = trine_model_default_params();
  mp.plan_path = "/nonexistent/plan.json";
  EXPECT_EQ(trine_model_load(kPlanModel.c_str(), &mp), nullptr);
  EXPECT_EQ(trine_last_status(), TRINE_ERROR_IO);
  EXPECT_NE(std::string(trine_last_error()).find("/nonexistent/plan.json"), std::string::npos);
  const std::string bad = trine::testing::TempPath("not-a-plan.json");
  trine::testing::WriteFileBytes(bad, {'{', '}'});
  mp.plan_path = bad.c_str();
  EXPECT_EQ(trine_model_load(kPlanModel.c_str(), &mp), nullptr);
  EXPECT_EQ(trine_last_status(), TRINE_ERROR_INVALID_FILE);
  mp = trine_model_default_params();
  mp.plan_n_ctx = -1;
  EXPECT_EQ(trine_model_load(kPlanModel.c_str(), &mp), nullptr);
  EXPECT_EQ(trine_last_status(), TRINE_ERROR_INVALID_ARGUMENT);
  mp = trine_model_default_params();
  mp.mem_budget_bytes = 1024;
  mp.use_mmap = false;  // streaming needs the mapping
  EXPECT_EQ(trine_model_load(kPlanModel.c_str(), &mp), nullptr);
  EXPECT_EQ(trine_last_status(), TRINE_ERROR_UNSUPPORTED);
}

}  // namespace
