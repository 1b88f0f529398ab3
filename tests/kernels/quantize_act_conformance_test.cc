// Activation quantizers (KernelTable::quantize_q8_K / quantize_q8_0 / quantize_f16) against the
// scalar references, byte for byte: random rows of several lengths and scales, edge patterns
// (zero blocks, the largest |x| twice with opposite signs, denormals, huge values, +-inf, NaNs with
// payloads, exact halves, random bit patterns), and block sub-ranges quantized on their own as
// ops::MatMulShared's threads do. Instantiated for the ISA levels this CPU runs that have the
// entry; the NEON versions are checked under qemu by tests/neon (the same inputs).
#include <gtest/gtest.h>

#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "kernel_test_util.h"
#include "kernels.h"
#include "quantize_act_cases.h"
#include "tensor/dtype.h"

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
