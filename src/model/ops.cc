// Reference operators; numerics follow llama.cpp's CPU backend where it matters for parity
// (double sum of squares in RMSNorm, theta by repeated multiplication in RoPE).
#include "model/ops.h"

#include <omp.h>

#include <algorithm>
#include <cmath>

#include "core/team.h"
#include "kernels.h"

namespace trine::ops {

// Element-wise work below this many values runs on the calling thread when an operator opens its
// own region (a parallel region costs more than it saves).
constexpr int64_t kParallelMin = 16384;

namespace {

// 1 / sqrt(mean(x^2) + eps) of one row. Element i goes to partial sum i % 8: independent chains the
// compiler vectorizes, where one running sum is a dim-long chain of dependent double adds. The
// squares are exact in double, so the result differs from a sequential sum by at most a few ulp of
// the double; the order is fixed, so every thread computing it gets the same bits.
float RmsScale(const float* xt, int dim, float eps) {
  double s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int i = 0;
  for (; i + 8 <= dim; i += 8) {
    for (int j = 0; j < 8; ++j) s[j] += static_cast<double>(xt[i + j]) * xt[i + j];
  }
  for (int j = 0; i < dim; ++i, ++j) s[j] += static_cast<double>(xt[i]) * xt[i];
  const double sum = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
  const float mean = static_cast<float>(sum / dim);
  return 1.0f / std::sqrt(mean + eps);
}

// SwiGLU of elements [i0, i1) of one row whose first `vec` elements take the vector numerics.
void SwiGluRange(const float* g, const float* u, float* o, int64_t i0, int64_t i1, int64_t vec,
                 kernels::SwiGluVecFn vec_fn) {
  if (vec_fn != nullptr && i0 < vec) {
    const int64_t e = std::min(i1, vec);
    vec_fn(g + i0, u + i0, o + i0, e - i0);  // the same bits as the loop below
    i0 = e;
  }
  for (int64_t i = i0; i < i1; ++i) {
    const float e = i < vec ? ExpfPoly(-g[i]) : std::exp(-g[i]);
    o[i] = g[i] / (1.0f + e) * u[i];
  }
}

}  // namespace

void RmsNormTeam(const float* x, const float* w, float* out, int n_tokens, int dim, float eps) {
  if (n_tokens >= omp_get_num_threads()) {
    int64_t t0, t1;
    TeamPart(n_tokens, 1, &t0, &t1);
    for (int64_t t = t0; t < t1; ++t) {
      const float* xt = x + t * dim;
      float* ot = out + t * dim;
      const float scale = RmsScale(xt, dim, eps);
      for (int k = 0; k < dim; ++k) ot[k] = xt[k] * scale * w[k];
    }
    TeamSync();
    return;
  }
  // Fewer rows than threads (decode): every thread computes each row's scale (the same bits) and
  // writes its slice of the row.
  int64_t k0, k1;
  TeamPart(dim, 16, &k0, &k1);
  for (int t = 0; t < n_tokens; ++t) {
    const float* xt = x + static_cast<int64_t>(t) * dim;
    float* ot = out + static_cast<int64_t>(t) * dim;
    const float scale = RmsScale(xt, dim, eps);
    if (out == x) TeamSync();
    for (int64_t k = k0; k < k1; ++k) ot[k] = xt[k] * scale * w[k];
  }
  TeamSync();
}

void RmsNorm(const float* x, const float* w, float* out, int n_tokens, int dim, float eps, int n_threads) {
  const bool par = n_threads > 1 && n_tokens > 1 && static_cast<int64_t>(n_tokens) * dim >= kParallelMin;
  RunTeam(n_threads, [&] { RmsNormTeam(x, w, out, n_tokens, dim, eps); }, par);
}

void AddInPlaceTeam(float* x, const float* y, int64_t n) {
  int64_t i0, i1;
  TeamPart(n, 16, &i0, &i1);
  for (int64_t i = i0; i < i1; ++i) x[i] += y[i];
  TeamSync();
}

void AddInPlace(float* x, const float* y, int64_t n, int n_threads) {
  const bool par = n_threads > 1 && n >= kParallelMin;
  RunTeam(n_threads, [&] { AddInPlaceTeam(x, y, n); }, par);
}

void MatMul(const kernels::WeightView& w, const float* x, float* y, int n_tokens, std::vector<uint8_t>* act,
            int n_threads, float scale) {
  const kernels::WeightView* ws[] = {&w};
  float* const ys[] = {y};
  const float scales[] = {scale};
  MatMulShared(ws, ys, scales, 1, x, n_tokens, act, n_threads);
}

void ReserveActivations(const kernels::WeightView* const* ws, int n_mats, int n_tokens, std::vector<uint8_t>* act) {
  size_t bytes = 0;
  for (int m = 0; m < n_mats; ++m) bytes = std::max(bytes, kernels::ActivationBytesFor(*ws[m]));
  bytes *= static_cast<size_t>(n_tokens);
  if (act->size() < bytes) act->resize(bytes);
}

void MatMulShared(const kernels::WeightView* const* ws, float* const* ys, const float* scales, int n_mats,
                  const float* x, int n_tokens, std::vector<uint8_t>* act, int n_threads) {
  ReserveActivations(ws, n_mats, n_tokens, act);
  uint8_t* a = act->data();
  RunTeam(n_threads, [&] { MatMulSharedTeam(ws, ys, scales, n_mats, x, n_tokens, a); });
}

void MatMulTeam(const kernels::WeightView& w, const float* x, float* y, int n_tokens, uint8_t* act, float scale) {
  const kernels::WeightView* ws[] = {&w};
  float* const ys[] = {y};
  const float scales[] = {scale};
  MatMulSharedTeam(ws, ys, scales, 1, x, n_tokens, act);
}

void MatMulSharedTeam(const kernels::WeightView* const* ws, float* const* ys, const float* scales, int n_mats,
                      const float* x, int n_tokens, uint8_t* act) {
  bool same = true;
  for (int m = 1; m < n_mats; ++m) {
    same = same && ws[m]->type == ws[0]->type && ws[m]->cols == ws[0]->cols &&
           ws[m]->f32_activations == ws[0]->f32_activations;
  }
  if (!same) {
    for (int m = 0; m < n_mats; ++m) MatMulTeam(*ws[m], x, ys[m], n_tokens, act, scales[m]);
    return;
  }
  const kernels::WeightView& w0 = *ws[0];
  const size_t act_bytes = kernels::ActivationBytesFor(w0);
  const int64_t be = kernels::ActivationBlockElems(w0);
  const size_t block_bytes = be > 0 ? kernels::ActivationBytes(w0.type, be) : 0;
  const int64_t nt = omp_get_num_threads(), id = omp_get_thread_num();
  if (be > 0) {
    // Block-wise formats: each thread quantizes its range of blocks of every token (the bytes do
    // not depend on the split), so decode's single vector is quantized in parallel too.
    const int64_t nb = w0.cols / be, b0 = nb * id / nt, b1 = nb * (id + 1) / nt;
    for (int t = 0; t < n_tokens && b0 < b1; ++t) {
      kernels::QuantizeActivations(w0.type, x + static_cast<int64_t>(t) * w0.cols + b0 * be, (b1 - b0) * be,
                                   act + act_bytes * static_cast<size_t>(t) + static_cast<size_t>(b0) * block_bytes);
    }
  } else {
    int64_t t0, t1;
    TeamPart(n_tokens, 1, &t0, &t1);
    for (int64_t t = t0; t < t1; ++t) {
      kernels::QuantizeActivationsFor(w0, x + t * w0.cols, act + act_bytes * static_cast<size_t>(t));
    }
  }
  TeamSync();
  // One contiguous range of 16-row chunks per thread and matrix, one kernel call each (the
  // kernels gather per-call activation data once); each output element is computed by exactly
  // one thread, and a row's value does not depend on the range it falls in.
  for (int m = 0; m < n_mats; ++m) {
    const kernels::WeightView& w = *ws[m];
    const int64_t n_chunks = (w.rows + 15) / 16;
    const int64_t c0 = n_chunks * id / nt, c1 = n_chunks * (id + 1) / nt;
    const int64_t r0 = c0 * 16;
    const int64_t r1 = c1 * 16 < w.rows ? c1 * 16 : w.rows;
    if (r0 < r1) (w.gemm ? w.gemm : kernels::GemmRef)(w, act, act_bytes, n_tokens, ys[m], w.rows, r0, r1, scales[m]);
  }
  // The outputs are read whole by the next step, and `act` is overwritten by the next matmul.
  TeamSync();
}

void Rope(float* x, int n_heads, int head_dim, int pos, const RopeParams& p) {
  const float theta_scale = std::pow(p.freq_base, -2.0f / static_cast<float>(p.n_rot));
  const int half = p.n_rot / 2;
  float cos_cache[512], sin_cache[512];
  std::vector<float> big_cos, big_sin;
  float* cs = cos_cache;
  float* sn = sin_cache;
  if (half > 512) {
    big_cos.resize(static_cast<size_t>(half));
    big_sin.resize(static_cast<size_t>(half));
    cs = big_cos.data();
    sn = big_sin.data();
  }
  float theta = static_cast<float>(pos);
  for (int i = 0; i < half; ++i) {
    const float ff = p.freq_factors ? p.freq_factors[i] : 1.0f;
    const float th = p.freq_scale * (theta / ff);
    cs[i] = std::cos(th);
    sn[i] = std::sin(th);
    theta *= theta_scale;
  }
  for (int h = 0; h < n_heads; ++h) {
    float* v = x + static_cast<int64_t>(h) * head_dim;
    for (int i = 0; i < half; ++i) {
      const int i0 = p.neox ? i : 2 * i;
      const int i1 = p.neox ? i + half : 2 * i + 1;
      const float a = v[i0], b = v[i1];
      v[i0] = a * cs[i] - b * sn[i];
      v[i1] = a * sn[i] + b * cs[i];
    }
  }
}

float ExpfPoly(float x) {
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

void SwiGluTeam(const float* gate, const float* up, float* out, int64_t n_tokens, int64_t dim) {
  // llama.cpp evaluates SiLU 16 lanes at a time with ExpfPoly and the row tail with libm expf;
  // doing the same keeps the int8-quantized activations that follow identical.
  const int64_t vec = dim / 16 * 16;
  static const kernels::SwiGluVecFn vec_fn = kernels::SelectSwiGluVec(kernels::ActiveIsa());
  if (n_tokens >= omp_get_num_threads()) {
    int64_t t0, t1;
    TeamPart(n_tokens, 1, &t0, &t1);
    for (int64_t t = t0; t < t1; ++t) SwiGluRange(gate + t * dim, up + t * dim, out + t * dim, 0, dim, vec, vec_fn);
    TeamSync();
    return;
  }
  // Fewer rows than threads (decode): each thread its 16-aligned slice of every row.
  int64_t i0, i1;
  TeamPart(dim, 16, &i0, &i1);
  for (int64_t t = 0; t < n_tokens; ++t) SwiGluRange(gate + t * dim, up + t * dim, out + t * dim, i0, i1, vec, vec_fn);
  TeamSync();
}

void SwiGlu(const float* gate, const float* up, float* out, int64_t n_tokens, int64_t dim, int n_threads) {
  const bool par = n_threads > 1 && n_tokens > 1 && n_tokens * dim >= kParallelMin;
  RunTeam(n_threads, [&] { SwiGluTeam(gate, up, out, n_tokens, dim); }, par);
}

void ReluSqrGluTeam(const float* gate, const float* up, float* out, int64_t n) {
  int64_t i0, i1;
  TeamPart(n, 16, &i0, &i1);
  for (int64_t i = i0; i < i1; ++i) {
    const float g = gate[i] > 0.0f ? gate[i] : 0.0f;
    out[i] = g * g * up[i];
  }
  TeamSync();
}

void ReluSqrGlu(const float* gate, const float* up, float* out, int64_t n, int n_threads) {
  const bool par = n_threads > 1 && n >= kParallelMin;
  RunTeam(n_threads, [&] { ReluSqrGluTeam(gate, up, out, n); }, par);
}

}  // namespace trine::ops
