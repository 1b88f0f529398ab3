// TRINE_DUMP_TENSORS (src/runtime/tensor_dump.h): the first forward pass writes every named point
// of a llama model once, with the shapes tests/model/ref_dumper/compare_dumps.py pairs with
// llama.cpp's, and later passes write nothing.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "common/test_util.h"

namespace trine {
namespace {

TEST(TensorDump, FirstPassWritesEveryPointOnceUnderLlamaCppNames) {
  const std::string prefix = testing::TempPath("dump_");
  ASSERT_EQ(setenv("TRINE_DUMP_TENSORS", prefix.c_str(), 1), 0);  // inherited by the trine process
  std::string out, err;
  const int rc = testing::RunTrine("generate -m '" + testing::ModelPath("stories260K.gguf") +
                                       "' -p 'Once upon a time' -n 3 -t 2 --json",
                                   &out, &err);
  unsetenv("TRINE_DUMP_TENSORS");
  ASSERT_EQ(rc, 0) << err;

  // stories260K: llama, 5 layers, E 64, 8 heads of 8 (4 KV heads), F 172, 512 tokens; the prompt
  // is BOS + 4 tokens (the --json output's prompt_ids says how many).
  const size_t ids_at = out.find("\"prompt_ids\":[");
  ASSERT_NE(ids_at, std::string::npos) << out;
  int n_prompt = 1;
  for (size_t i = ids_at + 14; out[i] != ']'; ++i) n_prompt += out[i] == ',' ? 1 : 0;

  std::ifstream index(prefix + "index.txt");
  ASSERT_TRUE(index.good());
  std::map<std::string, std::pair<long long, long long>> shapes;
  std::string line;
  int lines = 0;
  while (std::getline(index, line)) {
    std::istringstream ls(line);
    std::string seq, name;
    long long rows = 0, cols = 0;
    ls >> seq >> name >> rows >> cols;
    EXPECT_EQ(shapes.count(name), 0u) << name << " written twice";
    shapes[name] = {rows, cols};
    std::ifstream f(prefix + seq + "_" + name + ".bin", std::ios::binary | std::ios::ate);
    ASSERT_TRUE(f.good()) << name;
    EXPECT_EQ(static_cast<long long>(f.tellg()), rows * cols * 4) << name;
    ++lines;
  }
  const char* per_layer[] = {"attn_norm", "Qcur",    "Kcur",     "Vcur",     "Qcur_rope",  "Kcur_rope", "kqv_out", "attn_out",
                             "ffn_inp",   "ffn_norm", "ffn_gate", "ffn_up", "ffn_swiglu", "ffn_out",   "l_out"};
  EXPECT_EQ(lines, 15 * 5 + 3) << "one pass only: the generated tokens' passes write nothing";
  for (int l = 0; l < 5; ++l) {
    for (const char* n : per_layer) EXPECT_EQ(shapes.count(std::string(n) + "-" + std::to_string(l)), 1u) << n << l;
  }
  EXPECT_EQ(shapes["embd"], std::make_pair(static_cast<long long>(n_prompt), 64LL));
  EXPECT_EQ(shapes["Kcur-0"], std::make_pair(static_cast<long long>(n_prompt), 32LL));
  EXPECT_EQ(shapes["ffn_up-4"], std::make_pair(static_cast<long long>(n_prompt), 172LL));
  EXPECT_EQ(shapes["result_output"], std::make_pair(1LL, 512LL));  // the last position's logits only
}

}  // namespace
}  // namespace trine
