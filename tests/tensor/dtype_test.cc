// Block sizes, the traits table, type-name parsing, on-disk id mapping and tensor byte sizes.
#include <gtest/gtest.h>

#include <cstddef>
#include <limits>
#include <vector>

#include "tensor/blocks.h"
#include "tensor/dtype.h"

namespace trine {
namespace {

// Sizes and field offsets are the on-disk layout (ggml-common.h, bitnet.cpp); the static_asserts
// in blocks.h guard the sizes at compile time, these also pin the offsets of the scales.
TEST(Blocks, SizesAndOffsets) {
  EXPECT_EQ(sizeof(BlockQ4_0), 18u);
  EXPECT_EQ(offsetof(BlockQ4_0, d), 0u);
  EXPECT_EQ(offsetof(BlockQ4_0, qs), 2u);
  EXPECT_EQ(sizeof(BlockQ8_0), 34u);
  EXPECT_EQ(offsetof(BlockQ8_0, qs), 2u);
  EXPECT_EQ(sizeof(BlockQ4_K), 144u);
  EXPECT_EQ(offsetof(BlockQ4_K, dmin), 2u);
  EXPECT_EQ(offsetof(BlockQ4_K, scales), 4u);
  EXPECT_EQ(offsetof(BlockQ4_K, qs), 16u);
  EXPECT_EQ(sizeof(BlockQ6_K), 210u);
  EXPECT_EQ(offsetof(BlockQ6_K, qh), 128u);
  EXPECT_EQ(offsetof(BlockQ6_K, scales), 192u);
  EXPECT_EQ(offsetof(BlockQ6_K, d), 208u);
  EXPECT_EQ(sizeof(BlockQ8_K), 292u);
  EXPECT_EQ(offsetof(BlockQ8_K, qs), 4u);
  EXPECT_EQ(offsetof(BlockQ8_K, bsums), 260u);
  EXPECT_EQ(sizeof(BlockTQ1_0), 54u);
  EXPECT_EQ(offsetof(BlockTQ1_0, qh), 48u);
  EXPECT_EQ(offsetof(BlockTQ1_0, d), 52u);
  EXPECT_EQ(sizeof(BlockTQ2_0), 66u);
  EXPECT_EQ(offsetof(BlockTQ2_0, d), 64u);
  EXPECT_EQ(sizeof(BlockI2S), 32u);
}

TEST(Dtype, TraitsTable) {
  struct Want {
    TypeId t;
    const char* name;
    uint32_t ggml_id;
    int64_t block_elems, block_bytes;
    bool quantized;
  };
  const Want want[] = {
      {TypeId::kF32, "f32", 0, 1, 4, false},         {TypeId::kF16, "f16", 1, 1, 2, false},
      {TypeId::kBF16, "bf16", 30, 1, 2, false},      {TypeId::kQ8_0, "q8_0", 8, 32, 34, true},
      {TypeId::kQ4_0, "q4_0", 2, 32, 18, true},      {TypeId::kQ4_K, "q4_K", 12, 256, 144, true},
      {TypeId::kQ6_K, "q6_K", 14, 256, 210, true},   {TypeId::kQ8_K, "q8_K", 15, 256, 292, true},
      {TypeId::kTQ1_0, "tq1_0", 34, 256, 54, true},  {TypeId::kTQ2_0, "tq2_0", 35, 256, 66, true},
      {TypeId::kI2_S, "i2_s", 36, 128, 32, true},
  };
  ASSERT_EQ(sizeof(want) / sizeof(want[0]), static_cast<size_t>(TypeId::kCount));
  for (const auto& w : want) {
    const TypeTraits& tr = GetTypeTraits(w.t);
    EXPECT_STREQ(tr.name, w.name);
    EXPECT_EQ(tr.ggml_id, w.ggml_id) << w.name;
    EXPECT_EQ(tr.block_elems, w.block_elems) << w.name;
    EXPECT_EQ(tr.block_bytes, w.block_bytes) << w.name;
    EXPECT_EQ(tr.quantized, w.quantized) << w.name;
    EXPECT_EQ(tr.per_tensor_scale, w.t == TypeId::kI2_S) << w.name;
    if (w.t != TypeId::kI2_S) {
      EXPECT_NE(tr.dequantize_row, nullptr) << w.name;
      EXPECT_NE(tr.quantize_row, nullptr) << w.name;
    }
  }
  EXPECT_DOUBLE_EQ(BitsPerWeight(TypeId::kTQ2_0), 2.0625);
  EXPECT_DOUBLE_EQ(BitsPerWeight(TypeId::kTQ1_0), 1.6875);
  EXPECT_DOUBLE_EQ(BitsPerWeight(TypeId::kQ4_K), 4.5);
  EXPECT_DOUBLE_EQ(BitsPerWeight(TypeId::kQ6_K), 6.5625);
  EXPECT_DOUBLE_EQ(BitsPerWeight(TypeId::kI2_S), 2.0);
}

TEST(Dtype, ParseTypeName) {
  TypeId t;
  ASSERT_TRUE(ParseTypeName("TQ2_0", &t));
  EXPECT_EQ(t, TypeId::kTQ2_0);
  ASSERT_TRUE(ParseTypeName("q4_k", &t));
  EXPECT_EQ(t, TypeId::kQ4_K);
  ASSERT_TRUE(ParseTypeName("Q6_K", &t));
  EXPECT_EQ(t, TypeId::kQ6_K);
  ASSERT_TRUE(ParseTypeName("f16", &t));
  EXPECT_EQ(t, TypeId::kF16);
  ASSERT_TRUE(ParseTypeName("I2_S", &t));
  EXPECT_EQ(t, TypeId::kI2_S);
  EXPECT_FALSE(ParseTypeName("q5_0", &t));
  EXPECT_FALSE(ParseTypeName("", &t));
  EXPECT_FALSE(ParseTypeName("tq2_00", &t));
}

TEST(Dtype, GgmlIdsDependOnArchitectureOnlyFor36) {
  TypeId t;
  ASSERT_TRUE(TypeFromGgmlId(35, "llama", &t));
  EXPECT_EQ(t, TypeId::kTQ2_0);
  ASSERT_TRUE(TypeFromGgmlId(34, "bitnet-b1.58", &t));
  EXPECT_EQ(t, TypeId::kTQ1_0);
  ASSERT_TRUE(TypeFromGgmlId(36, "bitnet-b1.58", &t));
  EXPECT_EQ(t, TypeId::kI2_S);
  ASSERT_TRUE(TypeFromGgmlId(36, "bitnet-25", &t));
  EXPECT_EQ(t, TypeId::kI2_S);
  EXPECT_FALSE(TypeFromGgmlId(36, "llama", &t));
  EXPECT_FALSE(TypeFromGgmlId(36, "bitnet", &t));
  EXPECT_FALSE(TypeFromGgmlId(36, "", &t));
  for (uint32_t removed : {31u, 32u, 33u, 37u, 38u, 3u, 6u, 7u, 1000u}) {
    EXPECT_FALSE(TypeFromGgmlId(removed, "llama", &t)) << removed;
  }
}

TEST(Dtype, TensorBytes) {
  uint64_t b = 0;
  ASSERT_TRUE(TensorBytes(TypeId::kTQ2_0, 256 * 3, &b));
  EXPECT_EQ(b, 66u * 3);
  ASSERT_TRUE(TensorBytes(TypeId::kQ8_0, 64, &b));
  EXPECT_EQ(b, 68u);
  ASSERT_TRUE(TensorBytes(TypeId::kF16, 7, &b));
  EXPECT_EQ(b, 14u);
  ASSERT_TRUE(TensorBytes(TypeId::kI2_S, 2560 * 2560, &b));
  EXPECT_EQ(b, 2560u * 2560 / 4 + 32);  // n/4 + 32-byte tail
  ASSERT_TRUE(TensorBytes(TypeId::kI2_S, 128, &b));
  EXPECT_EQ(b, 64u);
  EXPECT_FALSE(TensorBytes(TypeId::kTQ1_0, 255, &b));
  EXPECT_FALSE(TensorBytes(TypeId::kI2_S, 64, &b));
  EXPECT_FALSE(TensorBytes(TypeId::kQ4_0, -32, &b));
  EXPECT_FALSE(TensorBytes(TypeId::kF32, std::numeric_limits<int64_t>::max(), &b));  // 4 * n overflows
}

TEST(Dtype, TensorLevelErrors) {
  std::vector<float> x(300, 1.0f);
  std::vector<uint8_t> q(1024);
  // 300-element rows are not whole TQ2_0 blocks.
  EXPECT_FALSE(QuantizeTensor(TypeId::kTQ2_0, x.data(), 300, 300, q.data()).ok());
  EXPECT_FALSE(QuantizeTensor(TypeId::kQ8_0, x.data(), 64, 0, q.data()).ok());
  EXPECT_FALSE(QuantizeTensor(TypeId::kQ8_0, x.data(), 96, 64, q.data()).ok());  // 96 is not n rows of 64
  std::vector<float> y(256);
  EXPECT_FALSE(DequantizeTensor(TypeId::kTQ2_0, q.data(), 65, 256, y.data()).ok());  // short buffer
  EXPECT_FALSE(DequantizeTensor(TypeId::kTQ2_0, q.data(), 1024, 100, y.data()).ok());
  EXPECT_TRUE(DequantizeTensor(TypeId::kTQ2_0, q.data(), 66, 256, y.data()).ok());
}

}  // namespace
}  // namespace trine
