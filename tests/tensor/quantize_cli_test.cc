// `trine quantize`: whole-file byte identity with the llama-quantize outputs shipped in models/,
// the default mixes, shape fallbacks, I2_S, and the error / usage exits.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "gguf/gguf_reader.h"
#include "gguf/gguf_writer.h"
#include "tensor/dtype.h"

namespace trine {
namespace {

using testing::ModelPath;
using testing::ReadFileBytes;
using testing::RunTrine;
using testing::TempPath;

std::string Q(const std::string& s) { return "'" + s + "'"; }

// Runs `trine quantize ARGS` and expects exit code `want`; returns stderr.
std::string Quantize(const std::string& args, int want) {
  std::string out, err;
  const int rc = RunTrine("quantize " + args, &out, &err);
  EXPECT_EQ(rc, want) << "trine quantize " << args << "\nstderr:\n" << err;
  return err;
}

// Index of the first differing byte of two files, or -1 when identical.
int64_t FirstFileDiff(const std::string& a, const std::string& b) {
  const std::vector<uint8_t> x = ReadFileBytes(a), y = ReadFileBytes(b);
  const size_t n = std::min(x.size(), y.size());
  for (size_t i = 0; i < n; ++i) {
    if (x[i] != y[i]) return static_cast<int64_t>(i);
  }
  return x.size() == y.size() && !x.empty() ? -1 : static_cast<int64_t>(n);
}

std::unique_ptr<GgufFile> Open(const std::string& path) {
  std::unique_ptr<GgufFile> f;
  Status st = GgufFile::Open(path, &f);
  EXPECT_TRUE(st.ok()) << path << ": " << st.message();
  return f;
}

TypeId TypeOf(const GgufFile& f, const std::string& tensor) {
  const GgufTensorInfo* t = f.FindTensor(tensor);
  EXPECT_NE(t, nullptr) << tensor;
  return t ? t->type : TypeId::kCount;
}

int64_t FileType(const GgufFile& f) {
  int64_t v = -1;
  bool found = false;
  EXPECT_TRUE(f.GetInt("general.file_type", &v, &found).ok());
  EXPECT_TRUE(found);
  return v;
}

std::vector<float> Values(const GgufTensorInfo& t) {
  std::vector<float> y(static_cast<size_t>(t.n_elems));
  EXPECT_TRUE(DequantizeTensor(t.type, t.data, t.n_bytes, t.n_elems, y.data()).ok()) << t.name;
  return y;
}

// The shipped TQ files were made with llama-quantize --token-embedding-type f16
// --output-tensor-type f16; trine's output is the same file, byte for byte (metadata order,
// tensor order, offsets, padding and data).
TEST(QuantizeCli, BitnetTinyStoriesTernaryFilesAreByteIdentical) {
  for (const std::string type : {"tq2_0", "TQ1_0"}) {
    const std::string out = TempPath("bitnet-" + type + ".gguf");
    const std::string err = Quantize(Q(ModelPath("bitnet-tiny-stories-f32.gguf")) + " " + Q(out) + " " + type +
                                         " --token-embedding-type f16 --output-tensor-type f16",
                                     0);
    const std::string ref = ModelPath(type == "tq2_0" ? "bitnet-tiny-stories-TQ2_0-f16emb.gguf"
                                                      : "bitnet-tiny-stories-TQ1_0-f16emb.gguf");
    EXPECT_EQ(FirstFileDiff(out, ref), -1) << type;
    // Progress: one line per tensor on stderr.
    size_t lines = 0;
    for (size_t p = err.find("/  39] "); p != std::string::npos; p = err.find("/  39] ", p + 1)) ++lines;
    EXPECT_EQ(lines, 39u) << err;
  }
}

// llama-quantize's default mixes from tiny-tern-f16.gguf (tied embedding): every shipped
// tiny-tern file is reproduced exactly, Q4_K_M's Q6_K layers included.
TEST(QuantizeCli, TinyTernMixesAreByteIdentical) {
  struct Case {
    const char* args;
    const char* ref;
  };
  const Case cases[] = {
      {"q8_0", "tiny-tern-q8_0.gguf"},
      {"q4_0", "tiny-tern-q4_0.gguf"},
      {"Q4_K_M", "tiny-tern-q4_k_m.gguf"},
      {"tq2_0", "tiny-tern-tq2_0.gguf"},
      {"tq2_0 --token-embedding-type q8_0 --output-tensor-type q8_0", "tiny-tern-tq2_0-e8.gguf"},
      {"tq1_0 --output-tensor-type q8_0 --token-embedding-type q8_0", "tiny-tern-tq1_0-e8.gguf"},
  };
  for (const Case& c : cases) {
    const std::string out = TempPath(std::string("tt-") + c.ref);
    Quantize(Q(ModelPath("tiny-tern-f16.gguf")) + " " + Q(out) + " " + c.args, 0);
    EXPECT_EQ(FirstFileDiff(out, ModelPath(c.ref)), -1) << c.args;
  }
}

// Converting a file to the type it already has copies every tensor: the output is the input.
TEST(QuantizeCli, SameTypeIsACopy) {
  const std::string out = TempPath("tt-tq2-again.gguf");
  Quantize(Q(ModelPath("tiny-tern-tq2_0.gguf")) + " " + Q(out) + " tq2_0", 0);
  EXPECT_EQ(FirstFileDiff(out, ModelPath("tiny-tern-tq2_0.gguf")), -1);
}

// TQ2_0 -> TQ1_0 is a requantization; the ternary values survive it exactly, so the TQ1_0
// tensors equal the shipped ones made from F32. The untied F16 embedding and output follow the
// TQ mix (Q4_K and Q6_K).
TEST(QuantizeCli, RequantizeNeedsTheFlag) {
  const std::string in = Q(ModelPath("bitnet-tiny-stories-TQ2_0-f16emb.gguf"));
  const std::string out = TempPath("requant.gguf");
  std::remove(out.c_str());
  const std::string err = Quantize(in + " " + Q(out) + " tq1_0", 1);
  EXPECT_NE(err.find("error: "), std::string::npos) << err;
  EXPECT_NE(err.find("--allow-requantize"), std::string::npos) << err;
  EXPECT_TRUE(ReadFileBytes(out).empty()) << "no output file on refusal";

  Quantize(in + " " + Q(out) + " tq1_0 --allow-requantize", 0);
  auto f = Open(out);
  auto ref = Open(ModelPath("bitnet-tiny-stories-TQ1_0-f16emb.gguf"));
  ASSERT_TRUE(f && ref);
  EXPECT_EQ(TypeOf(*f, "token_embd.weight"), TypeId::kQ4_K);
  EXPECT_EQ(TypeOf(*f, "output.weight"), TypeId::kQ6_K);
  EXPECT_EQ(TypeOf(*f, "blk.0.attn_norm.weight"), TypeId::kF32);
  EXPECT_EQ(FileType(*f), 36);
  int n = 0;
  for (const auto& t : f->tensors()) {
    if (t.type != TypeId::kTQ1_0) continue;
    const GgufTensorInfo* r = ref->FindTensor(t.name);
    ASSERT_NE(r, nullptr);
    ASSERT_EQ(t.n_bytes, r->n_bytes);
    EXPECT_EQ(std::memcmp(t.data, r->data, t.n_bytes), 0) << t.name;
    ++n;
  }
  EXPECT_EQ(n, 28);
}

TEST(QuantizeCli, PureAndFloatTargets) {
  const std::string out = TempPath("pure.gguf");
  Quantize(Q(ModelPath("tiny-tern-f16.gguf")) + " " + Q(out) + " q4_0 --pure", 0);
  auto f = Open(out);
  ASSERT_TRUE(f);
  EXPECT_EQ(TypeOf(*f, "token_embd.weight"), TypeId::kQ4_0);  // no Q6_K for the tied embedding
  EXPECT_EQ(TypeOf(*f, "blk.3.ffn_down.weight"), TypeId::kQ4_0);
  EXPECT_EQ(FileType(*f), 2);

  const std::string f16 = TempPath("f16.gguf");
  Quantize(Q(ModelPath("bitnet-tiny-stories-f32.gguf")) + " " + Q(f16) + " F16", 0);
  auto g = Open(f16);
  ASSERT_TRUE(g);
  EXPECT_EQ(TypeOf(*g, "token_embd.weight"), TypeId::kF16);
  EXPECT_EQ(TypeOf(*g, "output.weight"), TypeId::kF16);
  EXPECT_EQ(TypeOf(*g, "blk.1.ffn_up.weight"), TypeId::kF16);
  EXPECT_EQ(TypeOf(*g, "output_norm.weight"), TypeId::kF32);
  EXPECT_EQ(FileType(*g), 1);
  const GgufValue* qv = g->Find("general.quantization_version");
  ASSERT_NE(qv, nullptr);
  EXPECT_EQ(g->metadata().back().first, "general.file_type");
}

// A small untied llama model whose matrices are not all multiples of 256 columns.
std::string WriteOddShapesModel() {
  GgufWriter w;
  w.Set("general.architecture", GgufValue::String("llama"));
  w.Set("general.file_type", GgufValue::U32(0));
  w.Set("llama.block_count", GgufValue::U32(1));
  auto add = [&](const std::string& name, std::vector<int64_t> ne) {
    int64_t n = 1;
    for (int64_t d : ne) n *= d;
    std::vector<float> x(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) x[i] = 0.01f * static_cast<float>((i * 7) % 13 - 6);
    ASSERT_TRUE(w.AddTensor(name, TypeId::kF32, ne, x.data(), x.size() * 4).ok()) << name;
  };
  add("token_embd.weight", {256, 16});
  add("output.weight", {256, 16});
  add("output_norm.weight", {256});
  add("blk.0.attn_q.weight", {96, 32});   // 96 % 256 != 0, 96 % 32 == 0 -> q4_0
  add("blk.0.ffn_down.weight", {40, 8});  // 40 % 32 != 0 -> f16
  add("blk.0.ffn_up.weight", {256, 40});
  add("blk.0.attn_norm.weight", {256});
  const std::string path = TempPath("odd-shapes.gguf");
  EXPECT_TRUE(w.WriteFile(path).ok());
  return path;
}

TEST(QuantizeCli, UntiedMixAndShapeFallbacks) {
  const std::string in = WriteOddShapesModel();
  const std::string out = TempPath("odd-tq2.gguf");
  const std::string err = Quantize(Q(in) + " " + Q(out) + " tq2_0", 0);
  auto f = Open(out);
  ASSERT_TRUE(f);
  EXPECT_EQ(TypeOf(*f, "token_embd.weight"), TypeId::kQ4_K);  // untied embedding
  EXPECT_EQ(TypeOf(*f, "output.weight"), TypeId::kQ6_K);
  EXPECT_EQ(TypeOf(*f, "blk.0.attn_q.weight"), TypeId::kQ4_0);
  EXPECT_EQ(TypeOf(*f, "blk.0.ffn_down.weight"), TypeId::kF16);
  EXPECT_EQ(TypeOf(*f, "blk.0.ffn_up.weight"), TypeId::kTQ2_0);
  EXPECT_EQ(TypeOf(*f, "output_norm.weight"), TypeId::kF32);
  EXPECT_NE(err.find("falling back"), std::string::npos) << err;
  // llama-quantize's tensor order: non-layer tensors by name, then each layer by name.
  const char* order[] = {"output.weight",       "output_norm.weight",    "token_embd.weight",  "blk.0.attn_norm.weight",
                         "blk.0.attn_q.weight", "blk.0.ffn_down.weight", "blk.0.ffn_up.weight"};
  ASSERT_EQ(f->tensors().size(), 7u);
  for (size_t i = 0; i < 7; ++i) EXPECT_EQ(f->tensors()[i].name, order[i]);
  // Q8_0 has no fallback (llama-quantize throws): a 40-column matrix cannot be written as q8_0.
  const std::string err2 = Quantize(Q(in) + " " + Q(TempPath("odd-q8.gguf")) + " q8_0", 1);
  EXPECT_NE(err2.find("blk.0.ffn_down.weight"), std::string::npos) << err2;
}

// A tiny bitnet-b1.58 file (the architecture whose files carry I2_S as type 36).
std::string WriteBitnetB158Model(float scale) {
  GgufWriter w;
  w.Set("general.architecture", GgufValue::String("bitnet-b1.58"));
  w.Set("bitnet-b1.58.block_count", GgufValue::U32(1));
  uint64_t s = 99;
  auto add = [&](const std::string& name, std::vector<int64_t> ne, bool ternary) {
    int64_t n = 1;
    for (int64_t d : ne) n *= d;
    std::vector<float> x(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      s = s * 6364136223846793005ull + 1442695040888963407ull;
      const int t = static_cast<int>((s >> 33) % 3) - 1;
      x[i] = ternary ? scale * static_cast<float>(t) : 0.001f * static_cast<float>((s >> 40) % 1000);
    }
    ASSERT_TRUE(w.AddTensor(name, TypeId::kF32, ne, x.data(), x.size() * 4).ok()) << name;
  };
  add("token_embd.weight", {256, 8}, false);
  add("output_norm.weight", {256}, false);
  add("blk.0.attn_q.weight", {256, 256}, true);
  add("blk.0.ffn_down.weight", {384, 256}, true);  // 384 = 3 x 128: fine for I2_S, not for TQ
  add("blk.0.attn_sub_norm.weight", {256}, false);
  const std::string path = TempPath("b158.gguf");
  EXPECT_TRUE(w.WriteFile(path).ok());
  return path;
}

TEST(QuantizeCli, I2SInAndOut) {
  const float scale = 0.3125f;  // fp16-exact, so TQ2_0 reproduces it too
  const std::string in = WriteBitnetB158Model(scale);
  const std::string i2s = TempPath("b158-i2s.gguf");
  Quantize(Q(in) + " " + Q(i2s) + " I2_S 1", 0);
  auto src = Open(in);
  auto f = Open(i2s);
  ASSERT_TRUE(src && f);
  EXPECT_EQ(f->architecture(), "bitnet-b1.58");
  EXPECT_EQ(FileType(*f), 40);
  EXPECT_EQ(TypeOf(*f, "blk.0.attn_q.weight"), TypeId::kI2_S);
  EXPECT_EQ(f->FindTensor("blk.0.attn_q.weight")->ggml_type, 36u);
  EXPECT_EQ(f->FindTensor("blk.0.attn_q.weight")->n_bytes, 256u * 256 / 4 + 32);
  EXPECT_EQ(TypeOf(*f, "blk.0.ffn_down.weight"), TypeId::kI2_S);
  EXPECT_EQ(TypeOf(*f, "token_embd.weight"), TypeId::kF16);  // not sign-quantized
  EXPECT_EQ(TypeOf(*f, "blk.0.attn_sub_norm.weight"), TypeId::kF32);
  for (const char* name : {"blk.0.attn_q.weight", "blk.0.ffn_down.weight"}) {
    EXPECT_EQ(Values(*f->FindTensor(name)), Values(*src->FindTensor(name))) << name << ": I2_S is lossless here";
  }
  // I2_S as the source: needs --allow-requantize, then converts losslessly to TQ2_0.
  const std::string tq2 = TempPath("b158-tq2.gguf");
  Quantize(Q(i2s) + " " + Q(tq2) + " tq2_0", 1);
  Quantize(Q(i2s) + " " + Q(tq2) + " tq2_0 --allow-requantize", 0);
  auto g = Open(tq2);
  ASSERT_TRUE(g);
  EXPECT_EQ(TypeOf(*g, "blk.0.attn_q.weight"), TypeId::kTQ2_0);
  EXPECT_EQ(Values(*g->FindTensor("blk.0.attn_q.weight")), Values(*src->FindTensor("blk.0.attn_q.weight")));
  EXPECT_EQ(TypeOf(*g, "blk.0.ffn_down.weight"), TypeId::kQ4_0);  // 384 % 256 != 0: TQ falls back
}

TEST(QuantizeCli, I2SRefusedOutsideBitnetCppFiles) {
  const std::string err =
      Quantize(Q(ModelPath("bitnet-tiny-stories-f32.gguf")) + " " + Q(TempPath("no-i2s.gguf")) + " i2_s", 1);
  EXPECT_NE(err.find("error: "), std::string::npos) << err;
  EXPECT_NE(err.find("bitnet-b1.58"), std::string::npos) << err;
  Quantize(Q(ModelPath("bitnet-tiny-stories-f32.gguf")) + " " + Q(TempPath("no-i2s.gguf")) +
               " tq2_0 --output-tensor-type i2_s",
           1);
}

TEST(QuantizeCli, BadInputAndUsage) {
  const std::string in = Q(ModelPath("bitnet-tiny-stories-f32.gguf"));
  const std::string out = Q(TempPath("bad.gguf"));
  Quantize("", 2);  // bad usage
  Quantize(in + " " + out, 2);  // bad usage
  Quantize(in + " " + out + " q5_0", 1);
  Quantize(in + " " + out + " tq2_0 --token-embedding-type q9", 1);
  Quantize(in + " " + out + " tq2_0 --output-tensor-type q8_K", 1);
  Quantize(in + " " + out + " tq2_0 0", 1);
  Quantize(in + " " + out + " tq2_0 4 extra", 2);  // bad usage
  Quantize(in + " " + out + " tq2_0 --no-such-flag", 2);  // bad usage
  const std::string missing = Quantize(Q(TempPath("does-not-exist.gguf")) + " " + out + " tq2_0", 1);
  EXPECT_EQ(missing.rfind("error: ", 0), 0u) << missing;
  Quantize(in + " " + in + " tq2_0", 1);  // would overwrite the input
  std::string o, e;
  EXPECT_EQ(RunTrine("quantize --help", &o, &e), 0);
  EXPECT_NE(o.find("Q4_K_M"), std::string::npos);
}

}  // namespace
}  // namespace trine
