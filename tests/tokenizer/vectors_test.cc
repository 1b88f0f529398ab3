// llama.cpp's tokenizer test vectors (test-tokenizer-0 cases) for the four shipped vocabularies,
// plus the detokenize round trip over the same strings.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "test_vectors.h"

namespace trine::testing {
namespace {

class VocabVectors : public ::testing::TestWithParam<const char*> {};

TEST_P(VocabVectors, MatchLlamaCpp) {
  const std::string file = GetParam();
  const Tokenizer& tok = SharedTokenizer("vocab/" + file);
  const auto cases = ReadCases(file);
  ASSERT_EQ(cases.size(), 46u) << "test vector files were not split as test-tokenizer-0 splits them";
  int passed = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    std::vector<TokenId> ids;
    const Status st = tok.Tokenize(cases[i].text, /*add_special=*/false, /*parse_special=*/false, &ids);
    ASSERT_TRUE(st.ok()) << st.message();
    EXPECT_EQ(IdsToString(ids), IdsToString(cases[i].ids)) << file << " case " << i << ": '" << cases[i].text << "'";
    passed += ids == cases[i].ids;
  }
  RecordProperty("passed", passed);
  EXPECT_EQ(passed, static_cast<int>(cases.size()));
}

INSTANTIATE_TEST_SUITE_P(Shipped, VocabVectors,
                         ::testing::Values("ggml-vocab-llama-spm.gguf", "ggml-vocab-llama-bpe.gguf",
                                           "ggml-vocab-gpt-2.gguf", "ggml-vocab-deepseek-llm.gguf"),
                         [](const ::testing::TestParamInfo<const char*>& p) {
                           std::string name = p.param;
                           name = name.substr(11, name.size() - 11 - 5);  // strip "ggml-vocab-" and ".gguf"
                           for (char& c : name) {
                             if (c == '-') c = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace trine::testing
