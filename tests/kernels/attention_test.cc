// The fp16-cache attention kernels of every ISA this CPU has give the reference's bits, over head
// sizes with and without a 64-element body and cache lengths from 1 to a few hundred.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/fp16.h"
#include "kernels.h"

namespace trine::kernels {
namespace {

TEST(AttentionF16, EveryIsaMatchesReferenceBitForBit) {
  std::mt19937 rng(99);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (Isa isa : {Isa::kAvx2, Isa::kAvx512, Isa::kNeon}) {
    if (!IsaSupported(isa)) continue;
    const AttnF16Fn fn = SelectAttnF16(isa);
    for (int hd : {8, 32, 64, 80, 128}) {
      for (int n_kv : {1, 2, 7, 64, 300}) {
        SCOPED_TRACE(::testing::Message() << IsaName(isa) << " hd " << hd << " n_kv " << n_kv);
        const size_t stride = static_cast<size_t>(hd) * 3;  // the head sits inside a wider KV row
        std::vector<uint16_t> k(stride * static_cast<size_t>(n_kv)), v(k.size());
        for (auto& x : k) x = Fp32ToFp16(nd(rng) * 2.0f);
        for (auto& x : v) x = Fp32ToFp16(nd(rng));
        std::vector<float> q(static_cast<size_t>(hd));
        for (auto& x : q) x = Fp16ToFp32(Fp32ToFp16(nd(rng)));
        const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
        std::vector<float> want(static_cast<size_t>(hd), NAN), got(want);
        AttnF16Ref(q.data(), k.data() + hd, v.data() + hd, stride, n_kv, hd, scale, want.data());
        fn(q.data(), k.data() + hd, v.data() + hd, stride, n_kv, hd, scale, got.data());
        for (int i = 0; i < hd; ++i) {
          ASSERT_FALSE(std::isnan(got[static_cast<size_t>(i)]));
          ASSERT_EQ(got[static_cast<size_t>(i)], want[static_cast<size_t>(i)]) << "element " << i;
        }
      }
    }
  }
}

TEST(AttentionF16, SingleKeyReturnsItsValue) {
  // One position: softmax weight 1, so the output is V rounded through fp16 accumulation.
  const int hd = 64;
  std::vector<uint16_t> k(hd), v(hd);
  std::vector<float> q(hd, 0.5f);
  for (int i = 0; i < hd; ++i) {
    k[static_cast<size_t>(i)] = Fp32ToFp16(0.1f * static_cast<float>(i));
    v[static_cast<size_t>(i)] = Fp32ToFp16(static_cast<float>(i) - 10.0f);
  }
  std::vector<float> out(hd);
  AttnF16Ref(q.data(), k.data(), v.data(), hd, 1, hd, 0.125f, out.data());
  for (int i = 0; i < hd; ++i) EXPECT_EQ(out[static_cast<size_t>(i)], static_cast<float>(i) - 10.0f);
}

}  // namespace
}  // namespace trine::kernels
