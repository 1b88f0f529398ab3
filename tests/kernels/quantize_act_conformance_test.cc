// Activation quantizers (KernelTable::quantize_q8_K / quantize_q8_0 / quantize_f16) against the
// scalar references, byte for byte: random rows of several lengths and scales, edge patterns
// (zero blocks, the largest |x| twice with opposite signs, denormals, huge values, +-inf, NaNs with
// payloads, exact halves, random bit patterns), and block sub-ranges quantized on their own as
// ops::MatMulShared's threads do. Instantiated for the ISA levels this CPU runs that have the
// entry; the NEON versions are checked under qemu by tests/neon (the same inputs).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "kernel_test_util.h"
#include "kernels.h"
#include "quantize_act_cases.h"
#include "tensor/dtype.h"
#include "tensor/quantize_ref.h"

namespace trine::kernels {
namespace {

struct Param {
  Isa isa;
  QuantActKind kind;
};

std::vector<Param> Params() {
  std::vector<Param> out;
  for (Isa isa : AvailableIsas()) {
    for (const QuantActKind& k : QuantActKinds()) {
      if (GetKernelTable(isa).*k.entry != nullptr) out.push_back({isa, k});
    }
  }
  return out;
}

void PrintTo(const Param& p, std::ostream* os) { *os << IsaName(p.isa) << " " << p.kind.name; }

class QuantizeActConformance : public ::testing::TestWithParam<Param> {};

TEST_P(QuantizeActConformance, BytesEqualReference) {
  const Param& p = GetParam();
  const QuantizeActFn fn = GetKernelTable(p.isa).*p.kind.entry;
  for (const QuantActInput& in : QuantActInputs()) {
    const std::string err = CompareQuantizer(p.kind, fn, in.x);
    EXPECT_EQ(err, "") << IsaName(p.isa) << " " << p.kind.name << ", " << in.name;
  }
}

INSTANTIATE_TEST_SUITE_P(All, QuantizeActConformance, ::testing::ValuesIn(Params()),
                         [](const ::testing::TestParamInfo<Param>& pi) {
                           return std::string(IsaName(pi.param.isa)) + "_" + pi.param.kind.name;
                         });

// KernelTable::dequantize_q6_K (head requantization) against DequantizeRowQ6_K, bit for bit:
// random blocks (every bit of ql/qh/scales random) with random finite, zero, largest and
// subnormal fp16 scales, on the ISA levels this CPU runs that have the entry.
class DequantizeQ6_KConformance : public ::testing::TestWithParam<Isa> {};

std::vector<Isa> Q6_KIsas() {
  std::vector<Isa> out;
  for (Isa isa : AvailableIsas()) {
    if (GetKernelTable(isa).dequantize_q6_K != nullptr) out.push_back(isa);
  }
  return out;
}

TEST_P(DequantizeQ6_KConformance, BitsEqualReference) {
  const DequantizeRowFn fn = GetKernelTable(GetParam()).dequantize_q6_K;
  std::mt19937 rng(11);
  for (int64_t nb : {int64_t{1}, int64_t{10}, int64_t{27}}) {
    std::vector<BlockQ6_K> blocks(static_cast<size_t>(nb));
    for (size_t i = 0; i < blocks.size(); ++i) {
      uint8_t* raw = reinterpret_cast<uint8_t*>(&blocks[i]);
      for (size_t j = 0; j < sizeof(BlockQ6_K); ++j) raw[j] = static_cast<uint8_t>(rng());
      const uint16_t ds[] = {0x0000, 0x7BFF, 0x0001, 0x8001, 0x3C00, 0xBC00};
      // Finite fp16 only (exponent < 31): the reference's NaN payloads are not a contract.
      blocks[i].d = i < 6 ? ds[i] : static_cast<uint16_t>(rng() % 0x7C00u | (rng() & 0x8000u));
    }
    const size_t n = static_cast<size_t>(nb) * kQK_K;
    std::vector<float> want(n + 16, Nan()), got(n + 16, Nan());
    DequantizeRowQ6_K(blocks.data(), want.data(), static_cast<int64_t>(n));
    fn(blocks.data(), got.data(), static_cast<int64_t>(n));
    ASSERT_EQ(std::memcmp(want.data(), got.data(), n * sizeof(float)), 0) << "nb=" << nb;
    for (size_t j = n; j < got.size(); ++j) EXPECT_TRUE(std::isnan(got[j])) << "wrote past the row at " << j;
  }
}

INSTANTIATE_TEST_SUITE_P(All, DequantizeQ6_KConformance, ::testing::ValuesIn(Q6_KIsas()),
                         [](const ::testing::TestParamInfo<Isa>& pi) { return std::string(IsaName(pi.param)); });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(DequantizeQ6_KConformance);

// QuantizeActivations (the active ISA's quantizer, as ops::MatMulShared calls it) writes the
// reference's bytes for every activation type.
TEST(QuantizeActivations, DispatchEqualsReference) {
  std::vector<float> x(6912);
  std::mt19937 rng(7);
  for (int c = 0; c < 6912 / 256; ++c) FillEdgeChunk(c % kEdgePatterns, x.data() + c * 256, 256, &rng);
  for (TypeId t : {TypeId::kTQ1_0, TypeId::kTQ2_0, TypeId::kQ4_K, TypeId::kQ6_K, TypeId::kQ4_0, TypeId::kQ8_0,
                   TypeId::kF16, TypeId::kBF16, TypeId::kI2_S, TypeId::kF32}) {
    const size_t bytes = ActivationBytes(t, 6912);
    std::vector<uint8_t> want(bytes, 0xA5), got(bytes, 0xA5);
    QuantizeActivationsRef(t, x.data(), 6912, want.data());
    QuantizeActivations(t, x.data(), 6912, got.data());
    EXPECT_EQ(got, want) << TypeName(t) << " on " << IsaName(ActiveIsa());
  }
}

}  // namespace
}  // namespace trine::kernels
