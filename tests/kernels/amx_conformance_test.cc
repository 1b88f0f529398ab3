// AMX-INT8 ternary kernel (GemmTq2Amx, kernels/x86/amx/gemm_amx.cc) against the scalar reference,
// bit for bit: random and edge shapes (rows off 16, row ranges split as threads split them, every
// token count 1..70 and 128, so the AVX-512 fallback below AmxMinTokens() and the padded token
// tails are covered), all four 2-bit codes, and the BitNet 2B projection shapes; TQ2_0 and (where
// the loader reads it in place) TQ1_0 with every byte value. Outputs are
// NaN-poisoned first. Skipped (with the reason printed) only where the CPU or OS lacks AMX.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/fp16.h"
#include "cpu_features.h"
#include "kernel_test_util.h"
#include "kernels.h"
#include "repack.h"
#include "tensor/blocks.h"
#include "tensor/dtype.h"

namespace trine::kernels {
namespace {

// True (after saying why) where AMX-INT8 cannot run. The caller skips: GTEST_SKIP only returns
// from the function it is written in, so it must sit in the test body itself.
bool AmxMissing() {
  if (AmxAvailable()) return false;
  const CpuFeatures& f = GetCpuFeatures();
  std::printf("[  SKIPPED ] AMX-INT8 not usable: cpu features \"%s\"%s\n", f.ToString().c_str(),
              f.amx_int8 ? " (CPU has it; the OS refused the tile-data permission)" : "");
  return true;
}

struct Matrix {
  std::vector<uint8_t> plain;        // TQ2_0 / TQ1_0 rows
  PageBuffer interleaved;          // x16
  WeightView w_plain, w;
};

// The x16 types the AMX kernel reads: TQ2_0, and TQ1_0 where the loader keeps it (VBMI).
std::vector<TypeId> AmxTypes() {
  std::vector<TypeId> t = {TypeId::kTQ2_0};
  if (Tq1X16Enabled()) t.push_back(TypeId::kTQ1_0);
  return t;
}

// raw: random bytes (every 2-bit code 0..3 of TQ2_0, every byte value of TQ1_0, which no
// quantizer writes but a file may hold) and random fp16 scales; else quantized random ternary
// weights.
void MakeMatrix(TypeId type, int64_t rows, int64_t cols, bool raw, std::mt19937* rng, Matrix* m) {
  const int64_t nb = cols / kQK_K;
  const size_t block_bytes = type == TypeId::kTQ1_0 ? sizeof(BlockTQ1_0) : sizeof(BlockTQ2_0);
  m->plain.resize(static_cast<size_t>(rows * nb) * block_bytes);
  if (raw) {
    std::uniform_real_distribution<float> ud(-0.1f, 0.1f);
    for (int64_t i = 0; i < rows * nb; ++i) {
      uint8_t* blk = m->plain.data() + static_cast<size_t>(i) * block_bytes;
      for (size_t j = 0; j + 2 < block_bytes; ++j) blk[j] = static_cast<uint8_t>((*rng)());
      const uint16_t d = Fp32ToFp16(ud(*rng));
      std::memcpy(blk + block_bytes - 2, &d, 2);  // both types end with their fp16 d
    }
  } else {
    const std::vector<float> wf = RandomTernaryWeights(rows * cols, rng, 0.037f);
    ASSERT_TRUE(QuantizeTensor(type, wf.data(), rows * cols, cols, m->plain.data()).ok());
  }
  WeightView w;
  w.type = type;
  w.rows = rows;
  w.cols = cols;
  w.data = m->plain.data();
  w.row_bytes = static_cast<size_t>(nb) * block_bytes;
  m->w_plain = w;
  ASSERT_TRUE(InterleaveX16(w, &m->interleaved, &m->w).ok());
  ASSERT_EQ(m->w.interleave, 16);
}

std::vector<uint8_t> MakeActivations(int64_t cols, int n_tokens, bool edge, std::mt19937* rng) {
  const size_t act = ActivationBytes(TypeId::kTQ2_0, cols);
  std::vector<uint8_t> xq(act * static_cast<size_t>(n_tokens));
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(cols));
  for (int t = 0; t < n_tokens; ++t) {
    for (auto& v : x) v = nd(*rng);
    if (edge && t % 3 == 0) {
      // An all-zero block, spikes (the block's other values round to 0), one saturated block.
      for (int64_t i = 0; i < 256; ++i) x[static_cast<size_t>(i)] = 0.0f;
      if (cols > 300) x[300] = 1e4f;
      if (cols > 600) x[600] = -1e4f;
      if (cols >= 1024) {
        for (int64_t i = 768; i < 1024; ++i) x[static_cast<size_t>(i)] = (i % 2 ? -1.0f : 1.0f);
      }
    }
    QuantizeActivations(TypeId::kTQ2_0, x.data(), cols, xq.data() + act * static_cast<size_t>(t));
  }
  return xq;
}

bool SameBits(float a, float b) { return std::memcmp(&a, &b, 4) == 0; }

// GemmTq2Amx over `parts` contiguous row ranges (16-row chunks like ops::MatMul when chunked, else
// arbitrary cuts), NaN-poisoned output, ldy wider than rows.
std::vector<float> RunAmx(const WeightView& w, const std::vector<uint8_t>& xq, int n_tokens, int64_t ldy, int parts,
                          bool chunked) {
  const size_t act = ActivationBytes(TypeId::kTQ2_0, w.cols);
  std::vector<float> y(static_cast<size_t>(ldy * n_tokens), Nan());
  const int64_t n_chunks = (w.rows + 15) / 16;
  for (int p = 0; p < parts; ++p) {
    int64_t r0 = w.rows * p / parts, r1 = w.rows * (p + 1) / parts;
    if (chunked) {
      r0 = n_chunks * p / parts * 16;
      r1 = std::min<int64_t>(n_chunks * (p + 1) / parts * 16, w.rows);
    }
    if (r0 < r1) GemmTq2Amx(w, xq.data(), act, n_tokens, y.data(), ldy, r0, r1, 0.75f);
  }
  return y;
}

void ExpectBitsEqual(const std::vector<float>& got, const std::vector<float>& want, int64_t ldy, int64_t rows,
                     int n_tokens, int64_t r_lo, int64_t r_hi, const char* what) {
  for (int t = 0; t < n_tokens; ++t) {
    for (int64_t r = 0; r < ldy; ++r) {
      const size_t i = static_cast<size_t>(t * ldy + r);
      if (r >= rows) {
        ASSERT_TRUE(std::isnan(got[i])) << what << ": padding written at token " << t << " row " << r;
        continue;
      }
      if (r < r_lo || r >= r_hi) continue;
      ASSERT_TRUE(SameBits(got[i], want[i])) << what << ": token " << t << " row " << r << " got " << got[i]
                                             << " want " << want[i];
    }
  }
}

TEST(AmxConformance, Reports) {
  std::printf("AMX: available %d, enabled %d (TRINE_AMX), min tokens %d, cpu \"%s\"\n", AmxAvailable() ? 1 : 0,
              AmxEnabled() ? 1 : 0, AmxMinTokens(), GetCpuFeatures().ToString().c_str());
  if (AmxEnabled()) {
    std::string name;
    EXPECT_EQ(SelectGemm(TypeId::kTQ2_0, Isa::kAvx512, TernaryVariant::kDefault, &name), &GemmTq2Amx);
    EXPECT_NE(name.find("amx"), std::string::npos) << name;
  }
}

// Every token count 1..70 and 128 on small shapes, rows off 16, split 1/2/3 ways.
TEST(AmxConformance, TokenCountsAndRowSplits) {
  if (AmxMissing()) GTEST_SKIP() << "AMX-INT8 is not available on this CPU/OS";
  std::mt19937 rng(99);
  struct S {
    int64_t rows, cols;
    bool raw;
  };
  for (TypeId type : AmxTypes()) for (const S& s : {S{37, 512, false}, S{16, 256, true}, S{50, 1024, true}}) {
    Matrix m;
    MakeMatrix(type, s.rows, s.cols, s.raw, &rng, &m);
    std::vector<int> toks;
    for (int n = 1; n <= 70; ++n) toks.push_back(n);
    toks.push_back(128);
    for (int n : toks) {
      const bool edge = n % 2 == 0;
      SCOPED_TRACE(::testing::Message() << TypeName(type) << " " << s.rows << "x" << s.cols
                                        << (s.raw ? " raw codes" : "") << " tokens " << n
                                        << (edge ? " edge" : ""));
      const std::vector<uint8_t> xq = MakeActivations(s.cols, n, edge, &rng);
      const int64_t ldy = s.rows + 3;
      std::vector<float> want(static_cast<size_t>(ldy * n), Nan());
      GemmRef(m.w_plain, xq.data(), ActivationBytes(TypeId::kTQ2_0, s.cols), n, want.data(), ldy, 0, s.rows, 0.75f);
      for (int parts : {1, 2, 3}) {
        for (bool chunked : {false, true}) {
          SCOPED_TRACE(::testing::Message() << parts << " ranges" << (chunked ? " (16-row chunks)" : ""));
          ExpectBitsEqual(RunAmx(m.w, xq, n, ldy, parts, chunked), want, ldy, s.rows, n, 0, s.rows, "amx vs ref");
          if (HasFatalFailure()) return;
        }
      }
    }
  }
}

// A few rows and columns that are not multiples of the tile sizes, larger K.
TEST(AmxConformance, EdgeShapes) {
  if (AmxMissing()) GTEST_SKIP() << "AMX-INT8 is not available on this CPU/OS";
  std::mt19937 rng(7);
  struct S {
    int64_t rows, cols;
    int n;
  };
  for (const S& s : {S{1, 256, 16}, S{15, 768, 17}, S{17, 2560, 33}, S{130, 512, 48}, S{161, 1536, 20},
                     S{200, 256, 129}}) {
    for (TypeId type : AmxTypes()) for (bool raw : {false, true}) {
      SCOPED_TRACE(::testing::Message() << TypeName(type) << " " << s.rows << "x" << s.cols << " tokens " << s.n
                                        << (raw ? " raw codes" : ""));
      Matrix m;
      MakeMatrix(type, s.rows, s.cols, raw, &rng, &m);
      const std::vector<uint8_t> xq = MakeActivations(s.cols, s.n, true, &rng);
      const int64_t ldy = s.rows + 5;
      std::vector<float> want(static_cast<size_t>(ldy * s.n), Nan());
      GemmRef(m.w_plain, xq.data(), ActivationBytes(TypeId::kTQ2_0, s.cols), s.n, want.data(), ldy, 0, s.rows, 0.75f);
      for (int parts : {1, 3}) {
        ExpectBitsEqual(RunAmx(m.w, xq, s.n, ldy, parts, false), want, ldy, s.rows, s.n, 0, s.rows, "amx vs ref");
        if (HasFatalFailure()) return;
      }
    }
  }
}

// BitNet b1.58 2B projection shapes at prefill token counts: every output against the AVX-512 x16
// kernel (itself bit-exact to the reference, kernel_conformance_test), and sampled row ranges
// (first, middle, last, off 16-row boundaries) against GemmRef itself (scalar: all rows would take
// minutes here).
TEST(AmxConformance, RealShapes) {
  if (AmxMissing()) GTEST_SKIP() << "AMX-INT8 is not available on this CPU/OS";
  std::mt19937 rng(2024);
  struct S {
    int64_t rows, cols;
  };
  for (TypeId type : AmxTypes()) for (const S& s : {S{2560, 2560}, S{640, 2560}, S{6912, 2560}, S{2560, 6912}}) {
    Matrix m;
    MakeMatrix(type, s.rows, s.cols, false, &rng, &m);
    for (int n : {16, 64, 70, 128}) {
      SCOPED_TRACE(::testing::Message() << TypeName(type) << " " << s.rows << "x" << s.cols << " tokens " << n);
      const std::vector<uint8_t> xq = MakeActivations(s.cols, n, true, &rng);
      const size_t act = ActivationBytes(TypeId::kTQ2_0, s.cols);
      const int64_t ldy = s.rows + 1;
      const std::vector<float> got = RunAmx(m.w, xq, n, ldy, 2, true);
      std::vector<float> avx(static_cast<size_t>(ldy * n), Nan());
      GetKernelTable(Isa::kAvx512).tq2_int8dot(m.w, xq.data(), act, n, avx.data(), ldy, 0, s.rows, 0.75f);
      ExpectBitsEqual(got, avx, ldy, s.rows, n, 0, s.rows, "amx vs avx512 x16");
      if (HasFatalFailure()) return;
      const int64_t ranges[3][2] = {{0, 40}, {s.rows / 2 - 9, s.rows / 2 + 23}, {s.rows - 37, s.rows}};
      for (const auto& rr : ranges) {
        std::vector<float> want(static_cast<size_t>(ldy * n), Nan());
        GemmRef(m.w_plain, xq.data(), act, n, want.data(), ldy, rr[0], rr[1], 0.75f);
        ExpectBitsEqual(got, want, ldy, s.rows, n, rr[0], rr[1], "amx vs ref");
        if (HasFatalFailure()) return;
      }
    }
  }
}

// Plain (non-interleaved) rows, as streamed layers deliver them, go to the AVX-512 kernel. No tile
// instruction runs on that path, so it is checked wherever AVX-512 is, AMX or not.
TEST(AmxConformance, PlainRowsFallBack) {
  if (!IsaSupported(Isa::kAvx512)) GTEST_SKIP() << "no AVX-512 here: the fallback is the AVX-512 kernel";
  std::mt19937 rng(5);
  Matrix m;
  MakeMatrix(TypeId::kTQ2_0, 40, 512, false, &rng, &m);
  const int n = 32;
  const std::vector<uint8_t> xq = MakeActivations(512, n, false, &rng);
  const int64_t ldy = 41;
  std::vector<float> want(static_cast<size_t>(ldy * n), Nan());
  GemmRef(m.w_plain, xq.data(), ActivationBytes(TypeId::kTQ2_0, 512), n, want.data(), ldy, 0, 40, 0.75f);
  ExpectBitsEqual(RunAmx(m.w_plain, xq, n, ldy, 2, false), want, ldy, 40, n, 0, 40, "plain rows");
}

}  // namespace
}  // namespace trine::kernels
