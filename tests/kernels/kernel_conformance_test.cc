// Kernel conformance: every kernel of every ISA this CPU has, against the scalar reference, on
// random and edge-case shapes. Outputs are NaN-poisoned first so unwritten values fail. Ternary
// kernels are integer-exact and must equal the reference bit for bit; float kernels are held to
// an NMSE limit.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <utility>
#include <vector>

#include "core/fp16.h"
#include "kernel_test_util.h"
#include "kernels.h"
#include "repack.h"
#include "x86/tq1_x16.h"
#include "tensor/blocks.h"
#include "tensor/dtype.h"

namespace trine::kernels {
namespace {

struct Shape {
  int64_t rows, cols;
  int n_tokens;
};

const Shape kShapes[] = {{1, 256, 1}, {7, 256, 3}, {33, 512, 1}, {16, 2560, 2}, {5, 6912, 1}, {64, 768, 65},
                         {3, 1024, 130}, {50, 512, 7}, {37, 2560, 1},
                         // 13 groups of 16 rows: the AVX2 x16 prefill's chunks of 8 groups, 2 passes + 1.
                         {200, 512, 9}};

struct Case {
  TypeId file_type;  // type as stored (TQ1_0 / I2_S are repacked like the loader does)
  TernaryVariant variant;
  bool x16 = false;  // also interleave to the x16 layout (where the ISA's kernel reads it)
};

std::vector<float> RandomActivations(int64_t n, std::mt19937* rng, bool edge) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& v : x) v = nd(*rng);
  if (edge) {
    // All-zero block, a spike, and large magnitudes.
    for (int64_t i = 0; i < std::min<int64_t>(n, 256); ++i) x[static_cast<size_t>(i)] = 0.0f;
    if (n > 300) x[300] = 1e4f;
    if (n > 600) x[600] = -1e4f;
  }
  return x;
}

class KernelConformance : public ::testing::TestWithParam<std::tuple<Isa, Case>> {};

TEST_P(KernelConformance, MatchesReference) {
  const auto [isa, c] = GetParam();
  std::mt19937 rng(1234);
  for (const Shape& s : kShapes) {
    for (bool edge : {false, true}) {
      SCOPED_TRACE(::testing::Message() << TypeName(c.file_type) << " " << s.rows << "x" << s.cols << " tokens "
                                        << s.n_tokens << (edge ? " edge" : ""));
      const int64_t n = s.rows * s.cols;
      const bool ternary = c.file_type == TypeId::kTQ2_0 || c.file_type == TypeId::kTQ1_0 ||
                           c.file_type == TypeId::kI2_S;
      std::vector<float> wf = ternary ? RandomTernaryWeights(n, &rng, 0.037f) : RandomActivations(n, &rng, false);
      uint64_t bytes = 0;
      ASSERT_TRUE(TensorBytes(c.file_type, n, &bytes));
      std::vector<uint8_t> wq(bytes);
      ASSERT_TRUE(QuantizeTensor(c.file_type, wf.data(), n, s.cols, wq.data()).ok());
      WeightView w;
      w.type = c.file_type;
      w.rows = s.rows;
      w.cols = s.cols;
      w.data = wq.data();
      w.row_bytes = static_cast<size_t>(bytes / static_cast<uint64_t>(s.rows));
      if (c.file_type == TypeId::kI2_S) {
        w.row_bytes = static_cast<size_t>(s.cols / 4);
        std::memcpy(&w.tensor_scale, wq.data() + n / 4, 4);
      }
      PageBuffer repacked;
      // As the loader: TQ1_0 that gets the x16 layout is interleaved as it is, not repacked.
      if (NeedsTernaryRepack(w) && !(c.x16 && WantsX16(w.type, isa, c.variant))) {
        ASSERT_TRUE(RepackToTq2(w, &repacked, &w).ok());
      }
      const WeightView plain = w;
      PageBuffer interleaved;
      // The lookup kernels' layout, as the loader builds it (they read plain rows too: both run).
      const bool lut = WantsLutLayout(w.type, isa, c.variant);
      if (lut) {
        ASSERT_TRUE(InterleaveLut(plain, &interleaved, &w).ok());
        ASSERT_EQ(w.interleave, kInterleaveLut);
        ASSERT_EQ(reinterpret_cast<uintptr_t>(w.data) % 32, 0u);
        ASSERT_EQ(w.group_bytes * static_cast<size_t>((s.rows + 15) / 16), LutBytes(plain));
        std::vector<uint8_t> scratch(w.row_bytes);
        for (int64_t r = 0; r < s.rows; ++r) {
          ASSERT_EQ(std::memcmp(RowData(w, r, scratch.data()), plain.data + static_cast<size_t>(r) * plain.row_bytes,
                                plain.row_bytes), 0) << "lookup layout row " << r;
        }
      }
      if (c.x16) {
        ASSERT_TRUE(InterleaveX16(plain, &interleaved, &w).ok());
        ASSERT_EQ(w.interleave, 16);
        ASSERT_EQ(reinterpret_cast<uintptr_t>(w.data) % 64, 0u);
        // RowData gives back every row exactly.
        std::vector<uint8_t> scratch(w.row_bytes);
        for (int64_t r = 0; r < s.rows; ++r) {
          ASSERT_EQ(std::memcmp(RowData(w, r, scratch.data()), plain.data + static_cast<size_t>(r) * plain.row_bytes,
                                plain.row_bytes), 0) << "row " << r;
        }
      }

      const size_t act = ActivationBytes(w.type, s.cols);
      std::vector<uint8_t> xq(act * static_cast<size_t>(s.n_tokens));
      for (int t = 0; t < s.n_tokens; ++t) {
        const std::vector<float> x = RandomActivations(s.cols, &rng, edge && t == 0);
        QuantizeActivations(w.type, x.data(), s.cols, xq.data() + act * static_cast<size_t>(t));
      }
      const int64_t ldy = s.rows + 3;  // a leading dimension wider than rows: padding must stay untouched
      const float nan = std::numeric_limits<float>::quiet_NaN();
      std::vector<float> want(static_cast<size_t>(ldy * s.n_tokens), nan), got = want;
      GemmRef(plain, xq.data(), act, s.n_tokens, want.data(), ldy, 0, s.rows, 0.75f);
      GemmFn fn = SelectGemm(w.type, isa, c.variant, nullptr);
      if (c.x16 || lut) {
        // The reference reads the interleaved layout too (the profiler's f32 path, tests).
        std::vector<float> ref2(want.size(), nan);
        GemmRef(w, xq.data(), act, s.n_tokens, ref2.data(), ldy, 0, s.rows, 0.75f);
        for (size_t i = 0; i < want.size(); ++i) {
          ASSERT_TRUE(std::memcmp(&ref2[i], &want[i], 4) == 0) << "GemmRef on the interleaved layout, index " << i;
        }
      }
      // Row ranges as threads would split them: halves, then thirds (ranges off 16-row
      // boundaries), each pass NaN-poisoned afresh.
      for (int pass = 0; pass < (lut ? 4 : 2); ++pass) {
        const int parts = 2 + pass % 2;
        const WeightView& v = pass < 2 ? w : plain;  // the lookup kernels on plain rows too
        SCOPED_TRACE(::testing::Message() << parts << " row ranges" << (v.interleave ? "" : ", plain rows"));
        std::fill(got.begin(), got.end(), nan);
        for (int p = 0; p < parts; ++p) {
          fn(v, xq.data(), act, s.n_tokens, got.data(), ldy, s.rows * p / parts, s.rows * (p + 1) / parts, 0.75f);
        }
        double err = 0.0, ref = 0.0;
        for (int t = 0; t < s.n_tokens; ++t) {
          for (int64_t r = 0; r < ldy; ++r) {
            const size_t i = static_cast<size_t>(t * ldy + r);
            if (r >= s.rows) {
              ASSERT_TRUE(std::isnan(got[i])) << "wrote outside its rows at " << r;
              continue;
            }
            ASSERT_FALSE(std::isnan(got[i])) << "row " << r << " token " << t << " not written";
            if (ternary) {
              ASSERT_EQ(got[i], want[i]) << "row " << r << " token " << t;
            }
            err += (got[i] - want[i]) * static_cast<double>(got[i] - want[i]);
            ref += want[i] * static_cast<double>(want[i]);
          }
        }
        if (!ternary) {
          EXPECT_LT(err / std::max(ref, 1e-30), 1e-10);
        }
      }
    }
  }
}

// Every case on every available ISA level; the x16 cases only where that level's kernel reads
// the x16 layout (elsewhere the loader never builds it).
std::vector<std::tuple<Isa, Case>> ConformanceParams() {
  const Case cases[] = {{TypeId::kTQ2_0, TernaryVariant::kInt8Dot},       {TypeId::kTQ2_0, TernaryVariant::kMulFree},
                        {TypeId::kTQ1_0, TernaryVariant::kInt8Dot},       {TypeId::kTQ1_0, TernaryVariant::kMulFree},
                        {TypeId::kI2_S, TernaryVariant::kInt8Dot},        {TypeId::kTQ2_0, TernaryVariant::kInt8Dot, true},
                        {TypeId::kTQ1_0, TernaryVariant::kInt8Dot, true}, {TypeId::kI2_S, TernaryVariant::kInt8Dot, true},
                        {TypeId::kF16, TernaryVariant::kDefault},         {TypeId::kF32, TernaryVariant::kDefault},
                        {TypeId::kTQ2_0, TernaryVariant::kLut},           {TypeId::kTQ1_0, TernaryVariant::kLut},
                        {TypeId::kI2_S, TernaryVariant::kLut}};
  std::vector<std::tuple<Isa, Case>> out;
  for (Isa isa : AvailableIsas()) {
    for (const Case& c : cases) {
      // The lookup kernels only where the ISA has them (elsewhere kLut runs the int8-dot kernel).
      if (c.variant == TernaryVariant::kLut && GetKernelTable(isa).tq2_lut == nullptr) continue;
      if (!c.x16 || WantsX16(TypeId::kTQ2_0, isa, c.variant)) out.emplace_back(isa, c);
    }
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(
    All, KernelConformance, ::testing::ValuesIn(ConformanceParams()),
    [](const ::testing::TestParamInfo<std::tuple<Isa, Case>>& pi) {
      const Case& c = std::get<1>(pi.param);
      std::string v = c.variant == TernaryVariant::kMulFree ? "_mulfree" : c.variant == TernaryVariant::kLut ? "_lut" : "";
      if (c.x16) v += "_x16";
      return std::string(IsaName(std::get<0>(pi.param))) + "_" + TypeName(c.file_type) + v;
    });

// TQ1_0 read in place decodes every byte value as the reference does, including the 13 values
// no quantizer writes (a file may hold them): random bytes and scales, x16 layout, every ISA
// level whose kernel reads it, token counts 1..9, row ranges split in thirds.
TEST(Tq1X16, EveryByteValueMatchesReference) {
  std::mt19937 rng(77);
  int levels = 0;
  for (Isa isa : AvailableIsas()) {
    if (!WantsX16(TypeId::kTQ1_0, isa, TernaryVariant::kInt8Dot)) continue;
    ++levels;
    for (const Shape& s : {Shape{37, 512, 0}, Shape{16, 2560, 0}, Shape{3, 256, 0}}) {
      const int64_t nb = s.cols / 256;
      std::vector<uint8_t> plain(static_cast<size_t>(s.rows * nb) * 54);
      std::uniform_real_distribution<float> ud(-0.2f, 0.2f);
      for (size_t i = 0; i < plain.size(); i += 54) {
        for (size_t j = 0; j < 52; ++j) plain[i + j] = static_cast<uint8_t>(rng());
        const uint16_t d = Fp32ToFp16(ud(rng));
        std::memcpy(&plain[i + 52], &d, 2);
      }
      // Every byte value appears: the code bytes of the first five blocks hold 0..255 in order.
      for (int v = 0; v < 256 && v / 52 < s.rows * nb; ++v) {
        plain[static_cast<size_t>(v / 52) * 54 + static_cast<size_t>(v % 52)] = static_cast<uint8_t>(v);
      }
      WeightView w;
      w.type = TypeId::kTQ1_0;
      w.rows = s.rows;
      w.cols = s.cols;
      w.data = plain.data();
      w.row_bytes = static_cast<size_t>(nb) * 54;
      const WeightView file_rows = w;
      PageBuffer interleaved;
      ASSERT_TRUE(InterleaveX16(file_rows, &interleaved, &w).ok());
      const GemmFn fn = SelectGemm(TypeId::kTQ1_0, isa, TernaryVariant::kDefault, nullptr);
      for (int n = 1; n <= 9; ++n) {
        SCOPED_TRACE(::testing::Message() << IsaName(isa) << " " << s.rows << "x" << s.cols << " tokens " << n);
        const size_t act = ActivationBytes(TypeId::kTQ1_0, s.cols);
        std::vector<uint8_t> xq(act * static_cast<size_t>(n));
        for (int t = 0; t < n; ++t) {
          const std::vector<float> x = RandomActivations(s.cols, &rng, t == 0);
          QuantizeActivations(TypeId::kTQ1_0, x.data(), s.cols, xq.data() + act * static_cast<size_t>(t));
        }
        const int64_t ldy = s.rows + 2;
        std::vector<float> want(static_cast<size_t>(ldy * n), Nan()), got = want;
        GemmRef(file_rows, xq.data(), act, n, want.data(), ldy, 0, s.rows, 0.5f);
        for (int p = 0; p < 3; ++p) fn(w, xq.data(), act, n, got.data(), ldy, s.rows * p / 3, s.rows * (p + 1) / 3, 0.5f);
        for (size_t i = 0; i < want.size(); ++i) {
          ASSERT_TRUE(std::memcmp(&got[i], &want[i], 4) == 0) << "index " << i << " got " << got[i] << " want " << want[i];
        }
      }
    }
  }
  if (levels == 0) {
    // Without AVX-512 VBMI (or with TRINE_TQ1_X16=0) the loader repacks TQ1_0 to TQ2_0, which
    // KernelConformance covers.
    GTEST_SKIP() << "no ISA level reads TQ1_0 in place here (needs AVX-512 VBMI)";
  }
}

// TQ2_0 rows holding every byte value, code 3 included (no quantizer writes it, but a file may, and
// the reference reads it as 3, weight +2, as llama.cpp does): every int8-dot and lookup kernel of
// every ISA level, on file rows and on the x16 / lookup-table layout where that level reads it,
// gives GemmRef's bits. Token 0 sits at the int8 extremes (-128 and 127 in alternate blocks, against
// an all-code-3 block): the largest products, where the int16 bounds of the AVX2 kernels (x16: 8
// lines of vpmaddubsw sums; lookup: 32 table entries) are argued. The multiplication-free kernels
// only know the weights -1, 0, +1 (bit-planes of codes 0 and 2): for them code 3 reads as weight 0,
// the reference of the rows with 3 -> 1.
TEST(Tq2AnyByte, EveryByteValueMatchesReference) {
  std::mt19937 rng(91);
  for (Isa isa : AvailableIsas()) {
    for (TernaryVariant variant : {TernaryVariant::kInt8Dot, TernaryVariant::kMulFree, TernaryVariant::kLut}) {
      for (int layout : {0, 16, kInterleaveLut}) {
        if (layout == 16 && !WantsX16(TypeId::kTQ2_0, isa, variant)) continue;
        if (layout == kInterleaveLut && !WantsLutLayout(TypeId::kTQ2_0, isa, variant)) continue;
        for (const Shape& s : {Shape{37, 512, 0}, Shape{16, 2560, 0}}) {
          const int64_t nb = s.cols / 256;
          std::vector<uint8_t> plain(static_cast<size_t>(s.rows * nb) * sizeof(BlockTQ2_0));
          std::uniform_real_distribution<float> ud(-0.2f, 0.2f);
          for (size_t i = 0; i < plain.size(); i += sizeof(BlockTQ2_0)) {
            for (size_t j = 0; j < 64; ++j) plain[i + j] = static_cast<uint8_t>(rng());
            const uint16_t d = Fp32ToFp16(ud(rng));
            std::memcpy(&plain[i + 64], &d, 2);
          }
          // Every byte value appears, and one block is all code 3 (0xFF).
          for (int v = 0; v < 256; ++v) plain[static_cast<size_t>(v / 64) * sizeof(BlockTQ2_0) + v % 64] = static_cast<uint8_t>(v);
          std::memset(&plain[4 * sizeof(BlockTQ2_0)], 0xFF, 64);
          WeightView w;
          w.type = TypeId::kTQ2_0;
          w.rows = s.rows;
          w.cols = s.cols;
          w.data = plain.data();
          w.row_bytes = static_cast<size_t>(nb) * sizeof(BlockTQ2_0);
          std::vector<uint8_t> ternary_only = plain;
          for (size_t i = 0; i < plain.size(); i += sizeof(BlockTQ2_0)) {
            for (size_t j = 0; j < 64; ++j) {
              uint8_t& q = ternary_only[i + j];
              for (int n = 0; n < 4; ++n) {
                if (((q >> (2 * n)) & 3) == 3) q = static_cast<uint8_t>(q ^ (2 << (2 * n)));
              }
            }
          }
          const GemmFn fn = SelectGemm(TypeId::kTQ2_0, isa, variant, nullptr);
          WeightView file_rows = w;
          PageBuffer interleaved;
          if (layout == 16) {
            ASSERT_TRUE(InterleaveX16(file_rows, &interleaved, &w).ok());
          } else if (layout == kInterleaveLut) {
            ASSERT_TRUE(InterleaveLut(file_rows, &interleaved, &w).ok());
          }
          if (fn == GetKernelTable(isa).tq2_mulfree) file_rows.data = ternary_only.data();
          for (int n : {1, 2, 3, 4, 5, 9}) {
            SCOPED_TRACE(::testing::Message() << IsaName(isa) << " " << TernaryVariantName(variant) << " layout " << layout
                                              << " " << s.rows << "x" << s.cols << " tokens " << n);
            const size_t act = ActivationBytes(TypeId::kTQ2_0, s.cols);
            std::vector<uint8_t> xq(act * static_cast<size_t>(n));
            for (int t = 0; t < n; ++t) {
              const std::vector<float> x = RandomActivations(s.cols, &rng, t == 1);
              QuantizeActivations(TypeId::kTQ2_0, x.data(), s.cols, xq.data() + act * static_cast<size_t>(t));
            }
            BlockQ8_K* a0 = reinterpret_cast<BlockQ8_K*>(xq.data());
            for (int64_t b = 0; b < nb; ++b) {
              for (int j = 0; j < 256; ++j) a0[b].qs[j] = static_cast<int8_t>(b % 2 == 0 ? -128 : 127);
              for (int j = 0; j < 16; ++j) a0[b].bsums[j] = static_cast<int16_t>(16 * a0[b].qs[0]);
            }
            const int64_t ldy = s.rows + 2;
            std::vector<float> want(static_cast<size_t>(ldy * n), Nan()), got = want;
            GemmRef(file_rows, xq.data(), act, n, want.data(), ldy, 0, s.rows, 0.5f);
            for (int p = 0; p < 3; ++p) fn(w, xq.data(), act, n, got.data(), ldy, s.rows * p / 3, s.rows * (p + 1) / 3, 0.5f);
            for (size_t i = 0; i < want.size(); ++i) {
              ASSERT_TRUE(std::memcmp(&got[i], &want[i], 4) == 0) << "index " << i << " got " << got[i] << " want " << want[i];
            }
          }
        }
      }
    }
  }
}

// The TQ1_0 x16 layout's byte code (x86/tq1_x16.h), checked on every file byte value with no
// CPU feature needed: the recoded byte's tables give the file byte's five digits (digits 0-3 from
// the low 7 bits plus a top-bit term, digit 4 from the low 6 bits alone), and the byte RowData
// gives back has the same digits and is the file's own byte wherever a quantizer wrote it.
TEST(Tq1X16, CodecKeepsEveryByteValuesDigits) {
  const Tq1Codec& c = kTq1Codec;
  int quantizer_bytes = 0;
  for (int q = 0; q < 256; ++q) {
    SCOPED_TRACE(::testing::Message() << "file byte " << q);
    const uint8_t b = static_cast<uint8_t>(q), e = c.recode[b];
    // As the VBMI kernel decodes: low7 plus top under the top bit, digit 4 from the low 6 bits.
    const uint8_t code = static_cast<uint8_t>(c.low7[e & 0x7F] + (e & 0x80 ? c.top[e & 0x3F] : 0));
    for (int n = 0; n < 4; ++n) EXPECT_EQ((code >> (2 * n)) & 3, Tq1Digit(b, n)) << "digit " << n;
    EXPECT_EQ(c.digit4[e & 0x3F], Tq1Digit(b, 4));
    // The same decode as one 256-entry table, digit 4 from the low 7 bits.
    EXPECT_EQ(c.digits0123[e], code);
    EXPECT_EQ(c.digit4[e & 0x7F], Tq1Digit(b, 4));
    const uint8_t back = c.file_byte[e];
    EXPECT_EQ(Tq1Value(back), Tq1Value(b));
    if (Tq1QuantizerByte(Tq1Value(b)) == b) {
      ++quantizer_bytes;
      EXPECT_EQ(back, b);
    }
  }
  EXPECT_EQ(quantizer_bytes, 243);  // one per five-digit value: the other 13 repeat some value's digits
}

TEST(Dispatch, UnknownIsaNameIsReported) {
  // The process-wide selection is fixed at first use; here only the name table is checked.
  EXPECT_STREQ(IsaName(Isa::kAvx512), "avx512");
  EXPECT_TRUE(IsaSupported(Isa::kRef));
}

// A view of `rows` plain rows of `cols` values of `type` at `data` (the file layout).
WeightView PlainRows(TypeId type, int64_t rows, int64_t cols, const uint8_t* data) {
  const TypeTraits& tr = GetTypeTraits(type);
  WeightView w;
  w.type = type;
  w.rows = rows;
  w.cols = cols;
  w.row_bytes = static_cast<size_t>(cols / tr.block_elems * tr.block_bytes);
  w.data = data;
  return w;
}

// InterleaveX16Rows (rows produced group by group, as a head requantization does) writes the same
// bytes as InterleaveX16 of the whole plain tensor, for TQ2_0 and Q4_0 and a ragged last group.
TEST(X16Layout, RowsByGroupEqualWholeTensor) {
  std::mt19937 rng(5);
  for (TypeId t : {TypeId::kTQ2_0, TypeId::kTQ1_0, TypeId::kQ4_0, TypeId::kQ4_K, TypeId::kQ6_K}) {
    const TypeTraits& tr = GetTypeTraits(t);
    const int64_t rows = 37, cols = 768;  // 3 blocks of 256 (an odd count: a half-padded scale line)
    const size_t row_bytes = static_cast<size_t>(cols / tr.block_elems * tr.block_bytes);
    std::vector<uint8_t> plain(row_bytes * rows);
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<float> x = RandomTernaryWeights(cols, &rng, 0.5f + 0.01f * static_cast<float>(r));
      if (t == TypeId::kQ4_0 || t == TypeId::kQ4_K || t == TypeId::kQ6_K) {
        std::normal_distribution<float> nd(0.0f, 1.0f);
        for (auto& v : x) v = nd(rng);
      }
      tr.quantize_row(x.data(), plain.data() + static_cast<size_t>(r) * row_bytes, cols);
    }
    const WeightView w = PlainRows(t, rows, cols, plain.data());
    PageBuffer whole, by_group;
    WeightView a, b;
    ASSERT_TRUE(InterleaveX16(w, &whole, &a).ok());
    WeightView shape = w;
    shape.data = nullptr;
    std::atomic<int> calls{0};
    const X16RowSource fill = [&](int64_t r0, int n, uint8_t* out) {
      ++calls;
      std::memcpy(out, plain.data() + static_cast<size_t>(r0) * row_bytes, static_cast<size_t>(n) * row_bytes);
    };
    ASSERT_TRUE(InterleaveX16Rows(shape, fill, &by_group, &b).ok());
    EXPECT_EQ(calls.load(), 3);  // 16 + 16 + 5 rows
    EXPECT_EQ(b.interleave, 16);
    ASSERT_EQ(a.group_bytes, b.group_bytes);
    EXPECT_EQ(std::memcmp(a.data, b.data, a.group_bytes * 3), 0) << TypeName(t);
    // Code bytes per row and block: the block less its fp16 d (kept in the scale lines), or the
    // whole block for Q4_K (d and dmin stay in line 0; the scale line repeats d). TQ1_0: 13 lines,
    // no TQ2_0 growth. One 64-byte scale line per two blocks.
    const int64_t nb = cols / tr.block_elems;
    const size_t code_bytes = t == TypeId::kQ4_K ? tr.block_bytes : tr.block_bytes - 2;
    EXPECT_EQ(a.group_bytes, static_cast<size_t>(64 * ((nb + 1) / 2)) + static_cast<size_t>(16 * nb) * code_bytes)
        << TypeName(t);
    // A plain-row shape of another type is refused with the same error as InterleaveX16.
    shape.type = TypeId::kQ8_0;
    EXPECT_FALSE(InterleaveX16Rows(shape, [](int64_t, int, uint8_t*) {}, &by_group, &b).ok());
  }
}

// InterleaveX16 with a step callback (Model::CopyFileHead releases the file's pages with it):
// the same bytes as without, and the steps report the whole source once, in order, each step's
// bytes only after they were read. 8003 Q4_0 rows of 4096 values are 17.6 MiB: two 16 MiB steps,
// the second ending in a partial group.
TEST(X16Layout, SteppedCopyReportsEverySourceByteOnce) {
  const TypeTraits& tr = GetTypeTraits(TypeId::kQ4_0);
  const int64_t rows = 8003, cols = 4096;
  const size_t row_bytes = static_cast<size_t>(cols / tr.block_elems * tr.block_bytes);
  std::vector<uint8_t> plain(row_bytes * rows);
  std::mt19937 rng(9);
  std::vector<float> x(static_cast<size_t>(cols));
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (int64_t r = 0; r < rows; ++r) {
    if (r < 64) for (auto& v : x) v = nd(rng);  // then repeated: distinct rows in every group matter, not all
    tr.quantize_row(x.data(), plain.data() + static_cast<size_t>(r) * row_bytes, cols);
  }
  const WeightView w = PlainRows(TypeId::kQ4_0, rows, cols, plain.data());
  PageBuffer whole, stepped;
  WeightView a, b;
  ASSERT_TRUE(InterleaveX16(w, &whole, &a).ok());
  std::vector<std::pair<size_t, size_t>> steps;
  // A released step reads as zeros from here on (as a dropped file page would read from the file).
  auto done = [&](size_t off, size_t n) {
    steps.emplace_back(off, n);
    std::memset(plain.data() + off, 0, n);
  };
  std::vector<uint8_t> kept(plain);
  ASSERT_TRUE(InterleaveX16(w, &stepped, &b, done).ok());
  ASSERT_EQ(steps.size(), 2u);
  size_t next = 0;
  for (const auto& [off, n] : steps) {
    EXPECT_EQ(off, next);
    EXPECT_GT(n, 0u);
    next = off + n;
  }
  EXPECT_EQ(next, plain.size());
  ASSERT_EQ(a.group_bytes, b.group_bytes);
  EXPECT_EQ(std::memcmp(a.data, b.data, a.group_bytes * static_cast<size_t>((rows + 15) / 16)), 0);
  std::vector<uint8_t> scratch(row_bytes);
  for (int64_t r : {int64_t{0}, int64_t{7279}, int64_t{7280}, rows - 1}) {
    EXPECT_EQ(std::memcmp(RowData(b, r, scratch.data()), kept.data() + static_cast<size_t>(r) * row_bytes, row_bytes), 0)
        << "row " << r;
  }
}

}  // namespace
}  // namespace trine::kernels
