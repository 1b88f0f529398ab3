// Bad input on every command of the `trine` tool: each case must exit with 1 (bad values, files
// the program cannot use) or 2 (bad usage: an unknown option, a missing or stray argument, with a
// usage hint), print one "error: " line naming the problem on stderr, and never die from a signal. Complements the per-command cases in generate_test.cc,
// bench_test.cc and mkmodel_test.cc, and the malformed-GGUF catalogue in tests/gguf.
#include <gtest/gtest.h>

#include <string>

#include "common/test_util.h"

namespace trine {
namespace {

using testing::RunTrine;

struct BadCase {
  std::string args;
  int code;
  std::string message;  // substring expected on stderr
};

void ExpectCleanErrors(const std::vector<BadCase>& cases) {
  for (const auto& c : cases) {
    SCOPED_TRACE(c.args);
    std::string out, err;
    EXPECT_EQ(RunTrine(c.args, &out, &err), c.code) << err;
    EXPECT_NE(err.find("error: "), std::string::npos) << err;
    EXPECT_NE(err.find(c.message), std::string::npos) << err;
    // Exit 2 exactly when the usage hint is printed.
    EXPECT_EQ(err.find("usage:") != std::string::npos, c.code == 2) << err;
  }
}

const std::string kModel = "models/bitnet-tiny-stories-TQ2_0-f16emb.gguf";
const std::string kText = "models/text/tinystories-heldout.txt";
const std::string kVocabOnly = "models/vocab/ggml-vocab-llama-spm.gguf";

TEST(BadInput, Inspect) {
  ExpectCleanErrors({
      {"inspect", 2, "FILE"},
      {"inspect " + kModel + " " + kModel, 2, "unexpected argument"},
      {"inspect -m " + kModel + " " + kModel, 2, "one FILE"},
      {"inspect /nonexistent/model.gguf", 1, "/nonexistent/model.gguf: cannot open"},
      {"inspect models", 1, "models: not a regular file"},
      {"inspect /dev/null", 1, "/dev/null: not a regular file"},
      {"inspect " + kText, 1, "not a GGUF file"},
      {"inspect --kernels " + kVocabOnly, 1, "needs a model file with tensors"},
      {"inspect --bogus " + kModel, 2, "bogus"},
  });
}

TEST(BadInput, Tokenize) {
  ExpectCleanErrors({
      {"tokenize -p hi", 2, "-m"},
      {"tokenize -m " + kModel, 2, "exactly one of -p"},
      {"tokenize -m " + kModel + " -f models", 1, "models: cannot read: Is a directory"},
      {"tokenize -m " + kModel + " -f /nonexistent/text.txt", 1, "/nonexistent/text.txt: cannot open"},
      {"tokenize -m " + kText + " -p hi", 1, "not a GGUF file"},
      {"tokenize -m " + kModel + " -p hi --ids --json", 2, "exclude"},
  });
}

TEST(BadInput, GenerateValuesAndFiles) {
  ExpectCleanErrors({
      {"generate -p hi -t 100000", 1, "-t"},
      {"generate -p hi -c 100000000", 1, "too large"},
      {"generate -p hi -n 99999999999", 1, "99999999999"},
      {"generate -p hi --temp nan", 1, "nan"},
      {"generate -p hi --repeat-penalty 0", 1, "--repeat-penalty"},
      {"generate -p hi --min-p 2", 1, "--min-p"},
      {"generate -p hi -m /dev/zero", 1, "/dev/zero: not a regular file"},
      {"generate -f models", 1, "models: cannot read: Is a directory"},
  });
}

TEST(BadInput, Chat) {
  ExpectCleanErrors({
      {"chat -n 0 --chat-template chatml", 1, "-n"},
      {"chat -m models", 1, "models: not a regular file"},
      {"chat -m " + kVocabOnly, 1, "missing tensor"},
  });
}

TEST(BadInput, Perplexity) {
  ExpectCleanErrors({
      {"perplexity -f /nonexistent/text.txt", 1, "/nonexistent/text.txt: cannot open"},
      {"perplexity -f models", 1, "models: cannot read: Is a directory"},
      {"perplexity -f /dev/null -c 64", 1, "needs at least"},
      {"perplexity", 2, "-f"},
  });
}

TEST(BadInput, Quantize) {
  const std::string copy = testing::TempPath("quantize-in-place.gguf");
  testing::WriteFileBytes(copy, testing::ReadFileBytes(testing::ModelPath("stories260K.gguf")));
  ExpectCleanErrors({
      {"quantize", 2, "IN.gguf OUT.gguf TYPE"},
      {"quantize " + kModel + " /tmp/x.gguf q9_9", 1, "q9_9"},
      {"quantize /nonexistent/in.gguf /tmp/x.gguf q8_0", 1, "/nonexistent/in.gguf: cannot open"},
      {"quantize " + kText + " /tmp/x.gguf q8_0", 1, "not a GGUF file"},
      {"quantize " + copy + " " + copy + " q8_0", 1, "output file is the input file"},
  });
  // An output that cannot be created fails before any tensor is converted.
  std::string out, err;
  EXPECT_EQ(RunTrine("quantize models/stories260K.gguf /nonexistent/dir/out.gguf q8_0", &out, &err), 1);
  EXPECT_NE(err.find("/nonexistent/dir/out.gguf: cannot create"), std::string::npos) << err;
  EXPECT_EQ(out.find("converting"), std::string::npos) << out;
  // The in-place attempt left the input intact.
  EXPECT_EQ(testing::ReadFileBytes(copy), testing::ReadFileBytes(testing::ModelPath("stories260K.gguf")));
}

TEST(BadInput, ProfileAndReport) {
  ExpectCleanErrors({
      {"profile --plan /dev/null", 1, "corrupt plan"},
      {"profile --plan /nonexistent/plan.json", 1, "/nonexistent/plan.json"},
      {"profile --mem-budget abc", 1, "--mem-budget"},
      {"profile --mem-budget 200%", 1, "--mem-budget"},
      {"profile -n 0", 1, "-n"},
      {"report", 2, "DIR"},
      {"report /nonexistent/dir", 1, "/nonexistent/dir/report.json"},
  });
}

TEST(BadInput, UnknownCommandAndNoArguments) {
  ExpectCleanErrors({
      {"nosuchcommand", 2, "unknown command"},
      {"--bogus", 2, "bogus"},
  });
}

}  // namespace
}  // namespace trine
