// The element-wise kernels of the forward pass written once with xsimd (Debian's libxsimd-dev 8.1)
// and instantiated per ISA by the translation unit that includes this header with its own flags:
// kernels/x86/avx2/elementwise_avx2.cc (xsimd::fma3<xsimd::avx2>), kernels/x86/avx512/
// elementwise_avx512.cc (xsimd::avx512f), kernels/arm/neon/elementwise_neon.cc (xsimd::neon64).
//
// Every kernel equals its scalar form (kernels/ref/elementwise_ref.cc) bit for bit: each lane goes
// through the scalar code's operations in its order, fused multiply-adds exactly where the scalar
// code calls std::fma, and no approximate instruction (reciprocal, rsqrt, xsimd's exp) anywhere.
// Three of xsimd 8.1's operations do not round as the scalar code on some ISA, so these kernels
// call small wrappers instead (Fma, Div, Neg below, each with the ISA it fixes).
// tests/kernels/elementwise_test.cc compares the bits on every ISA the machine has (it fails if any
// of the three wrappers is undone), tests/neon the NEON instance under qemu.
#pragma once

#include <xsimd/xsimd.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif
#if defined(__aarch64__)
#include <arm_neon.h>
#endif

#include "kernels.h"

namespace trine::kernels::simd {

// a * b + c rounded once. xsimd 8.1 has fma kernels for fma3<sse/avx/avx2>, fma4 and NEON but none
// for avx512f: there xsimd::fma is its generic `x * y + z`, two roundings. AVX-512 calls the
// instruction itself.
template <class A>
inline xsimd::batch<float, A> Fma(const xsimd::batch<float, A>& a, const xsimd::batch<float, A>& b,
                                  const xsimd::batch<float, A>& c) {
#if defined(__AVX512F__)
  if constexpr (std::is_base_of_v<xsimd::avx512f, A>) {
    return _mm512_fmadd_ps(a, b, c);
  } else {
    return xsimd::fma(a, b, c);
  }
#else
  return xsimd::fma(a, b, c);
#endif
}

// a / b correctly rounded. xsimd 8.1's float division on neon64 is its 32-bit NEON one: a
// reciprocal estimate and two Newton steps, within an ulp or so but not the IEEE quotient (it
// moved SwiGLU's outputs by an ulp under qemu); AArch64 has the instruction (fdiv).
template <class A>
inline xsimd::batch<float, A> Div(const xsimd::batch<float, A>& a, const xsimd::batch<float, A>& b) {
#if defined(__aarch64__)
  if constexpr (std::is_base_of_v<xsimd::neon64, A>) {
    return vdivq_f32(a, b);
  } else {
    return a / b;
  }
#else
  return a / b;
#endif
}

// -x as the scalar code's negation: the sign bit flipped. xsimd 8.1's unary minus on x86 is 0 - x,
// which gives +0 for x = +0 where the scalar -x is -0 (RoPE's -(b * sn) then rounds a zero sum
// to the other sign).
template <class A>
inline xsimd::batch<float, A> Neg(const xsimd::batch<float, A>& x) {
  return x ^ xsimd::batch<float, A>(-0.0f);
}

// ldexp(j, n) for j in [0.7, 1.5) and integral n in [-192, 192], correctly rounded as std::ldexp
// (subnormal results included); other lanes give unspecified values. AVX-512 has it as one
// instruction (vscalefps), which xsimd 8.1 does not expose. Elsewhere two exact-power
// multiplications: n = n1 + n2 with n1 = n >> 1, both in [-96, 96], so 2^n1 and 2^n2 are normal
// floats and j * 2^n1 is exact; the second product rounds once.
template <class A>
inline xsimd::batch<float, A> Ldexp(const xsimd::batch<float, A>& j, const xsimd::batch<float, A>& n) {
#if defined(__AVX512F__)
  if constexpr (std::is_base_of_v<xsimd::avx512f, A>) return _mm512_scalef_ps(j, n);
#endif
  using B = xsimd::batch<float, A>;
  using I = xsimd::batch<int32_t, A>;
  const I bias(127);
  const I ni = xsimd::to_int(n);
  const I n1 = ni >> 1;
  return (j * xsimd::bitwise_cast<B>((n1 + bias) << 23)) * xsimd::bitwise_cast<B>((ni - n1 + bias) << 23);
}

// SwiGLU's vector part for n a multiple of 16 (ops::SwiGluRange): out = g / (1 + ExpfPoly(-g)) * u
// with ExpfPoly's operation sequence (kernels/ref/elementwise_ref.cc). Lanes with |n| > 192 take
// ExpfPoly's 0 / +inf; a NaN lane carries j's NaN through.
template <class A>
void SwiGluVec(const float* gate, const float* up, float* out, int64_t n) {
  using B = xsimd::batch<float, A>;
  const B shift(0x1.8p23f), log2e(0x1.715476p+0f), ln2_hi(0x1.62e4p-1f), ln2_lo(0x1.7f7d1cp-20f);
  const B c5(0x1.0e4020p-7f), c4(0x1.573e2ep-5f), c3(0x1.555e66p-3f), c2(0x1.fffdb6p-2f), c1(0x1.ffffecp-1f);
  const B one(1.0f), zero(0.0f), inf(INFINITY), limit(192.0f);
  constexpr int64_t kW = static_cast<int64_t>(B::size);
  for (int64_t i = 0; i + kW <= n; i += kW) {
    const B g = B::load_unaligned(gate + i);
    const B x = Neg(g);
    const B nn = Fma(x, log2e, shift) - shift;
    const B neg_n = Neg(nn);
    const B b = Fma(neg_n, ln2_lo, Fma(neg_n, ln2_hi, x));
    const B u = b * b;
    const B j = Fma(Fma(Fma(c5, b, c4), u, Fma(c3, b, c2)), u, Fma(c1, b, one));
    B e = Ldexp(j, nn);
    e = xsimd::select(xsimd::abs(nn) > limit, xsimd::select(nn <= zero, zero, inf), e);
    const B o = Div(g, one + e) * B::load_unaligned(up + i);
    o.store_unaligned(out + i);
  }
}

// ops::RmsScale: 1 / sqrt(mean(x^2) + eps) with each fp32 square summed in double, element i into
// partial sum i % 8, the partial sums added in a fixed tree. Each step squares kC floats in fp32
// and adds them to the 8 partial sums (held as 8 / D::size double vectors) in element order, as
// the scalar loop does.
template <class A>
float RmsScale(const float* x, int64_t dim, float eps) {
  using B = xsimd::batch<float, A>;
  using D = xsimd::batch<double, A>;
  constexpr size_t kF = B::size, kD = D::size;
  constexpr size_t kC = kF >= 8 ? kF : 8;  // floats per step: whole vectors and whole groups of 8
  constexpr size_t kND = 8 / kD;
  static_assert(kC % 8 == 0 && kC % kF == 0 && 8 % kD == 0, "vector widths");
  D s[kND];
  for (size_t d = 0; d < kND; ++d) s[d] = D(0.0);
  alignas(64) float sq[kC];
  int64_t i = 0;
  for (; i + static_cast<int64_t>(kC) <= dim; i += static_cast<int64_t>(kC)) {
    for (size_t c = 0; c < kC; c += kF) {
      const B v = B::load_unaligned(x + i + c);
      (v * v).store_aligned(sq + c);
    }
    for (size_t g = 0; g < kC; g += 8) {
      for (size_t d = 0; d < kND; ++d) s[d] += D::load_aligned(sq + g + d * kD);
    }
  }
  alignas(64) double p[8];
  for (size_t d = 0; d < kND; ++d) s[d].store_aligned(p + d * kD);
  for (; i + 8 <= dim; i += 8) {
    for (int j = 0; j < 8; ++j) p[j] += static_cast<double>(x[i + j] * x[i + j]);
  }
  for (int j = 0; i < dim; ++i, ++j) p[j] += static_cast<double>(x[i] * x[i]);
  const double sum = ((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]));
  const float mean = static_cast<float>(sum / static_cast<double>(dim));
  return 1.0f / std::sqrt(mean + eps);
}

// out[k] = x[k] * scale * w[k] (RMSNorm's second pass; left to right, as the scalar loop).
template <class A>
void ScaleMul(const float* x, float scale, const float* w, float* out, int64_t n) {
  using B = xsimd::batch<float, A>;
  constexpr int64_t kW = static_cast<int64_t>(B::size);
  const B vs(scale);
  int64_t k = 0;
  for (; k + kW <= n; k += kW) {
    (B::load_unaligned(x + k) * vs * B::load_unaligned(w + k)).store_unaligned(out + k);
  }
  for (; k < n; ++k) out[k] = x[k] * scale * w[k];
}

// out = relu(gate)^2 * up: gate > 0 ? gate : +0 (NaN gives 0, as the scalar comparison), squared,
// times up.
template <class A>
void ReluSqrGlu(const float* gate, const float* up, float* out, int64_t n) {
  using B = xsimd::batch<float, A>;
  constexpr int64_t kW = static_cast<int64_t>(B::size);
  const B zero(0.0f);
  int64_t i = 0;
  for (; i + kW <= n; i += kW) {
    const B g0 = B::load_unaligned(gate + i);
    const B g = xsimd::select(g0 > zero, g0, zero);
    (g * g * B::load_unaligned(up + i)).store_unaligned(out + i);
  }
  for (; i < n; ++i) {
    const float g = gate[i] > 0.0f ? gate[i] : 0.0f;
    out[i] = g * g * up[i];
  }
}

// RoPE, neox mode (ops::RotatePairs): the pairs (v[i], v[i + half]) of each head rotated by
// (cs[i], sn[i]): v[i] = fma(a, cs, -(b * sn)), v[i + half] = fma(a, sn, b * cs).
template <class A>
void RopeNeox(float* x, int n_heads, int head_dim, int half, const float* cs, const float* sn) {
  using B = xsimd::batch<float, A>;
  constexpr int kW = static_cast<int>(B::size);
  for (int h = 0; h < n_heads; ++h) {
    float* v = x + static_cast<int64_t>(h) * head_dim;
    int i = 0;
    for (; i + kW <= half; i += kW) {
      const B a = B::load_unaligned(v + i), b = B::load_unaligned(v + i + half);
      const B c = B::load_unaligned(cs + i), s = B::load_unaligned(sn + i);
      Fma(a, c, Neg(b * s)).store_unaligned(v + i);
      Fma(a, s, b * c).store_unaligned(v + i + half);
    }
    for (; i < half; ++i) {
      const float a = v[i], b = v[i + half];
      v[i] = std::fma(a, cs[i], -(b * sn[i]));
      v[i + half] = std::fma(a, sn[i], b * cs[i]);
    }
  }
}

struct EvenOfPair {
  static constexpr uint32_t get(size_t i, size_t) { return static_cast<uint32_t>(i & ~size_t{1}); }
};
struct OddOfPair {
  static constexpr uint32_t get(size_t i, size_t) { return static_cast<uint32_t>(i | size_t{1}); }
};

// RoPE, normal mode (ops::RotatePairs): adjacent pairs (v[2i], v[2i + 1]). Lane k of a vector takes
// a = v[k & ~1], b = v[k | 1] (two lane shuffles) and computes fma(a, m1[k], (b * m2[k]) ^ sign_k)
// where m1 = (cs[i], sn[i]) and m2 = (sn[i], cs[i]) interleaved per pair (ops::Rope fills them) and
// sign_k negates the even lanes: v[2i] = fma(a, cs, -(b * sn)), v[2i + 1] = fma(a, sn, b * cs).
template <class A>
void RopePairs(float* x, int n_heads, int head_dim, int half, const float* m1, const float* m2) {
  using B = xsimd::batch<float, A>;
  using U = xsimd::batch<uint32_t, A>;
  constexpr int kW = static_cast<int>(B::size);
  const auto even = xsimd::make_batch_constant<U, EvenOfPair>();
  const auto odd = xsimd::make_batch_constant<U, OddOfPair>();
  alignas(64) float sign_bits[kW];
  for (int k = 0; k < kW; ++k) sign_bits[k] = k % 2 == 0 ? -0.0f : 0.0f;
  const B sign = B::load_aligned(sign_bits);
  const int n = 2 * half;
  for (int h = 0; h < n_heads; ++h) {
    float* v = x + static_cast<int64_t>(h) * head_dim;
    int k = 0;
    for (; k + kW <= n; k += kW) {
      const U raw = xsimd::bitwise_cast<U>(B::load_unaligned(v + k));
      const B a = xsimd::bitwise_cast<B>(xsimd::swizzle(raw, even));
      const B b = xsimd::bitwise_cast<B>(xsimd::swizzle(raw, odd));
      Fma(a, B::load_unaligned(m1 + k), (b * B::load_unaligned(m2 + k)) ^ sign).store_unaligned(v + k);
    }
    for (; k < n; k += 2) {
      const float a = v[k], b = v[k + 1];
      v[k] = std::fma(a, m1[k], -(b * m2[k]));
      v[k + 1] = std::fma(a, m1[k + 1], b * m2[k + 1]);
    }
  }
}

// The table of one ISA: `ElementwiseKernels kElementwiseAvx2 = simd::Table<xsimd::fma3<xsimd::avx2>>();`
template <class A>
constexpr ElementwiseKernels Table() {
  ElementwiseKernels t;
  t.swiglu = SwiGluVec<A>;
  t.rms_scale = RmsScale<A>;
  t.scale_mul = ScaleMul<A>;
  t.relu_sqr_glu = ReluSqrGlu<A>;
  t.rope_neox = RopeNeox<A>;
  t.rope_pairs = RopePairs<A>;
  return t;
}

}  // namespace trine::kernels::simd
