// Parity with llama.cpp at the llama-1b shape (issue 34): E 2048, 32/8 heads, F 8192, the 128256-token
// Llama-3 BPE vocabulary, rope_freqs, TQ2_0 layers with the tied embedding in Q6_K or Q8_0, as
// `trine mkmodel --preset llama-1b` writes them, with 4 layers instead of 16 so that the two files
// are made at test time (~10 s each on 2 cores). The references (models/ref/llama-1b-l4-*.json)
// come from llama.cpp on the very same bytes: each JSON carries the FNV-1a 64 of the model file,
// checked here. tests/model/ref_dumper/README.md has the command that regenerates them and the
// experiments behind kTop20Tolerance.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <fstream>

#include "common/test_util.h"
#include "model/model.h"
#include "runtime/context.h"
#include "tokenizer/tokenizer.h"

namespace trine {
namespace {

// The floor, measured (ref_dumper/README.md, "Floor"): with every operator in llama.cpp's order
// (the TQ2_0 dot product in llama.cpp's AVX2 lane order, experiments/tq2_llama_avx2_lane_order.patch)
// trine's top-20 logits equal llama.cpp's within 1e-6 on these files. trine's kernels sum each TQ2_0
// dot product block by block instead (one fp32 value per block, bit-identical across ISAs); that
// ulp-level difference, turned into whole int8 steps by the next Q8_K activation rounding, moves
// the top-20 logits by up to 0.050 here (0.056 at 16 layers), and an ulp-level nudge inside
// llama.cpp itself moves its own logits by the same amount. 0.08 holds that floor with room; an
// operator that is wrong (RoPE factors, the head, a norm) moves them by far more.
constexpr float kTop20Tolerance = 0.08f;
// Greedy tokens are compared while the reference's top-2 margin exceeds what two logits each off by
// the tolerance can swap.
constexpr float kMarginFloor = 2.0f * kTop20Tolerance;
constexpr int kLayers = 4;

struct ShapeCase {
  const char* name;
  const char* mkmodel_args;  // after --preset llama-1b --layers 4
  const char* ref;           // under models/ref/
};

class Llama1bShapeParity : public ::testing::TestWithParam<ShapeCase> {};

std::string FileFnv1a64(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  uint64_t h = 1469598103934665603ull;
  std::vector<char> buf(1 << 20);
  while (f.read(buf.data(), static_cast<std::streamsize>(buf.size())) || f.gcount() > 0) {
    const std::streamsize n = f.gcount();
    for (std::streamsize i = 0; i < n; ++i) h = (h ^ static_cast<unsigned char>(buf[static_cast<size_t>(i)])) * 1099511628211ull;
  }
  char out[32];
  std::snprintf(out, sizeof(out), "%016" PRIx64, h);
  return out;
}

int Argmax(const float* v, int n) {
  int best = 0;
  for (int i = 1; i < n; ++i) {
    if (v[i] > v[best]) best = i;  // lowest id wins ties
  }
  return best;
}

TEST_P(Llama1bShapeParity, TopLogitsAndGreedyTokensMatchLlamaCpp) {
  const ShapeCase& sc = GetParam();
  const std::string path = testing::TempPath(std::string(sc.name) + ".gguf");
  std::string out, err;
  ASSERT_EQ(testing::RunTrine("mkmodel --preset llama-1b --layers " + std::to_string(kLayers) + " " + sc.mkmodel_args +
                                  " -t 2 -o '" + path + "'",
                              &out, &err),
            0)
      << err;
  std::ifstream in(testing::ModelPath(std::string("ref/") + sc.ref));
  ASSERT_TRUE(in.good()) << sc.ref;
  const nlohmann::json ref = nlohmann::json::parse(in, nullptr, true, false);
  // Same options and seed give the same bytes (mkmodel's contract): the reference is for this file.
  ASSERT_EQ(FileFnv1a64(path), ref["model_fnv1a64"].get<std::string>()) << "mkmodel wrote other bytes than the reference's file";

  std::unique_ptr<Model> model;
  Status st = Model::Load(path, ModelLoadOptions(), &model);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_EQ(model->config().n_layer, kLayers);
  // The tolerance must still see a real difference: the same file with its head requantized to
  // Q4_0 at load (a model llama.cpp did not run) has to miss it on some prompt.
  {
    ModelLoadOptions q4;
    q4.output_type = TypeId::kQ4_0;
    std::unique_ptr<Model> other;
    ASSERT_TRUE(Model::Load(path, q4, &other).ok());
    ContextParams cp;
    cp.n_ctx = 64;
    cp.n_threads = 2;
    float worst = 0.0f;
    for (const auto& p : ref["prompts"]) {
      std::unique_ptr<Context> ctx;
      ASSERT_TRUE(Context::Create(*other, cp, &ctx).ok());
      const std::vector<int> prompt = p["prompt_tokens"].get<std::vector<int>>();
      ASSERT_TRUE(ctx->Decode(prompt.data(), static_cast<int>(prompt.size()), false).ok());
      for (size_t i = 0; i < 20; ++i) {
        const auto& pair = p["last_logits_top64"][i];
        worst = std::max(worst, std::fabs(ctx->logits()[pair[0].get<int>()] - pair[1].get<float>()));
      }
    }
    std::printf("[ parity ] %s with a Q4_0 head: max|dlogit| top20 %.6f\n", sc.name, worst);
    EXPECT_GT(worst, kTop20Tolerance) << "a Q4_0 head passes the tolerance: it does not tell models apart";
  }
  std::unique_ptr<Tokenizer> tok;
  ASSERT_TRUE(Tokenizer::Create(model->shared_vocab(), &tok).ok());
  ContextParams cp;
  cp.n_ctx = 256;
  cp.n_batch = 256;
  cp.n_threads = 2;
  for (const auto& p : ref["prompts"]) {
    const std::string text = p["prompt"].get<std::string>();
    SCOPED_TRACE(text);
    const std::vector<int> prompt = p["prompt_tokens"].get<std::vector<int>>();
    std::vector<TokenId> ids;
    ASSERT_TRUE(tok->Tokenize(text, true, false, &ids).ok());
    EXPECT_EQ(std::vector<int>(ids.begin(), ids.end()), prompt) << "tokenization differs from llama.cpp's";

    std::unique_ptr<Context> ctx;
    ASSERT_TRUE(Context::Create(*model, cp, &ctx).ok());
    ASSERT_TRUE(ctx->Decode(prompt.data(), static_cast<int>(prompt.size()), false).ok());
    const float* logits = ctx->logits();
    float max_diff = 0.0f;
    const auto& top = p["last_logits_top64"];
    ASSERT_GE(top.size(), 20u);
    for (size_t i = 0; i < 20; ++i) {
      max_diff = std::max(max_diff, std::fabs(logits[top[i][0].get<int>()] - top[i][1].get<float>()));
    }
    std::printf("[ parity ] %s %-26s max|dlogit| top20 %.6f\n", sc.name, text.c_str(), max_diff);
    EXPECT_LT(max_diff, kTop20Tolerance) << "top-20 logits differ from llama.cpp's";

    const std::vector<int> want = p["greedy_tokens"].get<std::vector<int>>();
    const std::vector<float> margin = p["greedy_margin"].get<std::vector<float>>();
    int compared = 0;
    for (size_t step = 0; step < want.size() && margin[step] >= kMarginFloor; ++step) {
      const int t = Argmax(ctx->logits(), ctx->n_vocab());
      ASSERT_EQ(t, want[step]) << "greedy token " << step << " differs (reference margin " << margin[step] << ")";
      ++compared;
      ASSERT_TRUE(ctx->Decode(&t, 1, false).ok());
    }
    std::printf("[ parity ] %s %-26s greedy tokens compared %d\n", sc.name, text.c_str(), compared);
  }
}

INSTANTIATE_TEST_SUITE_P(
    MadeAtTestTime, Llama1bShapeParity,
    ::testing::Values(ShapeCase{"tq2_0_q6k_head", "--type tq2_0", "llama-1b-l4-tq2_0.json"},
                      ShapeCase{"tq2_0_q8_0_head", "--type tq2_0 --token-embedding-type q8_0",
                                "llama-1b-l4-tq2_0-e8.json"}),
    [](const ::testing::TestParamInfo<ShapeCase>& param_info) { return std::string(param_info.param.name); });

}  // namespace
}  // namespace trine
