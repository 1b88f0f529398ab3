#include "ref/elementwise_ref.h"

#include <cmath>

namespace trine::kernels {

float ExpfPolyRef(float x) {
  // Range reduction x = n*ln2 + b with n = round(x*log2(e)) (the 1.5*2^23 shift trick), then a
  // degree-5 minimax polynomial for e^b (ARM optimized-routines expf coefficients), scaled by 2^n.
  const float shift = 0x1.8p23f;
  const float z = std::fma(x, 0x1.715476p+0f, shift);
  const float n = z - shift;
  const float b = std::fma(-n, 0x1.7f7d1cp-20f, std::fma(-n, 0x1.62e4p-1f, x));
  if (std::fabs(n) > 192.0f) return n <= 0.0f ? 0.0f : INFINITY;
  const float u = b * b;
  const float j = std::fma(std::fma(std::fma(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u,
                                    std::fma(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)),
                           u, std::fma(0x1.ffffecp-1f, b, 1.0f));
  if (std::isnan(n)) return j;  // NaN in, NaN out (converting NaN to int would be undefined)
  return std::ldexp(j, static_cast<int>(n));
}

void SwiGluVecRef(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = gate[i] / (1.0f + ExpfPolyRef(-gate[i])) * up[i];
}

// Each square is rounded to fp32 before it is summed in double, as llama.cpp's rms_norm does
// ((ggml_float)(x * x)); squaring in double instead moved the fp32 mean by an ulp in some rows, a
// seed of the drift of issue 34. Element i goes to partial sum i % 8: independent chains that
// vectorize, where one running sum is a dim-long chain of dependent double adds; that differs
// from llama.cpp's sequential double sum by a few ulp of the double, far below what moves the
// fp32 mean. The order is fixed, so every thread computing it gets the same bits.
float RmsScaleRef(const float* x, int64_t dim, float eps) {
  double s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= dim; i += 8) {
    for (int j = 0; j < 8; ++j) s[j] += static_cast<double>(x[i + j] * x[i + j]);
  }
  for (int j = 0; i < dim; ++i, ++j) s[j] += static_cast<double>(x[i] * x[i]);
  const double sum = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
  const float mean = static_cast<float>(sum / static_cast<double>(dim));
  return 1.0f / std::sqrt(mean + eps);
}

void ScaleMulRef(const float* x, float scale, const float* w, float* out, int64_t n) {
  for (int64_t k = 0; k < n; ++k) out[k] = x[k] * scale * w[k];
}

void ReluSqrGluRef(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i] > 0.0f ? gate[i] : 0.0f;
    out[i] = g * g * up[i];
  }
}

// llama.cpp's CPU RoPE as its g++ build compiles it (fp-contract fast: the first product of each
// rotation fused into the add), measured against ggml_rope_ext bit for bit in normal and neox
// mode. An unfused rotation differs in 1 ulp of ~17 % of the values, which the fp16 Q/K rounding
// of attention and the Q8_K activation rounding downstream turn into visible logit changes (issue
// 34). std::fma is exact wherever it runs; the x86 clone with FMA makes it an instruction instead
// of a libm call (llama-1b's Q and K, one token and layer, in a standalone loop: 2.6 us unfused,
// 9.7 us through fmaf calls, 2.4 us with the clone).
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target_clones("fma", "default")))
#endif
void RotatePairsRef(float* x, int n_heads, int head_dim, int half, bool neox, const float* cs, const float* sn) {
  for (int h = 0; h < n_heads; ++h) {
    float* v = x + static_cast<int64_t>(h) * head_dim;
    for (int i = 0; i < half; ++i) {
      const int i0 = neox ? i : 2 * i;
      const int i1 = neox ? i + half : 2 * i + 1;
      const float a = v[i0], b = v[i1];
      v[i0] = std::fma(a, cs[i], -(b * sn[i]));
      v[i1] = std::fma(a, sn[i], b * cs[i]);
    }
  }
}

}  // namespace trine::kernels
