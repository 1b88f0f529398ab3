// Scalar reference of the fp16-cache attention (see attention_ref.h for the numerics contract).
#include "ref/attention_ref.h"

#include <cmath>
#include <limits>
#include <vector>

#include "core/fp16.h"
#include "tensor/blocks.h"
#include "tensor/quantize_ref.h"

namespace trine::kernels {

float DotF16Order(const float* x, const float* y, int n) {
  const int np = n & ~63;
  double sumf = 0.0;
  if (np > 0) {
    float acc[4][16] = {};
    for (int i = 0; i < np; i += 64) {
      for (int j = 0; j < 4; ++j) {
        for (int l = 0; l < 16; ++l) acc[j][l] = std::fma(x[i + 16 * j + l], y[i + 16 * j + l], acc[j][l]);
      }
    }
    float a[16], b[8], c[4];
    for (int l = 0; l < 16; ++l) a[l] = (acc[0][l] + acc[2][l]) + (acc[1][l] + acc[3][l]);
    for (int l = 0; l < 8; ++l) b[l] = a[l] + a[l + 8];
    for (int l = 0; l < 4; ++l) c[l] = b[l] + b[l + 4];
    sumf = static_cast<double>((c[0] + c[2]) + (c[1] + c[3]));
  }
  for (int i = np; i < n; ++i) sumf += static_cast<double>(x[i] * y[i]);
  return static_cast<float>(sumf);
}

namespace {

// AttnF16Ref over any KvHead layout (q already rounded to fp16).
void AttnF16Rows(const float* q, const KvHead& k, const KvHead& v, int n_kv, int hd, float scale, float* out) {
  const float* table = Fp16ToFp32Table();
  std::vector<float> kb(static_cast<size_t>(hd));
  std::vector<uint16_t> acc16(static_cast<size_t>(hd), 0);
  float max_s = -std::numeric_limits<float>::infinity();
  float sum = 0.0f;
  for (int p = 0; p < n_kv; ++p) {
    const uint16_t* kp = reinterpret_cast<const uint16_t*>(KvRowAt(k, p));
    for (int i = 0; i < hd; ++i) kb[static_cast<size_t>(i)] = table[kp[i]];
    const float s = DotF16Order(kb.data(), q, hd) * scale;
    float ms = 1.0f, vs = 1.0f;
    if (s > max_s) {
      ms = std::exp(max_s - s);
      max_s = s;
      for (int i = 0; i < hd; ++i) acc16[static_cast<size_t>(i)] = Fp32ToFp16(table[acc16[static_cast<size_t>(i)]] * ms);
    } else {
      vs = std::exp(s - max_s);
    }
    const uint16_t* vp = reinterpret_cast<const uint16_t*>(KvRowAt(v, p));
    for (int i = 0; i < hd; ++i) {
      uint16_t& a = acc16[static_cast<size_t>(i)];
      a = Fp32ToFp16(std::fma(table[vp[i]], vs, table[a]));
    }
    sum = std::fma(sum, ms, vs);
  }
  const float inv = 1.0f / sum;
  for (int i = 0; i < hd; ++i) out[i] = table[acc16[static_cast<size_t>(i)]] * inv;
}

}  // namespace

void AttnF16Ref(const float* q, const uint16_t* k, const uint16_t* v, size_t stride, int n_kv, int hd, float scale,
                float* out) {
  KvHead kh, vh;
  kh.data = reinterpret_cast<const uint8_t*>(k);
  vh.data = reinterpret_cast<const uint8_t*>(v);
  kh.stride = vh.stride = stride * sizeof(uint16_t);
  AttnF16Rows(q, kh, vh, n_kv, hd, scale, out);
}

size_t KvRowBytes(KvRowType type, int n) {
  const size_t nn = static_cast<size_t>(n);
  switch (type) {
    case KvRowType::kQ8_0:
      return nn / kQK8_0 * sizeof(BlockQ8_0);
    case KvRowType::kQ4_0:
      return nn / kQK4_0 * sizeof(BlockQ4_0);
    case KvRowType::kF16:
      break;
  }
  return nn * sizeof(uint16_t);
}

namespace {

// K.Q of a quantized K row against Q in Q8_0 blocks (see attention_ref.h for the order).
float DotQuantRef(KvRowType type, const uint8_t* k, const BlockQ8_0* q, int nb) {
  float sumf = 0.0f;
  for (int b = 0; b < nb; ++b) {
    int sumi = 0;
    float dk;
    if (type == KvRowType::kQ8_0) {
      const BlockQ8_0* kb = reinterpret_cast<const BlockQ8_0*>(k) + b;
      for (int j = 0; j < kQK8_0; ++j) sumi += static_cast<int>(kb->qs[j]) * static_cast<int>(q[b].qs[j]);
      dk = Fp16ToFp32(kb->d);
    } else {
      const BlockQ4_0* kb = reinterpret_cast<const BlockQ4_0*>(k) + b;
      for (int j = 0; j < kQK4_0 / 2; ++j) {
        sumi += (static_cast<int>(kb->qs[j] & 0x0F) - 8) * static_cast<int>(q[b].qs[j]);
        sumi += (static_cast<int>(kb->qs[j] >> 4) - 8) * static_cast<int>(q[b].qs[j + kQK4_0 / 2]);
      }
      dk = Fp16ToFp32(kb->d);
    }
    sumf += static_cast<float>(sumi) * (dk * Fp16ToFp32(q[b].d));
  }
  return sumf;
}

// Dequantizes one quantized V row of n values (q * d).
void DequantV(KvRowType type, const uint8_t* v, int n, float* dst) {
  const int nb = n / kQK8_0;
  for (int b = 0; b < nb; ++b) {
    if (type == KvRowType::kQ8_0) {
      const BlockQ8_0* vb = reinterpret_cast<const BlockQ8_0*>(v) + b;
      const float d = Fp16ToFp32(vb->d);
      for (int j = 0; j < kQK8_0; ++j) dst[b * kQK8_0 + j] = static_cast<float>(vb->qs[j]) * d;
    } else {
      const BlockQ4_0* vb = reinterpret_cast<const BlockQ4_0*>(v) + b;
      const float d = Fp16ToFp32(vb->d);
      for (int j = 0; j < kQK4_0 / 2; ++j) {
        dst[b * kQK4_0 + j] = static_cast<float>(static_cast<int>(vb->qs[j] & 0x0F) - 8) * d;
        dst[b * kQK4_0 + j + kQK4_0 / 2] = static_cast<float>(static_cast<int>(vb->qs[j] >> 4) - 8) * d;
      }
    }
  }
}

}  // namespace

void AttnRef(const float* q, const KvHead& k, const KvHead& v, int n_kv, int hd, float scale, float* out) {
  const size_t n = static_cast<size_t>(hd);
  std::vector<float> qh(n);
  const bool k_f16 = k.type == KvRowType::kF16, v_f16 = v.type == KvRowType::kF16;
  if (k_f16) {
    for (size_t i = 0; i < n; ++i) qh[i] = Fp16ToFp32(Fp32ToFp16(q[i]));
  }
  if (k_f16 && v_f16) {
    AttnF16Rows(qh.data(), k, v, n_kv, hd, scale, out);
    return;
  }
  const int nb = hd / kQK8_0;
  std::vector<BlockQ8_0> q8(static_cast<size_t>(nb));
  if (!k_f16) QuantizeRowQ8_0(q, q8.data(), hd);
  const float* table = Fp16ToFp32Table();
  std::vector<float> kb(n), vb(n), acc32(n, 0.0f);
  std::vector<uint16_t> acc16(n, 0);
  float max_s = -std::numeric_limits<float>::infinity();
  float sum = 0.0f;
  for (int p = 0; p < n_kv; ++p) {
    const uint8_t* kp = KvRowAt(k, p);
    float s;
    if (k_f16) {
      const uint16_t* k16 = reinterpret_cast<const uint16_t*>(kp);
      for (size_t i = 0; i < n; ++i) kb[i] = table[k16[i]];
      s = DotF16Order(kb.data(), qh.data(), hd);
    } else {
      s = DotQuantRef(k.type, kp, q8.data(), nb);
    }
    s *= scale;
    float ms = 1.0f, vs = 1.0f;
    const bool new_max = s > max_s;
    if (new_max) {
      ms = std::exp(max_s - s);
      max_s = s;
    } else {
      vs = std::exp(s - max_s);
    }
    const uint8_t* vp = KvRowAt(v, p);
    if (v_f16) {
      const uint16_t* v16 = reinterpret_cast<const uint16_t*>(vp);
      for (size_t i = 0; i < n; ++i) {
        if (new_max) acc16[i] = Fp32ToFp16(table[acc16[i]] * ms);
        acc16[i] = Fp32ToFp16(std::fma(table[v16[i]], vs, table[acc16[i]]));
      }
    } else {
      DequantV(v.type, vp, hd, vb.data());
      for (size_t i = 0; i < n; ++i) {
        if (new_max) acc32[i] *= ms;
        acc32[i] = std::fma(vb[i], vs, acc32[i]);
      }
    }
    sum = std::fma(sum, ms, vs);
  }
  const float inv = 1.0f / sum;
  for (size_t i = 0; i < n; ++i) out[i] = (v_f16 ? table[acc16[i]] : acc32[i]) * inv;
}

}  // namespace trine::kernels
