// Scalar reference of the fp16-cache attention (see attention_ref.h for the numerics contract).
#include "ref/attention_ref.h"

#include <cmath>
#include <limits>
#include <vector>

#include "core/fp16.h"

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

void AttnF16Ref(const float* q, const uint16_t* k, const uint16_t* v, size_t stride, int n_kv, int hd, float scale,
                float* out) {
  const float* table = Fp16ToFp32Table();
  std::vector<float> kb(static_cast<size_t>(hd));
  std::vector<uint16_t> acc16(static_cast<size_t>(hd), 0);
  float max_s = -std::numeric_limits<float>::infinity();
  float sum = 0.0f;
  for (int p = 0; p < n_kv; ++p) {
    const uint16_t* kp = k + static_cast<size_t>(p) * stride;
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
    const uint16_t* vp = v + static_cast<size_t>(p) * stride;
    for (int i = 0; i < hd; ++i) {
      uint16_t& a = acc16[static_cast<size_t>(i)];
      a = Fp32ToFp16(std::fma(table[vp[i]], vs, table[a]));
    }
    sum = std::fma(sum, ms, vs);
  }
  const float inv = 1.0f / sum;
  for (int i = 0; i < hd; ++i) out[i] = table[acc16[static_cast<size_t>(i)]] * inv;
}

}  // namespace trine::kernels
