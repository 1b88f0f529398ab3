// Scalar reference dot products per weight format (see matmul_ref.h for the numerics contract).
#include "ref/matmul_ref.h"

#include <cmath>
#include <cstddef>
#include <cstring>
#include <vector>

#include "core/fp16.h"
#include "tensor/blocks.h"
#include "tensor/quantize_ref.h"
#include "kernels.h"
#include "x86/tq1_x16.h"

namespace trine::kernels {
namespace {

// int8 activations of a whole row, bitnet.cpp style: q = round(x * 127 / max|x|).
struct I8RowHeader {
  float inv_scale;  // 1 / act_scale, so x ~ q * inv_scale
  int32_t sum;      // sum of q, for the (c - 1) code offset
};

}  // namespace

// Q8_0 activations as llama.cpp's AVX quantize_row_q8_0: id = 127/amax (not 1/fp16(d)),
// round half to even. An out-of-range value (NaN or inf times id) converts as TruncToInt8 says;
// the vector versions reproduce it.
void QuantizeRowQ8_0Act(const float* x, void* dst, int64_t n) {
  BlockQ8_0* b = static_cast<BlockQ8_0*>(dst);
  for (int64_t i = 0; i < n / kQK8_0; ++i) {
    const float* xb = x + i * kQK8_0;
    float amax = 0.0f;
    for (int j = 0; j < kQK8_0; ++j) amax = std::fmax(amax, std::fabs(xb[j]));
    const float d = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    b[i].d = Fp32ToFp16(d);
    for (int j = 0; j < kQK8_0; ++j) b[i].qs[j] = TruncToInt8(std::nearbyintf(xb[j] * id));
  }
}

namespace {

float DotTQ2_0(const BlockTQ2_0* w, const BlockQ8_K* a, int64_t nb) {
  float acc = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    int32_t sumi = 0;
    for (int h = 0; h < 2; ++h) {
      for (int s = 0; s < 4; ++s) {
        for (int m = 0; m < 32; ++m) {
          const int c = (w[i].qs[32 * h + m] >> (2 * s)) & 3;
          sumi += c * a[i].qs[128 * h + 32 * s + m];
        }
      }
    }
    for (int j = 0; j < 16; ++j) sumi -= a[i].bsums[j];
    acc += static_cast<float>(sumi) * (Fp16ToFp32(w[i].d) * a[i].d);
  }
  return acc;
}

float DotTQ1_0(const BlockTQ1_0* w, const BlockQ8_K* a, int64_t nb) {
  static const uint8_t kPow3[5] = {1, 3, 9, 27, 81};
  float acc = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    int32_t sumi = 0;
    auto trit = [](uint8_t q, uint8_t p) {
      const uint8_t v = static_cast<uint8_t>(q * p);
      return static_cast<int>((static_cast<uint16_t>(v) * 3) >> 8);
    };
    for (int t = 0; t < 5; ++t) {
      for (int m = 0; m < 32; ++m) sumi += trit(w[i].qs[m], kPow3[t]) * a[i].qs[m + 32 * t];
      for (int m = 0; m < 16; ++m) sumi += trit(w[i].qs[32 + m], kPow3[t]) * a[i].qs[160 + m + 16 * t];
    }
    for (int t = 0; t < 4; ++t) {
      for (int j = 0; j < 4; ++j) sumi += trit(w[i].qh[j], kPow3[t]) * a[i].qs[240 + j + 4 * t];
    }
    for (int j = 0; j < 16; ++j) sumi -= a[i].bsums[j];
    acc += static_cast<float>(sumi) * (Fp16ToFp32(w[i].d) * a[i].d);
  }
  return acc;
}

float DotQ4_K(const BlockQ4_K* w, const BlockQ8_K* a, int64_t nb) {
  float acc = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    const uint8_t* s = w[i].scales;
    int32_t sumi = 0, summ = 0;
    for (int g = 0; g < 8; ++g) {
      int sc, m;
      if (g < 4) {
        sc = s[g] & 63;
        m = s[g + 4] & 63;
      } else {
        sc = (s[g + 4] & 0xF) | ((s[g - 4] >> 6) << 4);
        m = (s[g + 4] >> 4) | ((s[g] >> 6) << 4);
      }
      const uint8_t* q = w[i].qs + 32 * (g / 2);
      int32_t dot = 0;
      for (int l = 0; l < 32; ++l) {
        const int nib = (g % 2 == 0) ? (q[l] & 0xF) : (q[l] >> 4);
        dot += nib * a[i].qs[32 * g + l];
      }
      sumi += sc * dot;
      summ += m * (a[i].bsums[2 * g] + a[i].bsums[2 * g + 1]);
    }
    const float d = Fp16ToFp32(w[i].d) * a[i].d;
    const float dmin = Fp16ToFp32(w[i].dmin) * a[i].d;
    acc += d * static_cast<float>(sumi) - dmin * static_cast<float>(summ);
  }
  return acc;
}

float DotQ6_K(const BlockQ6_K* w, const BlockQ8_K* a, int64_t nb) {
  float acc = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    int32_t sumi = 0;
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = w[i].ql + 64 * h;
      const uint8_t* qh = w[i].qh + 32 * h;
      const int8_t* sc = w[i].scales + 8 * h;
      const int8_t* q8 = a[i].qs + 128 * h;
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = static_cast<int>((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = static_cast<int>((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = static_cast<int>((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = static_cast<int>((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        sumi += sc[is + 0] * q1 * q8[l] + sc[is + 2] * q2 * q8[l + 32] + sc[is + 4] * q3 * q8[l + 64] +
                sc[is + 6] * q4 * q8[l + 96];
      }
    }
    acc += Fp16ToFp32(w[i].d) * a[i].d * static_cast<float>(sumi);
  }
  return acc;
}

float DotQ4_0(const BlockQ4_0* w, const BlockQ8_0* a, int64_t nb) {
  float acc = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    int32_t sumi = 0;
    for (int j = 0; j < kQK4_0 / 2; ++j) {
      sumi += ((w[i].qs[j] & 0xF) - 8) * a[i].qs[j] + ((w[i].qs[j] >> 4) - 8) * a[i].qs[j + 16];
    }
    acc += static_cast<float>(sumi) * (Fp16ToFp32(w[i].d) * Fp16ToFp32(a[i].d));
  }
  return acc;
}

float DotQ8_0(const BlockQ8_0* w, const BlockQ8_0* a, int64_t nb) {
  float acc = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    int32_t sumi = 0;
    for (int j = 0; j < kQK8_0; ++j) sumi += w[i].qs[j] * a[i].qs[j];
    acc += static_cast<float>(sumi) * (Fp16ToFp32(w[i].d) * Fp16ToFp32(a[i].d));
  }
  return acc;
}

float DotI2S(const uint8_t* w, const int8_t* q, const I8RowHeader& h, int64_t n, float scale) {
  int64_t sumi = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int j = static_cast<int>(i % kQKI2S);
    const int c = (w[(i / kQKI2S) * 32 + (j % 32)] >> (6 - 2 * (j / 32))) & 3;
    sumi += (c == 3 ? 1 : c) * q[i];
  }
  return static_cast<float>(sumi - h.sum) * h.inv_scale * scale;
}

}  // namespace

size_t ActivationBytes(TypeId t, int64_t cols) {
  const size_t n = static_cast<size_t>(cols);
  switch (t) {
    case TypeId::kTQ1_0:
    case TypeId::kTQ2_0:
    case TypeId::kQ4_K:
    case TypeId::kQ6_K:
      return n / kQK_K * sizeof(BlockQ8_K);
    case TypeId::kQ4_0:
    case TypeId::kQ8_0:
      return n / kQK8_0 * sizeof(BlockQ8_0);
    case TypeId::kF16:
    case TypeId::kBF16:
      return n * 2;
    case TypeId::kI2_S:
      return sizeof(I8RowHeader) + n;
    default:
      return n * 4;
  }
}

int64_t ActivationBlockElems(const WeightView& w) {
  if (w.f32_activations) return 0;
  switch (w.type) {
    case TypeId::kTQ1_0:
    case TypeId::kTQ2_0:
    case TypeId::kQ4_K:
    case TypeId::kQ6_K:
      return kQK_K;
    case TypeId::kQ4_0:
    case TypeId::kQ8_0:
      return kQK8_0;
    default:
      return 0;
  }
}

void QuantizeActivations(TypeId t, const float* x, int64_t cols, void* dst) {
  // The active ISA's quantizers, chosen once (null entries fall back to the reference).
  struct Quantizers {
    QuantizeActFn q8_K, q8_0, f16;
  };
  static const Quantizers q = [] {
    const KernelTable& k = GetKernelTable(ActiveIsa());
    return Quantizers{k.quantize_q8_K ? k.quantize_q8_K : QuantizeRowQ8_K,
                      k.quantize_q8_0 ? k.quantize_q8_0 : QuantizeRowQ8_0Act,
                      k.quantize_f16 ? k.quantize_f16 : QuantizeRowF16};
  }();
  switch (t) {
    case TypeId::kTQ1_0:
    case TypeId::kTQ2_0:
    case TypeId::kQ4_K:
    case TypeId::kQ6_K:
      q.q8_K(x, dst, cols);
      return;
    case TypeId::kQ4_0:
    case TypeId::kQ8_0:
      q.q8_0(x, dst, cols);
      return;
    case TypeId::kF16:
      q.f16(x, dst, cols);
      return;
    default:
      QuantizeActivationsRef(t, x, cols, dst);
      return;
  }
}

void QuantizeActivationsRef(TypeId t, const float* x, int64_t cols, void* dst) {
  switch (t) {
    case TypeId::kTQ1_0:
    case TypeId::kTQ2_0:
    case TypeId::kQ4_K:
    case TypeId::kQ6_K:
      QuantizeRowQ8_K(x, dst, cols);
      return;
    case TypeId::kQ4_0:
    case TypeId::kQ8_0:
      QuantizeRowQ8_0Act(x, dst, cols);
      return;
    case TypeId::kF16:
      QuantizeRowF16(x, dst, cols);
      return;
    case TypeId::kBF16:
      QuantizeRowBF16(x, dst, cols);
      return;
    case TypeId::kI2_S: {
      float amax = 0.0f;
      for (int64_t i = 0; i < cols; ++i) amax = std::fmax(amax, std::fabs(x[i]));
      const float act_scale = 127.0f / std::fmax(amax, 1e-5f);
      I8RowHeader h{1.0f / act_scale, 0};
      int8_t* q = reinterpret_cast<int8_t*>(static_cast<uint8_t*>(dst) + sizeof(I8RowHeader));
      for (int64_t i = 0; i < cols; ++i) {
        float v = std::nearbyintf(x[i] * act_scale);
        v = std::fmin(127.0f, std::fmax(-128.0f, v));
        q[i] = static_cast<int8_t>(v);
        h.sum += q[i];
      }
      std::memcpy(dst, &h, sizeof(h));
      return;
    }
    default:
      std::memcpy(dst, x, static_cast<size_t>(cols) * 4);
      return;
  }
}

X16Format X16FormatOf(TypeId type) {
  if (type == TypeId::kQ4_0) return {sizeof(BlockQ4_0), 0, 2, kQK4_0 / 2};
  if (type == TypeId::kTQ1_0) return {sizeof(BlockTQ1_0), offsetof(BlockTQ1_0, d), 0, sizeof(BlockTQ1_0) - 2};
  if (type == TypeId::kQ6_K) return {sizeof(BlockQ6_K), offsetof(BlockQ6_K, d), 0, sizeof(BlockQ6_K) - 2};
  // Q4_K: the whole block as lines (d and dmin in line 0); the scale line repeats d.
  if (type == TypeId::kQ4_K) return {sizeof(BlockQ4_K), offsetof(BlockQ4_K, d), 0, sizeof(BlockQ4_K)};
  return {sizeof(BlockTQ2_0), offsetof(BlockTQ2_0, d), 0, kQK_K / 4};  // TQ2_0
}

int64_t X16BlockElems(TypeId type) {
  if (type == TypeId::kTQ2_0 || type == TypeId::kTQ1_0 || type == TypeId::kQ4_K || type == TypeId::kQ6_K) return kQK_K;
  if (type == TypeId::kQ4_0) return kQK4_0;
  return 0;
}

const uint8_t* RowData(const WeightView& w, int64_t r, uint8_t* scratch) {
  if (w.interleave == kInterleaveLut) {
    const int64_t nb = w.cols / kQK_K;
    const uint8_t* g = w.data + static_cast<size_t>(r / 16) * w.group_bytes;
    const int i = static_cast<int>(r % 16);
    for (int64_t b = 0; b < nb; ++b) {
      BlockTQ2_0 blk;
      const uint8_t* codes = g + LutCodesOffset(b);
      for (int j = 0; j < 64; ++j) blk.qs[j] = codes[16 * j + i];
      std::memcpy(&blk.d, g + LutScalesOffset(b) + 2 * i, 2);
      std::memcpy(scratch + static_cast<size_t>(b) * sizeof(BlockTQ2_0), &blk, sizeof(blk));
    }
    return scratch;
  }
  if (w.interleave != 16) return w.data + static_cast<size_t>(r) * w.row_bytes;
  const X16Format f = X16FormatOf(w.type);
  const int64_t nb = w.cols / X16BlockElems(w.type);
  const uint8_t* g = w.data + static_cast<size_t>(r / 16) * w.group_bytes;
  const int i = static_cast<int>(r % 16);
  const size_t lines = f.qs_bytes / 4;
  for (int64_t b = 0; b < nb; ++b) {
    uint8_t* out = scratch + static_cast<size_t>(b) * f.block_bytes;
    const uint8_t* codes = g + X16CodesOffset(b, lines * 64);
    for (size_t k = 0; k < lines; ++k) std::memcpy(out + f.qs_off + 4 * k, codes + k * 64 + 4 * i, 4);
    if (w.type == TypeId::kTQ1_0) {  // the layout's bytes are recoded (x86/tq1_x16.h)
      for (size_t k = 0; k < f.qs_bytes; ++k) out[f.qs_off + k] = kTq1Codec.file_byte[out[f.qs_off + k]];
    }
    std::memcpy(out + f.d_off, g + X16ScalesOffset(b, lines * 64) + 2 * i, 2);
  }
  return scratch;
}

float DotRowRef(const WeightView& w, int64_t r, const void* xq) {
  std::vector<uint8_t> scratch(w.interleave ? w.row_bytes : 0);
  const uint8_t* row = RowData(w, r, scratch.data());
  const int64_t n = w.cols;
  switch (w.type) {
    case TypeId::kTQ2_0:
      return DotTQ2_0(reinterpret_cast<const BlockTQ2_0*>(row), static_cast<const BlockQ8_K*>(xq), n / kQK_K);
    case TypeId::kTQ1_0:
      return DotTQ1_0(reinterpret_cast<const BlockTQ1_0*>(row), static_cast<const BlockQ8_K*>(xq), n / kQK_K);
    case TypeId::kQ4_K:
      return DotQ4_K(reinterpret_cast<const BlockQ4_K*>(row), static_cast<const BlockQ8_K*>(xq), n / kQK_K);
    case TypeId::kQ6_K:
      return DotQ6_K(reinterpret_cast<const BlockQ6_K*>(row), static_cast<const BlockQ8_K*>(xq), n / kQK_K);
    case TypeId::kQ4_0:
      return DotQ4_0(reinterpret_cast<const BlockQ4_0*>(row), static_cast<const BlockQ8_0*>(xq), n / kQK4_0);
    case TypeId::kQ8_0:
      return DotQ8_0(reinterpret_cast<const BlockQ8_0*>(row), static_cast<const BlockQ8_0*>(xq), n / kQK8_0);
    case TypeId::kF16: {
      const uint16_t* a = reinterpret_cast<const uint16_t*>(row);
      const uint16_t* b = static_cast<const uint16_t*>(xq);
      float acc = 0.0f;
      for (int64_t i = 0; i < n; ++i) acc += Fp16ToFp32(a[i]) * Fp16ToFp32(b[i]);
      return acc;
    }
    case TypeId::kBF16: {
      const uint16_t* a = reinterpret_cast<const uint16_t*>(row);
      const uint16_t* b = static_cast<const uint16_t*>(xq);
      float acc = 0.0f;
      for (int64_t i = 0; i < n; ++i) acc += Bf16ToFp32(a[i]) * Bf16ToFp32(b[i]);
      return acc;
    }
    case TypeId::kI2_S: {
      I8RowHeader h;
      std::memcpy(&h, xq, sizeof(h));
      const int8_t* q = reinterpret_cast<const int8_t*>(static_cast<const uint8_t*>(xq) + sizeof(h));
      return DotI2S(row, q, h, n, 1.0f);  // the tensor scale is applied by GemmRef
    }
    default: {
      const float* a = reinterpret_cast<const float*>(row);
      const float* b = static_cast<const float*>(xq);
      float acc = 0.0f;
      for (int64_t i = 0; i < n; ++i) acc += a[i] * b[i];
      return acc;
    }
  }
}

namespace {

// Unpacks a TQ1_0/TQ2_0 row (from RowData) to codes c in {0, 1, 2, 3}, in activation order.
void UnpackTernaryCodes(const WeightView& w, const uint8_t* row, int8_t* codes) {
  const int64_t nb = w.cols / kQK_K;
  if (w.type == TypeId::kTQ2_0) {
    const BlockTQ2_0* b = reinterpret_cast<const BlockTQ2_0*>(row);
    for (int64_t i = 0; i < nb; ++i) {
      int8_t* c = codes + i * kQK_K;
      for (int h = 0; h < 2; ++h) {
        for (int s = 0; s < 4; ++s) {
          for (int m = 0; m < 32; ++m) c[128 * h + 32 * s + m] = static_cast<int8_t>((b[i].qs[32 * h + m] >> (2 * s)) & 3);
        }
      }
    }
    return;
  }
  static const uint8_t kPow3[5] = {1, 3, 9, 27, 81};
  const BlockTQ1_0* b = reinterpret_cast<const BlockTQ1_0*>(row);
  auto trit = [](uint8_t q, uint8_t p) {
    return static_cast<int8_t>((static_cast<uint16_t>(static_cast<uint8_t>(q * p)) * 3) >> 8);
  };
  for (int64_t i = 0; i < nb; ++i) {
    int8_t* c = codes + i * kQK_K;
    for (int t = 0; t < 5; ++t) {
      for (int m = 0; m < 32; ++m) c[m + 32 * t] = trit(b[i].qs[m], kPow3[t]);
      for (int m = 0; m < 16; ++m) c[160 + m + 16 * t] = trit(b[i].qs[32 + m], kPow3[t]);
    }
    for (int t = 0; t < 4; ++t) {
      for (int j = 0; j < 4; ++j) c[240 + j + 4 * t] = trit(b[i].qh[j], kPow3[t]);
    }
  }
}

float TernaryScale(const WeightView& w, const uint8_t* row, int64_t b) {
  const size_t bb = GetTypeTraits(w.type).block_bytes;
  uint16_t d;
  std::memcpy(&d, row + (b + 1) * bb - 2, 2);
  return Fp16ToFp32(d);
}

}  // namespace

// Ternary rows sum one fp32 term per 256-block, block by block: acc += float(sumi) * (d_w * d_a),
// the order of llama.cpp's generic kernel. Its x86 AVX2 kernel (used on AVX-512 machines too) keeps
// 8 fp32 lanes of partial integer sums instead; the two differ by an ulp, which the Q8_K rounding of
// the next matmul's activations amplifies to the 0.03-0.08 logit gap of issue 34 at the llama-1b
// shape (tests/model/ref_dumper/README.md; its experiments/ patch is that order, which makes the
// logits agree within 1e-6). Every ternary kernel reproduces this order bit for bit.
void GemmRef(const WeightView& w, const uint8_t* xq, size_t act_stride, int n_tokens, float* y, int64_t ldy,
             int64_t r0, int64_t r1, float scale) {
  const int64_t n = w.cols;
  if (w.type == TypeId::kTQ1_0 || w.type == TypeId::kTQ2_0) {
    std::vector<int8_t> codes(static_cast<size_t>(n));
    std::vector<uint8_t> scratch(w.row_bytes);
    const int64_t nb = n / kQK_K;
    for (int64_t r = r0; r < r1; ++r) {
      const uint8_t* row = RowData(w, r, scratch.data());
      UnpackTernaryCodes(w, row, codes.data());
      for (int t = 0; t < n_tokens; ++t) {
        const BlockQ8_K* a = reinterpret_cast<const BlockQ8_K*>(xq + act_stride * static_cast<size_t>(t));
        float acc = 0.0f;
        for (int64_t b = 0; b < nb; ++b) {
          const int8_t* c = codes.data() + b * kQK_K;
          int32_t sumi = 0;
          for (int j = 0; j < kQK_K; ++j) sumi += c[j] * a[b].qs[j];
          for (int j = 0; j < 16; ++j) sumi -= a[b].bsums[j];
          acc += static_cast<float>(sumi) * (TernaryScale(w, row, b) * a[b].d);
        }
        y[static_cast<int64_t>(t) * ldy + r] = acc * w.tensor_scale * scale;
      }
    }
    return;
  }
  if (w.type == TypeId::kF16 || w.type == TypeId::kBF16 || w.type == TypeId::kF32) {
    // Activations were rounded to the weight's type by QuantizeActivations; widen them once.
    std::vector<float> row(static_cast<size_t>(n));
    std::vector<float> xs(static_cast<size_t>(n) * static_cast<size_t>(n_tokens));
    for (int t = 0; t < n_tokens; ++t) {
      const uint8_t* a = xq + act_stride * static_cast<size_t>(t);
      GetTypeTraits(w.type).dequantize_row(a, xs.data() + static_cast<size_t>(t) * static_cast<size_t>(n), n);
    }
    for (int64_t r = r0; r < r1; ++r) {
      GetTypeTraits(w.type).dequantize_row(w.data + static_cast<size_t>(r) * w.row_bytes, row.data(), n);
      for (int t = 0; t < n_tokens; ++t) {
        const float* xt = xs.data() + static_cast<size_t>(t) * static_cast<size_t>(n);
        float acc = 0.0f;
        for (int64_t i = 0; i < n; ++i) acc += row[static_cast<size_t>(i)] * xt[i];
        y[static_cast<int64_t>(t) * ldy + r] = acc * w.tensor_scale * scale;
      }
    }
    return;
  }
  for (int64_t r = r0; r < r1; ++r) {
    for (int t = 0; t < n_tokens; ++t) {
      y[static_cast<int64_t>(t) * ldy + r] =
          DotRowRef(w, r, xq + act_stride * static_cast<size_t>(t)) * w.tensor_scale * scale;
    }
  }
}

size_t ActivationBytesFor(const WeightView& w) {
  return w.f32_activations ? static_cast<size_t>(w.cols) * 4 : ActivationBytes(w.type, w.cols);
}

void QuantizeActivationsFor(const WeightView& w, const float* x, void* dst) {
  if (w.f32_activations) {
    std::memcpy(dst, x, static_cast<size_t>(w.cols) * 4);
  } else {
    QuantizeActivations(w.type, x, w.cols, dst);
  }
}

void GemmDequantF32(const WeightView& w, const uint8_t* xq, size_t act_stride, int n_tokens, float* y, int64_t ldy,
                    int64_t r0, int64_t r1, float scale) {
  const int64_t n = w.cols;
  std::vector<float> row(static_cast<size_t>(n));
  std::vector<uint8_t> scratch(w.interleave ? w.row_bytes : 0);
  const TypeTraits& tr = GetTypeTraits(w.type);
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* src = RowData(w, r, scratch.data());
    if (w.type == TypeId::kI2_S) {
      DecodeI2SCodes(src, row.data(), n);
    } else {
      tr.dequantize_row(src, row.data(), n);
    }
    for (int t = 0; t < n_tokens; ++t) {
      const float* xt = reinterpret_cast<const float*>(xq + act_stride * static_cast<size_t>(t));
      float acc = 0.0f;
      for (int64_t i = 0; i < n; ++i) acc += row[static_cast<size_t>(i)] * xt[i];
      y[static_cast<int64_t>(t) * ldy + r] = acc * w.tensor_scale * scale;
    }
  }
}

void GemvRef(const WeightView& w, const void* xq, float* dst, int64_t r0, int64_t r1) {
  for (int64_t r = r0; r < r1; ++r) dst[r - r0] = DotRowRef(w, r, xq);
}

}  // namespace trine::kernels
