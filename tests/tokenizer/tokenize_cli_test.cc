// `trine tokenize`: every llama.cpp test string of one vocabulary through the CLI, the output
// formats, and its exit codes.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "test_vectors.h"

namespace trine::testing {
namespace {

const char* const kSpmFile = "vocab/ggml-vocab-llama-spm.gguf";

std::vector<TokenId> ParseIdList(const std::string& out) {
  // "[1, 2, 3]\n"
  std::vector<TokenId> ids;
  EXPECT_FALSE(out.empty());
  if (out.empty()) return ids;
  EXPECT_EQ(out.front(), '[') << out;
  EXPECT_EQ(out.substr(out.size() - 2), "]\n") << out;
  std::string body = out.substr(1, out.size() - 3);
  for (size_t pos = 0; pos < body.size();) {
    size_t comma = body.find(", ", pos);
    if (comma == std::string::npos) comma = body.size();
    ids.push_back(std::stoi(body.substr(pos, comma - pos)));
    pos = comma + 2;
  }
  return ids;
}

TEST(TokenizeCli, AllSpmVectorsWithNoBos) {
  const auto cases = ReadCases("ggml-vocab-llama-spm.gguf");
  ASSERT_EQ(cases.size(), 46u);
  const std::string model = ModelPath(kSpmFile);
  for (size_t i = 0; i < cases.size(); ++i) {
    // -f drops one trailing newline (as llama.cpp's -f does), so add one.
    const std::string path = TempPath("case" + std::to_string(i) + ".txt");
    const std::string content = cases[i].text + "\n";
    WriteFileBytes(path, std::vector<uint8_t>(content.begin(), content.end()));
    std::string out, err;
    const int rc = RunTrine("tokenize -m '" + model + "' -f '" + path + "' --no-bos --ids", &out, &err);
    ASSERT_EQ(rc, 0) << err;
    EXPECT_EQ(IdsToString(ParseIdList(out)), IdsToString(cases[i].ids)) << "case " << i << ": '" << cases[i].text << "'";
  }
}

TEST(TokenizeCli, DefaultOutputLikeLlamaTokenize) {
  std::string out, err;
  ASSERT_EQ(RunTrine("tokenize -m '" + ModelPath("stories260K.gguf") + "' -p 'Once upon a time'", &out, &err), 0)
      << err;
  EXPECT_EQ(out,
            "     1 -> '<s>'\n"
            "   403 -> ' Once'\n"
            "   407 -> ' upon'\n"
            "   261 -> ' a'\n"
            "   378 -> ' time'\n");
  ASSERT_EQ(RunTrine("tokenize -m '" + ModelPath("stories260K.gguf") + "' -p 'Once upon a time' --no-bos --show-count",
                     &out, &err),
            0);
  EXPECT_EQ(out.substr(0, 21), "   403 -> ' Once'\n   ");
  EXPECT_NE(out.find("Total number of tokens: 4\n"), std::string::npos) << out;
}

TEST(TokenizeCli, JsonAndParseSpecial) {
  const std::string model = ModelPath("vocab/ggml-vocab-llama-bpe.gguf");
  std::string out, err;
  ASSERT_EQ(RunTrine("tokenize -m '" + model + "' -p 'Hello<|eot_id|>' --parse-special --json", &out, &err), 0) << err;
  const auto j = nlohmann::json::parse(out);
  EXPECT_EQ(j["ids"].get<std::vector<TokenId>>(), (std::vector<TokenId>{128000, 9906, 128009}));
  EXPECT_EQ(j["pieces"].get<std::vector<std::string>>(),
            (std::vector<std::string>{"<|begin_of_text|>", "Hello", "<|eot_id|>"}));
  ASSERT_EQ(RunTrine("tokenize -m '" + model + "' -p 'Hello<|eot_id|>' --ids", &out, &err), 0) << err;
  const auto plain = ParseIdList(out);
  EXPECT_GT(plain.size(), 3u);
  for (size_t i = 1; i < plain.size(); ++i) EXPECT_LT(plain[i], 128000);
}

TEST(TokenizeCli, Escapes) {
  std::string out, err;
  const std::string model = ModelPath(kSpmFile);
  ASSERT_EQ(RunTrine("tokenize -m '" + model + "' -p 'a\\nb' --no-bos --ids -e", &out, &err), 0) << err;
  const auto with = ParseIdList(out);
  ASSERT_EQ(RunTrine("tokenize -m '" + model + "' -p 'a\\nb' --no-bos --ids", &out, &err), 0) << err;
  const auto without = ParseIdList(out);
  EXPECT_NE(with, without);
  EXPECT_NE(std::find(with.begin(), with.end(), 3 + 0x0A), with.end());  // <0x0A>
}

// Bad usage (a missing or conflicting flag, an unknown option) exits 2; bad input 1.
TEST(TokenizeCli, ExitCodes) {
  std::string out, err;
  const std::string model = ModelPath(kSpmFile);
  EXPECT_EQ(RunTrine("tokenize -p hi", &out, &err), 2) << "missing -m";
  EXPECT_NE(err.find("error:"), std::string::npos);
  EXPECT_EQ(RunTrine("tokenize -m '" + model + "'", &out, &err), 2) << "no text";
  EXPECT_EQ(RunTrine("tokenize -m '" + model + "' -p a -f /dev/null", &out, &err), 2) << "two texts";
  EXPECT_EQ(RunTrine("tokenize -m '" + model + "' -p a --ids --json", &out, &err), 2);
  EXPECT_EQ(RunTrine("tokenize -m '" + model + "' -p a --bogus", &out, &err), 2);
  EXPECT_EQ(RunTrine("tokenize -m /nonexistent.gguf -p a", &out, &err), 1);
  EXPECT_EQ(err.rfind("error: ", 0), 0u) << err;
  EXPECT_EQ(RunTrine("tokenize -m '" + model + "' -f /nonexistent.txt", &out, &err), 1);
  EXPECT_EQ(RunTrine("tokenize --help", &out, &err), 0);
  EXPECT_NE(out.find("--parse-special"), std::string::npos);
}

}  // namespace
}  // namespace trine::testing
