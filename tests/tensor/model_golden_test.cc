// Golden checks against the llama.cpp-written files in models/: trine's dequantizers reproduce the
// F32/F16 source values, and trine's reference quantizers reproduce llama-quantize's bytes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/test_util.h"
#include "gguf/gguf_reader.h"
#include "tensor/dtype.h"

namespace trine {
namespace {

using testing::ModelPath;

std::unique_ptr<GgufFile> OpenModel(const std::string& name) {
  std::unique_ptr<GgufFile> f;
  Status st = GgufFile::Open(ModelPath(name), &f);
  EXPECT_TRUE(st.ok()) << name << ": " << st.message();
  return f;
}

// The tensor's values as fp32 (any type trine reads).
std::vector<float> ToFloat(const GgufTensorInfo& t) {
  std::vector<float> out(static_cast<size_t>(t.n_elems));
  Status st = DequantizeTensor(t.type, t.data, t.n_bytes, t.n_elems, out.data());
  EXPECT_TRUE(st.ok()) << t.name << ": " << st.message();
  return out;
}

std::vector<uint8_t> Quantize(TypeId type, const std::vector<float>& x, int64_t row) {
  uint64_t bytes = 0;
  EXPECT_TRUE(TensorBytes(type, static_cast<int64_t>(x.size()), &bytes));
  std::vector<uint8_t> out(bytes, 0xEE);
  Status st = QuantizeTensor(type, x.data(), static_cast<int64_t>(x.size()), row, out.data());
  EXPECT_TRUE(st.ok()) << st.message();
  return out;
}

// Index of the first differing byte, or -1.
int64_t FirstDiff(const std::vector<uint8_t>& a, const uint8_t* b, size_t n) {
  if (a.size() != n) return 0;
  for (size_t i = 0; i < n; ++i) {
    if (a[i] != b[i]) return static_cast<int64_t>(i);
  }
  return -1;
}

bool IsBlockMatrix(const GgufTensorInfo& t) { return t.n_dims == 2 && t.name.rfind("blk.", 0) == 0; }

// Every TQ1_0/TQ2_0 tensor of the llama-quantize'd bitnet-tiny-stories files decodes to exactly
// the F32 values it was made from (the weights are ternary x an fp16-exact scale per tensor).
TEST(ModelGolden, BitnetTinyStoriesTernaryDequantizesToF32Exactly) {
  auto f32 = OpenModel("bitnet-tiny-stories-f32.gguf");
  ASSERT_TRUE(f32);
  for (const char* name : {"bitnet-tiny-stories-TQ1_0-f16emb.gguf", "bitnet-tiny-stories-TQ2_0-f16emb.gguf"}) {
    auto q = OpenModel(name);
    ASSERT_TRUE(q);
    int n_ternary = 0;
    for (const auto& t : q->tensors()) {
      if (t.type != TypeId::kTQ1_0 && t.type != TypeId::kTQ2_0) continue;
      const GgufTensorInfo* s = f32->FindTensor(t.name);
      ASSERT_NE(s, nullptr) << t.name;
      ASSERT_EQ(s->type, TypeId::kF32);
      ASSERT_EQ(s->n_elems, t.n_elems);
      const std::vector<float> y = ToFloat(t);
      const float* x = reinterpret_cast<const float*>(s->data);
      for (int64_t i = 0; i < t.n_elems; ++i) {
        ASSERT_EQ(y[i], x[i]) << name << " " << t.name << " element " << i;
      }
      ++n_ternary;
    }
    EXPECT_EQ(n_ternary, 28) << name;  // 4 layers x 7 matrices
  }
}

// Quantizing the F32 ternary tensors with trine reproduces the shipped TQ tensors byte for byte.
TEST(ModelGolden, BitnetTinyStoriesRequantizeIsByteExact) {
  auto f32 = OpenModel("bitnet-tiny-stories-f32.gguf");
  ASSERT_TRUE(f32);
  for (const char* name : {"bitnet-tiny-stories-TQ1_0-f16emb.gguf", "bitnet-tiny-stories-TQ2_0-f16emb.gguf"}) {
    auto q = OpenModel(name);
    ASSERT_TRUE(q);
    int n = 0;
    for (const auto& t : q->tensors()) {
      if (t.type != TypeId::kTQ1_0 && t.type != TypeId::kTQ2_0) continue;
      const GgufTensorInfo* s = f32->FindTensor(t.name);
      ASSERT_NE(s, nullptr) << t.name;
      const float* x = reinterpret_cast<const float*>(s->data);
      const std::vector<uint8_t> mine = Quantize(t.type, std::vector<float>(x, x + s->n_elems), t.ne[0]);
      EXPECT_EQ(FirstDiff(mine, t.data, t.n_bytes), -1) << name << " " << t.name;
      ++n;
    }
    EXPECT_EQ(n, 28) << name;
  }
}

// Each quantized tiny-tern file decodes close to tiny-tern-f16.gguf's values. The block matrices
// are ternary x s: TQ is exact, Q8_0 within the fp16 rounding of s/127 (relative error <= 2^-11),
// Q4_0 exactly 12.5 % off on one sign, Q4_K within 1e-3 of s, Q6_K within 1.2e-2 of s.
// token_embd is float-valued: Q6_K and Q8_0 are bounded relative to its largest magnitude.
TEST(ModelGolden, TinyTernDequantizesCloseToF16) {
  auto src = OpenModel("tiny-tern-f16.gguf");
  ASSERT_TRUE(src);
  struct Seen {
    double max_rel = 0;       // block matrices: max |y - x| / |x| over x != 0
    double max_abs = 0;       // max |y - x| / max |x| of the tensor
    bool any = false;
  };
  std::vector<float> embd;
  std::vector<std::unique_ptr<GgufFile>> files;
  std::vector<const GgufTensorInfo*> checked;  // tensors already measured (same bytes are skipped)
  for (const char* name : {"tiny-tern-q8_0.gguf", "tiny-tern-q4_0.gguf", "tiny-tern-q4_k_m.gguf", "tiny-tern-tq2_0.gguf",
                           "tiny-tern-tq2_0-e8.gguf", "tiny-tern-tq1_0-e8.gguf"}) {
    files.push_back(OpenModel(name));
    const auto& q = files.back();
    ASSERT_TRUE(q);
    Seen ternary[static_cast<int>(TypeId::kCount)], floaty[static_cast<int>(TypeId::kCount)];
    for (const auto& t : q->tensors()) {
      if (!GetTypeTraits(t.type).quantized) continue;
      bool seen_before = false;
      for (const GgufTensorInfo* c : checked) {
        seen_before |= c->name == t.name && c->type == t.type && std::memcmp(c->data, t.data, t.n_bytes) == 0;
      }
      if (seen_before) continue;
      checked.push_back(&t);
      const GgufTensorInfo* s = src->FindTensor(t.name);
      ASSERT_NE(s, nullptr) << t.name;
      std::vector<float> x;
      if (t.name == "token_embd.weight") {
        if (embd.empty()) embd = ToFloat(*s);
        x = embd;
      } else {
        x = ToFloat(*s);
      }
      const std::vector<float> y = ToFloat(t);
      double amax = 0;
      for (float v : x) amax = std::fmax(amax, std::fabs(v));
      Seen& seen = (IsBlockMatrix(t) ? ternary : floaty)[static_cast<int>(t.type)];
      seen.any = true;
      for (int64_t i = 0; i < t.n_elems; ++i) {
        const double e = std::fabs(static_cast<double>(y[i]) - x[i]);
        ASSERT_TRUE(std::isfinite(y[i])) << name << " " << t.name << " " << i;
        if (x[i] != 0.0f) seen.max_rel = std::fmax(seen.max_rel, e / std::fabs(x[i]));
        seen.max_abs = std::fmax(seen.max_abs, e / amax);
      }
    }
    const auto T = [&](TypeId id) -> const Seen& { return ternary[static_cast<int>(id)]; };
    const auto F = [&](TypeId id) -> const Seen& { return floaty[static_cast<int>(id)]; };
    SCOPED_TRACE(name);
    if (T(TypeId::kTQ1_0).any) {
      EXPECT_EQ(T(TypeId::kTQ1_0).max_abs, 0.0);
    }
    if (T(TypeId::kTQ2_0).any) {
      EXPECT_EQ(T(TypeId::kTQ2_0).max_abs, 0.0);
    }
    if (T(TypeId::kQ8_0).any) {
      // formats.md says <= 4e-4; the bound is the fp16 rounding of s/127, 2^-11 = 4.9e-4, and
      // these files reach 4.08e-4.
      EXPECT_LE(T(TypeId::kQ8_0).max_rel, 1.0 / 2048);
      EXPECT_GT(T(TypeId::kQ8_0).max_rel, 0.0);  // s/127 is not fp16-exact for these scales
    }
    if (T(TypeId::kQ4_0).any) {
      EXPECT_DOUBLE_EQ(T(TypeId::kQ4_0).max_rel, 0.125);
    }
    if (T(TypeId::kQ4_K).any) {
      EXPECT_LE(T(TypeId::kQ4_K).max_abs, 1e-3);
    }
    if (T(TypeId::kQ6_K).any) {
      EXPECT_LE(T(TypeId::kQ6_K).max_abs, 0.012);
    }
    if (F(TypeId::kQ6_K).any) {
      EXPECT_LE(F(TypeId::kQ6_K).max_abs, 0.02);
      EXPECT_GT(F(TypeId::kQ6_K).max_abs, 1e-3);  // a float embedding is not representable exactly
    }
    if (F(TypeId::kQ8_0).any) {
      EXPECT_LE(F(TypeId::kQ8_0).max_abs, 0.5 / 127 + 1.0 / 2048);
    }
  }
}

// Requantizing tiny-tern-f16.gguf's weights with trine reproduces the quantized files' tensors
// byte for byte, for every quantized tensor of every tiny-tern file (Q8_0, Q4_0, Q4_K, Q6_K,
// TQ1_0, TQ2_0).
TEST(ModelGolden, TinyTernRequantizeFromF16IsByteExact) {
  auto src = OpenModel("tiny-tern-f16.gguf");
  ASSERT_TRUE(src);
  const char* files[] = {"tiny-tern-q8_0.gguf", "tiny-tern-q4_0.gguf",     "tiny-tern-q4_k_m.gguf",
                         "tiny-tern-tq2_0.gguf", "tiny-tern-tq2_0-e8.gguf", "tiny-tern-tq1_0-e8.gguf"};
  int checked[static_cast<int>(TypeId::kCount)] = {};
  std::vector<float> embd_f32;  // token_embd is shared by several files; convert it once
  std::map<std::pair<std::string, int>, std::vector<uint8_t>> done;
  for (const char* name : files) {
    auto q = OpenModel(name);
    ASSERT_TRUE(q);
    for (const auto& t : q->tensors()) {
      if (!GetTypeTraits(t.type).quantized) continue;
      const GgufTensorInfo* s = src->FindTensor(t.name);
      ASSERT_NE(s, nullptr) << t.name;
      // Several files share a tensor in the same type (token_embd in Q6_K); quantize it once.
      const auto key = std::make_pair(t.name, static_cast<int>(t.type));
      if (!done.count(key)) {
        if (t.name == "token_embd.weight" && embd_f32.empty()) embd_f32 = ToFloat(*s);
        done[key] = Quantize(t.type, t.name == "token_embd.weight" ? embd_f32 : ToFloat(*s), t.ne[0]);
      }
      const std::vector<uint8_t>& mine = done[key];
      const int64_t at = FirstDiff(mine, t.data, t.n_bytes);
      EXPECT_EQ(at, -1) << name << " " << t.name << " (" << TypeName(t.type) << "): first differing byte "
                        << at << " of " << t.n_bytes;
      checked[static_cast<int>(t.type)]++;
    }
  }
  for (TypeId ty : {TypeId::kQ8_0, TypeId::kQ4_0, TypeId::kQ4_K, TypeId::kQ6_K, TypeId::kTQ1_0, TypeId::kTQ2_0}) {
    EXPECT_GT(checked[static_cast<int>(ty)], 0) << TypeName(ty) << " not covered";
  }
}

}  // namespace
}  // namespace trine
