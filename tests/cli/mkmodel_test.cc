// `trine mkmodel`: the tiny preset in several weight types loads (inspect) and runs (generate);
// weights are exactly ternary x one scale per tensor; the same seed gives the same bytes; the big
// presets have the real models' dimensions (checked with one layer and a small vocabulary so the
// test stays fast); bad usage exits 2 and bad input 1, leaving no partial file.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <cmath>
#include <memory>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "gguf/gguf_reader.h"
#include "tensor/dtype.h"

namespace trine {
namespace {

using testing::RunTrine;
using testing::TempPath;

const char* const kSpmVocab = "models/vocab/ggml-vocab-llama-spm.gguf";

// Writes a model with `args` and returns its path (fails the test on a non-zero exit).
std::string MakeModel(const std::string& name, const std::string& args) {
  const std::string path = TempPath(name);
  std::string out, err;
  EXPECT_EQ(RunTrine("mkmodel -o " + path + " " + args, &out, &err), 0) << err;
  return path;
}

nlohmann::json Inspect(const std::string& path) {
  std::string out, err;
  EXPECT_EQ(RunTrine("inspect --json " + path, &out, &err), 0) << err;
  return nlohmann::json::parse(out);
}

struct TypeCase {
  const char* type;
  const char* arch;  // "" = the preset's (bitnet)
};

void PrintTo(const TypeCase& c, std::ostream* os) { *os << c.type << (*c.arch ? " " : "") << c.arch; }

class MkmodelTiny : public ::testing::TestWithParam<TypeCase> {};

TEST_P(MkmodelTiny, LoadsAndGenerates) {
  const TypeCase c = GetParam();
  std::string args = std::string("--preset tiny --type ") + c.type;
  if (*c.arch) args += std::string(" --arch ") + c.arch;
  const std::string path = MakeModel(std::string("tiny-") + c.type + ".gguf", args);
  const nlohmann::json j = Inspect(path);
  const std::string arch = *c.arch ? c.arch : "bitnet";
  EXPECT_EQ(j["architecture"], arch);
  const std::string ak = arch + ".";
  EXPECT_EQ(j["metadata"][ak + "block_count"], 2);
  EXPECT_EQ(j["metadata"][ak + "embedding_length"], 256);
  EXPECT_EQ(j["metadata"]["tokenizer.ggml.model"], "llama");  // the SPM vocabulary by default
  for (const auto& t : j["tensors"]) {
    const std::string name = t["name"];
    if (name.find("attn_q.weight") != std::string::npos) {
      EXPECT_EQ(t["type"], c.type) << name;
    }
  }
  std::string out, err;
  ASSERT_EQ(RunTrine("generate -m " + path + " -p 'Once upon a time' -n 4 --temp 0 -t 1", &out, &err), 0) << err;
  EXPECT_EQ(out.rfind("Once upon a time", 0), 0u) << out;
}

INSTANTIATE_TEST_SUITE_P(Types, MkmodelTiny,
                         ::testing::Values(TypeCase{"tq2_0", ""}, TypeCase{"tq1_0", ""}, TypeCase{"q4_0", "llama"},
                                           TypeCase{"q8_0", ""}, TypeCase{"f16", "llama"},
                                           TypeCase{"i2_s", "bitnet-b1.58"}),
                         [](const ::testing::TestParamInfo<TypeCase>& p) { return std::string(p.param.type); });

// Every 2-D weight takes exactly the values {-s, 0, +s} for one fp16 s per tensor; norms are ~1.
TEST(Mkmodel, WeightsAreExactlyTernaryTimesOneScale) {
  for (const char* type : {"tq2_0", "tq1_0"}) {
    SCOPED_TRACE(type);
    const std::string path = MakeModel(std::string("tern-") + type + ".gguf",
                                       std::string("--preset tiny --layers 1 --type ") + type +
                                           " --token-embedding-type f16");
    std::unique_ptr<GgufFile> f;
    ASSERT_TRUE(GgufFile::Open(path, &f).ok());
    int n_checked = 0;
    for (const auto& t : f->tensors()) {
      std::vector<float> x(static_cast<size_t>(t.n_elems));
      ASSERT_TRUE(DequantizeTensor(t.type, t.data, t.n_bytes, t.n_elems, x.data()).ok()) << t.name;
      if (t.n_dims == 1) {
        if (t.name.find("norm") == std::string::npos) continue;
        for (float v : x) {
          EXPECT_GE(v, 0.89f) << t.name;
          EXPECT_LE(v, 1.11f) << t.name;
        }
        continue;
      }
      float s = 0;
      for (float v : x) s = std::max(s, std::fabs(v));
      ASSERT_GT(s, 0.0f) << t.name;
      std::set<float> values(x.begin(), x.end());
      EXPECT_EQ(values, (std::set<float>{-s, 0.0f, s})) << t.name;
      ++n_checked;
    }
    EXPECT_EQ(n_checked, 8);  // 7 layer weights + the embedding
  }
}

TEST(Mkmodel, SameSeedSameBytes) {
  const std::string a = MakeModel("seed-a.gguf", "--preset tiny --layers 1 --seed 7");
  const std::string b = MakeModel("seed-b.gguf", "--preset tiny --layers 1 --seed 7 -t 1");
  const std::string c = MakeModel("seed-c.gguf", "--preset tiny --layers 1 --seed 8");
  const auto ba = testing::ReadFileBytes(a), bb = testing::ReadFileBytes(b), bc = testing::ReadFileBytes(c);
  ASSERT_GT(ba.size(), 1000000u);
  EXPECT_TRUE(ba == bb) << "same seed, different thread count";
  ASSERT_EQ(ba.size(), bc.size());
  EXPECT_FALSE(ba == bc) << "a different seed gives different weights";
}

// The big presets' metadata and shapes, with one layer and the 32000-token vocabulary.
TEST(Mkmodel, Bitnet2bShapes) {
  const std::string path = MakeModel("bitnet-2b-1l.gguf", std::string("--preset bitnet-2b --layers 1 --vocab ") +
                                                              kSpmVocab + " --token-embedding-type q8_0");
  const nlohmann::json j = Inspect(path);
  const auto& m = j["metadata"];
  EXPECT_EQ(j["architecture"], "bitnet");
  EXPECT_EQ(m["bitnet.embedding_length"], 2560);
  EXPECT_EQ(m["bitnet.feed_forward_length"], 6912);
  EXPECT_EQ(m["bitnet.attention.head_count"], 20);
  EXPECT_EQ(m["bitnet.attention.head_count_kv"], 5);
  EXPECT_EQ(m["bitnet.context_length"], 4096);
  EXPECT_EQ(m["bitnet.rope.freq_base"], 500000.0);
  EXPECT_EQ(m["bitnet.block_count"], 1);
  EXPECT_EQ(m["general.file_type"], 37);
  std::set<std::string> names;
  for (const auto& t : j["tensors"]) {
    names.insert(t["name"]);
    if (t["name"] == "blk.0.attn_k.weight") {
      EXPECT_EQ(t["shape"], (std::vector<int>{2560, 640}));
    }
    if (t["name"] == "blk.0.ffn_down.weight") {
      EXPECT_EQ(t["shape"], (std::vector<int>{6912, 2560}));
    }
    if (t["name"] == "blk.0.ffn_sub_norm.weight") {
      EXPECT_EQ(t["shape"], (std::vector<int>{6912}));
    }
    if (t["name"] == "token_embd.weight") {
      EXPECT_EQ(t["type"], "q8_0");
    }
  }
  EXPECT_EQ(names.size(), 13u);  // output_norm, token_embd (tied output) + 11 per layer
  EXPECT_TRUE(names.count("blk.0.attn_sub_norm.weight"));
  EXPECT_FALSE(names.count("output.weight"));
}

TEST(Mkmodel, Llama1bShapes) {
  const std::string path = MakeModel("llama-1b-1l.gguf", std::string("--preset llama-1b --layers 1 --vocab ") +
                                                             kSpmVocab + " --type q4_0 --token-embedding-type q8_0");
  const nlohmann::json j = Inspect(path);
  const auto& m = j["metadata"];
  EXPECT_EQ(j["architecture"], "llama");
  EXPECT_EQ(m["llama.embedding_length"], 2048);
  EXPECT_EQ(m["llama.feed_forward_length"], 8192);
  EXPECT_EQ(m["llama.attention.head_count"], 32);
  EXPECT_EQ(m["llama.attention.head_count_kv"], 8);
  EXPECT_EQ(m["llama.context_length"], 131072);
  EXPECT_EQ(m["general.file_type"], 2);
  bool rope_freqs = false;
  for (const auto& t : j["tensors"]) {
    if (t["name"] == "rope_freqs.weight") {
      rope_freqs = true;
      EXPECT_EQ(t["shape"], (std::vector<int>{32}));
    }
    if (t["name"] == "blk.0.attn_v.weight") {
      EXPECT_EQ(t["shape"], (std::vector<int>{2048, 512}));
      EXPECT_EQ(t["type"], "q4_0");
    }
  }
  EXPECT_TRUE(rope_freqs);
}

struct BadCase {
  const char* args;
  int code;
  const char* message;
};

TEST(Mkmodel, BadArgumentsGiveCleanErrors) {
  // OUT stands for a path in the test's temp directory.
  const std::string out_path = TempPath("bad.gguf");
  const BadCase cases[] = {
      {"mkmodel --preset tiny", 2, "-o"},
      {"mkmodel -o OUT", 2, "--preset"},
      {"mkmodel --preset huge -o OUT", 1, "unknown preset"},
      {"mkmodel --preset tiny --type q9_9 -o OUT", 1, "--type"},
      {"mkmodel --preset tiny --token-embedding-type zz -o OUT", 1, "token-embedding-type"},
      {"mkmodel --preset tiny --arch gpt2 -o OUT", 1, "--arch"},
      {"mkmodel --preset tiny --bogus -o OUT", 2, "bogus"},
      {"mkmodel --preset tiny --layers 0 -o OUT", 1, "--layers"},
      {"mkmodel --preset tiny --seed -3 -o OUT", 1, "--seed"},
      {"mkmodel --preset tiny --type i2_s -o OUT", 1, "bitnet-b1.58"},
      {"mkmodel --preset tiny --vocab /nonexistent/vocab.gguf -o OUT", 1, "/nonexistent/vocab.gguf"},
      {"mkmodel --preset tiny --vocab models/text/tinystories-heldout.txt -o OUT", 1, "not a GGUF"},
      {"mkmodel --preset tiny --layers 1 -o /nonexistent-dir/x.gguf", 1, "/nonexistent-dir/x.gguf"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.args);
    std::string args = c.args;
    if (const size_t pos = args.find("OUT"); pos != std::string::npos) args.replace(pos, 3, out_path);
    std::string out, err;
    EXPECT_EQ(RunTrine(args, &out, &err), c.code);
    EXPECT_EQ(err.rfind("error: ", 0), 0u) << err;
    EXPECT_NE(err.find(c.message), std::string::npos) << err;
    EXPECT_NE(access(out_path.c_str(), F_OK), 0) << "no file is written on errors";
    EXPECT_NE(access((out_path + ".tmp").c_str(), F_OK), 0) << "no temporary file is left";
  }
}

}  // namespace
}  // namespace trine
