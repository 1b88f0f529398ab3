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

TEST(PerplexityErrors, TooShortTextAndMissingFile) {
  std::string out, err;
  const std::string path = testing::TempPath("short.txt");
  testing::WriteFileBytes(path, {'O', 'n', 'c', 'e'});
  EXPECT_EQ(testing::RunTrine("perplexity -f " + path + " -c 256", &out, &err), 1);
  EXPECT_NE(err.find("needs at least 512"), std::string::npos) << err;
  EXPECT_EQ(testing::RunTrine("perplexity -f /nonexistent.txt", &out, &err), 1);
  EXPECT_EQ(err.rfind("error: ", 0), 0u) << err;
  EXPECT_EQ(testing::RunTrine("perplexity", &out, &err), 2);
}

}  // namespace
}  // namespace trine
