// The fp16-cache attention kernels of every ISA this CPU has give the reference's bits, over head
// sizes with and without a 64-element body and cache lengths from 1 to a few hundred.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/fp16.h"
#include "tensor/blocks.h"
#include "tensor/quantize_ref.h"
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

// ---- Quantized KV rows (Q8_0 / Q4_0, and mixes with F16) -----------------------------------

const char* RowName(KvRowType t) {
  return t == KvRowType::kQ8_0 ? "q8_0" : t == KvRowType::kQ4_0 ? "q4_0" : "f16";
}

// n_kv positions of rows of `heads` heads of hd values; the head under test is the second one.
struct KvRows {
  KvRowType type;
  int hd, heads;
  size_t stride;
  std::vector<uint8_t> bytes;
  std::vector<float> values;  // dequantized, (n_kv, hd) of the head under test

  KvRows(KvRowType t, int head_dim, int n_kv, float spread, std::mt19937* rng) : type(t), hd(head_dim), heads(3) {
    std::normal_distribution<float> nd(0.0f, spread);
    const int row = hd * heads;
    stride = KvRowBytes(t, row);
    bytes.assign(stride * static_cast<size_t>(n_kv) + 64, 0xCD);  // slack after the last row
    std::vector<float> x(static_cast<size_t>(row));
    for (int p = 0; p < n_kv; ++p) {
      for (float& f : x) f = nd(*rng);
      uint8_t* dst = bytes.data() + static_cast<size_t>(p) * stride;
      if (t == KvRowType::kQ8_0) {
        QuantizeRowQ8_0(x.data(), dst, row);
      } else if (t == KvRowType::kQ4_0) {
        QuantizeRowQ4_0(x.data(), dst, row);
      } else {
        for (int i = 0; i < row; ++i) reinterpret_cast<uint16_t*>(dst)[i] = Fp32ToFp16(x[static_cast<size_t>(i)]);
      }
    }
  }
  KvHead Head() const {
    KvHead h;
    h.type = type;
    h.data = bytes.data() + KvRowBytes(type, hd);  // the second head
    h.stride = stride;
    return h;
  }
};

const KvRowType kRowTypes[] = {KvRowType::kF16, KvRowType::kQ8_0, KvRowType::kQ4_0};

TEST(AttentionQuant, EveryIsaMatchesReferenceBitForBit) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (Isa isa : {Isa::kRef, Isa::kAvx2, Isa::kAvx512, Isa::kNeon}) {
    if (!IsaSupported(isa)) continue;
    const AttnFn fn = SelectAttn(isa);
    for (KvRowType kt : kRowTypes) {
      for (KvRowType vt : kRowTypes) {
        for (int hd : {32, 64, 96, 128, 256}) {
          for (int n_kv : {1, 2, 3, 17, 64, 257}) {  // ragged lengths
            SCOPED_TRACE(::testing::Message() << IsaName(isa) << " K " << RowName(kt) << " V " << RowName(vt)
                                              << " hd " << hd << " n_kv " << n_kv);
            const KvRows k(kt, hd, n_kv, 2.0f, &rng), v(vt, hd, n_kv, 1.0f, &rng);
            std::vector<float> q(static_cast<size_t>(hd));
            for (auto& x : q) x = nd(rng);
            const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
            std::vector<float> want(static_cast<size_t>(hd) + 1, NAN), got(want);  // NaN-poisoned
            AttnRef(q.data(), k.Head(), v.Head(), n_kv, hd, scale, want.data());
            fn(q.data(), k.Head(), v.Head(), n_kv, hd, scale, got.data());
            for (int i = 0; i < hd; ++i) {
              ASSERT_FALSE(std::isnan(want[static_cast<size_t>(i)])) << "reference element " << i;
              ASSERT_FALSE(std::isnan(got[static_cast<size_t>(i)])) << "element " << i;
              ASSERT_EQ(got[static_cast<size_t>(i)], want[static_cast<size_t>(i)]) << "element " << i;
            }
            EXPECT_TRUE(std::isnan(got[static_cast<size_t>(hd)])) << "wrote past head_dim";
          }
        }
      }
    }
  }
}

// The grouped kernel (GQA: n_q query heads over one KV head) against the reference per head, for
// every group size up to 4 (the widths it walks together and the per-head fallback beyond), the
// head sizes it groups and one it does not, F16 and quantized rows, ragged cache lengths.
TEST(AttentionGroup, EveryHeadMatchesReferenceBitForBit) {
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  int grouped_cases = 0;
  for (Isa isa : {Isa::kRef, Isa::kAvx2, Isa::kAvx512, Isa::kNeon}) {
    if (!IsaSupported(isa)) continue;
    const AttnGroupFn fn = SelectAttnGroup(isa);
    if (fn == nullptr) {
      for (int hd : {64, 128}) {
        EXPECT_EQ(AttnGroupWidth(isa, KvRowType::kF16, KvRowType::kF16, hd), 1) << IsaName(isa);
      }
      continue;
    }
    for (KvRowType t : {KvRowType::kF16, KvRowType::kQ8_0}) {
      for (int hd : {64, 128, 96}) {
        const int width = AttnGroupWidth(isa, t, t, hd);
        ASSERT_GE(width, 1);
        ASSERT_LE(width, 4);
        for (int n_q = 1; n_q <= 4; ++n_q) {
          for (int n_kv : {1, 15, 16, 17, 70}) {
            SCOPED_TRACE(::testing::Message() << IsaName(isa) << " " << RowName(t) << " hd " << hd << " n_q " << n_q
                                              << " n_kv " << n_kv);
            const KvRows k(t, hd, n_kv, 2.0f, &rng), v(t, hd, n_kv, 1.0f, &rng);
            std::vector<float> q(static_cast<size_t>(hd * n_q));
            for (auto& x : q) x = nd(rng);
            // Large scores in one head: new maxima (accumulator rescales) at varying positions.
            if (n_q > 1) q[static_cast<size_t>(hd)] = 40.0f;
            const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
            std::vector<float> want(static_cast<size_t>(hd * n_q) + 1, NAN), got(want);  // NaN-poisoned
            for (int h = 0; h < n_q; ++h) {
              AttnRef(q.data() + h * hd, k.Head(), v.Head(), n_kv, hd, scale, want.data() + h * hd);
            }
            fn(q.data(), n_q, k.Head(), v.Head(), n_kv, hd, scale, got.data());
            if (n_q > 1 && n_q <= width) ++grouped_cases;
            for (int i = 0; i < hd * n_q; ++i) {
              ASSERT_FALSE(std::isnan(got[static_cast<size_t>(i)])) << "element " << i;
              ASSERT_EQ(got[static_cast<size_t>(i)], want[static_cast<size_t>(i)]) << "element " << i;
            }
            EXPECT_TRUE(std::isnan(got[static_cast<size_t>(hd * n_q)])) << "wrote past the last head";
          }
        }
      }
    }
  }
  if (IsaSupported(Isa::kAvx512)) {
    EXPECT_GT(grouped_cases, 0) << "the grouped walk never ran";
  }
}

// The rows of `rows` scattered into pool blocks in a shuffled order (the paged KV cache's layout):
// the block table and pool, with poisoned rows in between, so a wrong address gives other bits.
struct PagedRows {
  std::vector<uint8_t> pool;
  std::vector<int32_t> blocks;
  KvHead head;

  PagedRows(const KvRows& rows, int n_kv, std::mt19937* rng) {
    const int n_blocks = (n_kv + kKvBlockPositions - 1) / kKvBlockPositions;
    const int pool_blocks = 2 * n_blocks + 1;
    std::vector<int32_t> order(static_cast<size_t>(pool_blocks));
    for (int b = 0; b < pool_blocks; ++b) order[static_cast<size_t>(b)] = b;
    std::shuffle(order.begin(), order.end(), *rng);
    blocks.assign(order.begin(), order.begin() + n_blocks);
    const size_t block_bytes = rows.stride * kKvBlockPositions;
    pool.assign(block_bytes * static_cast<size_t>(pool_blocks), 0x7B);  // fp16 0x7B7B: a large value
    for (int p = 0; p < n_kv; ++p) {
      uint8_t* dst = pool.data() + static_cast<size_t>(blocks[static_cast<size_t>(p / kKvBlockPositions)]) * block_bytes +
                     static_cast<size_t>(p % kKvBlockPositions) * rows.stride;
      std::memcpy(dst, rows.bytes.data() + static_cast<size_t>(p) * rows.stride, rows.stride);
    }
    head = rows.Head();
    head.data = pool.data() + (rows.Head().data - rows.bytes.data());
    head.blocks = blocks.data();
    head.block_bytes = block_bytes;
  }
};

// Every ISA's kernels (per head and grouped) read a paged cache as they read the same rows laid
// out contiguously: the same bits.
TEST(AttentionPaged, EveryIsaReadsBlocksAsContiguousRows) {
  std::mt19937 rng(21);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (Isa isa : {Isa::kRef, Isa::kAvx2, Isa::kAvx512, Isa::kNeon}) {
    if (!IsaSupported(isa)) continue;
    const AttnFn fn = SelectAttn(isa);
    const AttnGroupFn group = SelectAttnGroup(isa);
    for (KvRowType kt : kRowTypes) {
      for (KvRowType vt : {KvRowType::kF16, KvRowType::kQ8_0}) {
        for (int hd : {64, 128}) {
          for (int n_kv : {1, 16, 17, 50}) {
            SCOPED_TRACE(::testing::Message() << IsaName(isa) << " K " << RowName(kt) << " V " << RowName(vt)
                                              << " hd " << hd << " n_kv " << n_kv);
            const KvRows k(kt, hd, n_kv, 2.0f, &rng), v(vt, hd, n_kv, 1.0f, &rng);
            const PagedRows pk(k, n_kv, &rng), pv(v, n_kv, &rng);
            const int n_q = 2;
            std::vector<float> q(static_cast<size_t>(hd * n_q));
            for (auto& x : q) x = nd(rng);
            const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
            std::vector<float> want(static_cast<size_t>(hd * n_q), NAN), got(want), got_group(want);
            for (int h = 0; h < n_q; ++h) {
              fn(q.data() + h * hd, k.Head(), v.Head(), n_kv, hd, scale, want.data() + h * hd);
              fn(q.data() + h * hd, pk.head, pv.head, n_kv, hd, scale, got.data() + h * hd);
            }
            if (group != nullptr) group(q.data(), n_q, pk.head, pv.head, n_kv, hd, scale, got_group.data());
            for (int i = 0; i < hd * n_q; ++i) {
              ASSERT_EQ(got[static_cast<size_t>(i)], want[static_cast<size_t>(i)]) << "element " << i;
              if (group != nullptr) {
                ASSERT_EQ(got_group[static_cast<size_t>(i)], want[static_cast<size_t>(i)]) << "grouped, element " << i;
              }
            }
          }
        }
      }
    }
  }
}

TEST(AttentionQuant, F16RowsGiveTheF16KernelsBits) {
  // The generic kernel on F16/F16 is the fp16 kernel with Q rounded to fp16 first.
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (Isa isa : {Isa::kRef, Isa::kAvx512}) {
    if (!IsaSupported(isa)) continue;
    const int hd = 64, n_kv = 33;
    const KvRows k(KvRowType::kF16, hd, n_kv, 2.0f, &rng), v(KvRowType::kF16, hd, n_kv, 1.0f, &rng);
    std::vector<float> q(hd), qh(hd);
    for (int i = 0; i < hd; ++i) {
      q[static_cast<size_t>(i)] = nd(rng);
      qh[static_cast<size_t>(i)] = Fp16ToFp32(Fp32ToFp16(q[static_cast<size_t>(i)]));
    }
    std::vector<float> a(hd), b(hd);
    SelectAttn(isa)(q.data(), k.Head(), v.Head(), n_kv, hd, 0.125f, a.data());
    AttnF16Ref(qh.data(), reinterpret_cast<const uint16_t*>(k.Head().data),
               reinterpret_cast<const uint16_t*>(v.Head().data), k.stride / 2, n_kv, hd, 0.125f, b.data());
    EXPECT_EQ(a, b) << IsaName(isa);
  }
}

// Against plain fp32 attention over the dequantized cache: the quantized kernels are close to
// it (Q8_0 tighter than Q4_0), so they compute attention and not just the reference's bits.
TEST(AttentionQuant, CloseToFp32AttentionOverDequantizedRows) {
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (KvRowType t : {KvRowType::kQ8_0, KvRowType::kQ4_0}) {
    const int hd = 64, n_kv = 50;
    const KvRows k(t, hd, n_kv, 1.0f, &rng), v(t, hd, n_kv, 1.0f, &rng);
    std::vector<float> kd(static_cast<size_t>(hd) * n_kv), vd(kd.size());
    for (int p = 0; p < n_kv; ++p) {
      const uint8_t* kr = k.Head().data + static_cast<size_t>(p) * k.stride;
      const uint8_t* vr = v.Head().data + static_cast<size_t>(p) * v.stride;
      if (t == KvRowType::kQ8_0) {
        DequantizeRowQ8_0(kr, kd.data() + static_cast<size_t>(p) * hd, hd);
        DequantizeRowQ8_0(vr, vd.data() + static_cast<size_t>(p) * hd, hd);
      } else {
        DequantizeRowQ4_0(kr, kd.data() + static_cast<size_t>(p) * hd, hd);
        DequantizeRowQ4_0(vr, vd.data() + static_cast<size_t>(p) * hd, hd);
      }
    }
    std::vector<float> q(hd);
    for (auto& x : q) x = nd(rng);
    const float scale = 0.125f;
    std::vector<double> w(static_cast<size_t>(n_kv));
    double mx = -1e30, sum = 0;
    for (int p = 0; p < n_kv; ++p) {
      double s = 0;
      for (int i = 0; i < hd; ++i) s += static_cast<double>(kd[static_cast<size_t>(p) * hd + i]) * q[static_cast<size_t>(i)];
      w[static_cast<size_t>(p)] = s * scale;
      mx = std::max(mx, w[static_cast<size_t>(p)]);
    }
    for (auto& x : w) sum += (x = std::exp(x - mx));
    std::vector<float> out(hd);
    AttnRef(q.data(), k.Head(), v.Head(), n_kv, hd, scale, out.data());
    double max_err = 0;
    for (int i = 0; i < hd; ++i) {
      double o = 0;
      for (int p = 0; p < n_kv; ++p) o += w[static_cast<size_t>(p)] / sum * vd[static_cast<size_t>(p) * hd + i];
      max_err = std::max(max_err, std::fabs(o - out[static_cast<size_t>(i)]));
    }
    // Q quantized to Q8_0 is the only extra error (V is exact after dequantization).
    EXPECT_LT(max_err, t == KvRowType::kQ8_0 ? 0.01 : 0.02) << RowName(t);
  }
}

TEST(AttentionQuant, RowBytes) {
  EXPECT_EQ(KvRowBytes(KvRowType::kF16, 128), 256u);
  EXPECT_EQ(KvRowBytes(KvRowType::kQ8_0, 128), 4u * sizeof(BlockQ8_0));
  EXPECT_EQ(KvRowBytes(KvRowType::kQ4_0, 128), 4u * sizeof(BlockQ4_0));
}

}  // namespace
}  // namespace trine::kernels
