// Golden checks against the llama.cpp-written files in models/: trine's dequantizers reproduce the
// F32/F16 source values, and trine's reference quantizers reproduce llama-quantize's bytes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <string>
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
  for (const char* name : files) {
    auto q = OpenModel(name);
    ASSERT_TRUE(q);
    for (const auto& t : q->tensors()) {
      if (!GetTypeTraits(t.type).quantized) continue;
      const GgufTensorInfo* s = src->FindTensor(t.name);
      ASSERT_NE(s, nullptr) << t.name;
      std::vector<float> x;
      if (t.name == "token_embd.weight") {
        if (embd_f32.empty()) embd_f32 = ToFloat(*s);
        x = embd_f32;
      } else {
        x = ToFloat(*s);
      }
      const std::vector<uint8_t> mine = Quantize(t.type, x, t.ne[0]);
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
