// Activation precision per weight: with every matmul on fp32 activations, the TQ files of the
// trained model reproduce llama.cpp's F32 reference of the same weights (the alternative
// parity path), and switching precision at run time is reversible.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>

#include "common/test_util.h"
#include "model/model.h"
#include "runtime/context.h"

namespace trine {
namespace {

float MaxTop20Diff(const Model& model, const nlohmann::json& prompt) {
  ContextParams cp;
  cp.n_ctx = 64;
  cp.n_threads = 1;
  std::unique_ptr<Context> ctx;
  EXPECT_TRUE(Context::Create(model, cp, &ctx).ok());
  const auto ids = prompt["prompt_tokens"].get<std::vector<int>>();
  EXPECT_TRUE(ctx->Decode(ids.data(), static_cast<int>(ids.size()), false).ok());
  float d = 0.0f;
  for (const auto& pair : prompt["last_logits_top20"]) {
    d = std::max(d, std::fabs(ctx->logits()[pair[0].get<int>()] - pair[1].get<float>()));
  }
  return d;
}

TEST(ActivationPrecision, TernaryFilesWithF32ActivationsMatchF32Reference) {
  std::ifstream in(testing::ModelPath("ref/bitnet-tiny-stories-f32.json"));
  const nlohmann::json ref = nlohmann::json::parse(in);
  for (const char* file : {"bitnet-tiny-stories-TQ2_0-f16emb.gguf", "bitnet-tiny-stories-TQ1_0-f16emb.gguf"}) {
    SCOPED_TRACE(file);
    std::unique_ptr<Model> probe;
    ASSERT_TRUE(Model::Load(testing::ModelPath(file), ModelLoadOptions(), &probe).ok());
    ModelLoadOptions lo;
    lo.f32_activation_tensors = probe->MatrixNames();
    std::unique_ptr<Model> model;
    ASSERT_TRUE(Model::Load(testing::ModelPath(file), lo, &model).ok());
    for (const auto& p : ref["prompts"]) {
      // The output matrix is F16 here (F32 in the reference file): a few 1e-3 of difference.
      EXPECT_LT(MaxTop20Diff(*model, p), 0.02f) << p["prompt"];
    }
  }
}

TEST(ActivationPrecision, SwitchingBackRestoresBitExactLogits) {
  std::unique_ptr<Model> model;
  ASSERT_TRUE(Model::Load(testing::ModelPath("bitnet-tiny-stories-TQ2_0-f16emb.gguf"), ModelLoadOptions(), &model).ok());
  std::ifstream in(testing::ModelPath("ref/bitnet-tiny-stories-TQ2_0-f16emb.json"));
  const nlohmann::json ref = nlohmann::json::parse(in);
  const auto& p = ref["prompts"][0];
  const float before = MaxTop20Diff(*model, p);
  ASSERT_TRUE(model->SetF32Activations("blk.2.ffn_down.weight", true).ok());
  const float changed = MaxTop20Diff(*model, p);
  ASSERT_TRUE(model->SetF32Activations("blk.2.ffn_down.weight", false).ok());
  EXPECT_EQ(MaxTop20Diff(*model, p), before);
  EXPECT_NE(changed, before);
  EXPECT_FALSE(model->SetF32Activations("blk.99.nope.weight", true).ok());
}

}  // namespace
}  // namespace trine
