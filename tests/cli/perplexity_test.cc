// `trine perplexity` follows llama.cpp's protocol: on the held-out TinyStories text with -c 256
// -b 256, the trained ternary model gives llama.cpp's 21.74 in F32, TQ2_0 and TQ1_0.
#include <gtest/gtest.h>

#include <cstdlib>
#include <regex>

#include "common/test_util.h"

namespace trine {
namespace {

double FinalPpl(const std::string& out) {
  std::smatch m;
  static const std::regex kFinal(R"(Final estimate: PPL = ([0-9.]+) \+/- ([0-9.]+))");
  if (!std::regex_search(out, m, kFinal)) return -1.0;
  return std::atof(m[1].str().c_str());
}

class Perplexity : public ::testing::TestWithParam<const char*> {};

TEST_P(Perplexity, MatchesLlamaCpp) {
  std::string out, err;
  ASSERT_EQ(testing::RunTrine(std::string("perplexity -m models/") + GetParam() +
                                  " -f models/text/tinystories-heldout.txt -c 256 -b 256 -t 1",
                              &out, &err),
            0)
      << err;
  EXPECT_NEAR(FinalPpl(out), 21.74, 0.05) << out;
  EXPECT_NE(out.find("[105]"), std::string::npos) << "expected 105 windows of 256 tokens";
}

INSTANTIATE_TEST_SUITE_P(TrainedModel, Perplexity,
                         ::testing::Values("bitnet-tiny-stories-f32.gguf", "bitnet-tiny-stories-TQ2_0-f16emb.gguf",
                                           "bitnet-tiny-stories-TQ1_0-f16emb.gguf"));

// Quantized KV caches (llama.cpp's -ctk/-ctv): measured 21.7478 (f16), 21.7461 (q8_0), 21.8165
// (q4_0) and 21.7634 (q4_0 K, q8_0 V) on this text since RMSNorm and RoPE round as llama.cpp's do
// (issue 34; 21.7461, 21.7458, 21.8144 and 21.7602 before); each must stay within 0.5 % (q8_0) /
// 1 % (q4_0) of f16.
struct KvCase {
  const char* flags;
  double ppl, tol;
};

class PerplexityKv : public ::testing::TestWithParam<KvCase> {};

TEST_P(PerplexityKv, QuantizedCacheCostsLittle) {
  std::string out, err;
  ASSERT_EQ(testing::RunTrine(std::string("perplexity -m models/bitnet-tiny-stories-TQ2_0-f16emb.gguf "
                                          "-f models/text/tinystories-heldout.txt -c 256 -b 256 -t 1 ") +
                                  GetParam().flags,
                              &out, &err),
            0)
      << err;
  EXPECT_NEAR(FinalPpl(out), GetParam().ppl, 0.002) << out;
  EXPECT_NEAR(FinalPpl(out), 21.7478, 21.7478 * GetParam().tol) << out;
}

INSTANTIATE_TEST_SUITE_P(TrainedModel, PerplexityKv,
                         ::testing::Values(KvCase{"--kv-type q8_0", 21.7461, 0.005},
                                           KvCase{"--kv-type q4_0", 21.8165, 0.01},
                                           KvCase{"-ctk q4_0 -ctv q8_0", 21.7634, 0.01}),
                         [](const ::testing::TestParamInfo<KvCase>& i) { return "case" + std::to_string(i.index); });

TEST(PerplexityErrors, KvTypeNeedsHeadSizeMultipleOf32) {
  // stories260K has 8-value heads: Q8_0/Q4_0 rows would straddle heads.
  std::string out, err;
  EXPECT_EQ(testing::RunTrine("perplexity -m models/stories260K.gguf -f models/text/tinystories-heldout.txt "
                              "-c 128 -b 128 -ctk q8_0",
                              &out, &err),
            1);
  EXPECT_NE(err.find("multiple of 32"), std::string::npos) << err;
  EXPECT_EQ(testing::RunTrine("perplexity -f models/text/tinystories-heldout.txt -c 128 -ctv f32", &out, &err), 1);
  EXPECT_NE(err.find("f32 is only supported for K and V together"), std::string::npos) << err;
  EXPECT_EQ(testing::RunTrine("perplexity -f models/text/tinystories-heldout.txt -c 128 -ctk q5_1", &out, &err), 1);
  EXPECT_NE(err.find("-ctk"), std::string::npos) << err;
}

TEST(PerplexityErrors, TooShortTextAndMissingFile) {
  std::string out, err;
  const std::string path = testing::TempPath("short.txt");
  testing::WriteFileBytes(path, {'O', 'n', 'c', 'e'});
  EXPECT_EQ(testing::RunTrine("perplexity -f " + path + " -c 256", &out, &err), 1);
  EXPECT_NE(err.find("needs at least 512"), std::string::npos) << err;
  EXPECT_EQ(testing::RunTrine("perplexity -f /nonexistent.txt", &out, &err), 1);
  EXPECT_EQ(err.rfind("error: ", 0), 0u) << err;
  EXPECT_EQ(testing::RunTrine("perplexity", &out, &err), 2);  // missing -f: bad usage
}

}  // namespace
}  // namespace trine
