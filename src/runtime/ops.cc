// Reference operators; numerics follow llama.cpp's CPU backend where it matters for parity
// (RMSNorm's fp32 squares summed in double, theta by repeated multiplication and fused rotations
// in RoPE). The element-wise loops run the active ISA's vector kernels (kernels/simd/) or their
// scalar forms (kernels/ref/elementwise_ref.cc), the same bits either way.
#include "runtime/ops.h"

#include <omp.h>

#include <algorithm>
#include <cmath>

#include "core/team.h"
#include "kernels.h"
#include "ref/elementwise_ref.h"

namespace trine::ops {

// Element-wise work below this many values runs on the calling thread when an operator opens its
// own region (a parallel region costs more than it saves).
constexpr int64_t kParallelMin = 16384;
// Matrices MatMulSharedTeam runs as one step (Q/K/V are 3); more run one step each.
constexpr int kMaxSharedMats = 8;

namespace {

// The vector kernels of the active ISA (kernels/simd/), chosen once; a null member runs the scalar
// form (kernels/ref/elementwise_ref.h), which it equals bit for bit.
const kernels::ElementwiseKernels& Vec() {
  static const kernels::ElementwiseKernels& k = kernels::SelectElementwise(kernels::ActiveIsa());
  return k;
}

// 1 / sqrt(mean(x^2) + eps) of one row: fp32 squares summed in double as llama.cpp's rms_norm
// (kernels::RmsScaleRef says how).
float RmsScale(const float* xt, int dim, float eps) {
  const auto fn = Vec().rms_scale;
  return fn ? fn(xt, dim, eps) : kernels::RmsScaleRef(xt, dim, eps);
}

void ScaleMul(const float* x, float scale, const float* w, float* out, int64_t n) {
  const auto fn = Vec().scale_mul;
  (fn ? fn : kernels::ScaleMulRef)(x, scale, w, out, n);
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
  if (n_tokens >= omp_get_num_threads() || out == x) {
    // An item per row (in place, each row is read whole before it is written, by one thread).
    for (int64_t t = TeamFirst(n_tokens); t < n_tokens; t = TeamNext(n_tokens, t)) {
      const float* xt = x + t * dim;
      float* ot = out + t * dim;
      ScaleMul(xt, RmsScale(xt, dim, eps), w, ot, dim);
    }
    TeamSync();
    return;
  }
  // Fewer rows than threads (decode): items are 16-aligned slices of each row, one per thread
  // (each recomputes its row's scale: the same bits whoever computes it) and writes its slice.
  const int64_t unit = TeamUnit(dim, 16, 1), per_row = TeamItems(dim, unit), n = per_row * n_tokens;
  for (int64_t i = TeamFirst(n); i < n; i = TeamNext(n, i)) {
    const int64_t t = i / per_row, k0 = i % per_row * unit, k1 = std::min<int64_t>(dim, k0 + unit);
    const float* xt = x + t * dim;
    float* ot = out + t * dim;
    ScaleMul(xt + k0, RmsScale(xt, dim, eps), w + k0, ot + k0, k1 - k0);
  }
  TeamSync();
}

void RmsNorm(const float* x, const float* w, float* out, int n_tokens, int dim, float eps, int n_threads) {
  const bool par = n_threads > 1 && n_tokens > 1 && static_cast<int64_t>(n_tokens) * dim >= kParallelMin;
  RunTeam(n_threads, [&] { RmsNormTeam(x, w, out, n_tokens, dim, eps); }, par);
}

void AddInPlaceTeam(float* x, const float* y, int64_t n) {
  const int64_t unit = TeamUnit(n, 16), items = TeamItems(n, unit);
  for (int64_t it = TeamFirst(items); it < items; it = TeamNext(items, it)) {
    const int64_t i1 = std::min(n, (it + 1) * unit);
    for (int64_t i = it * unit; i < i1; ++i) x[i] += y[i];
  }
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
  if (!same || n_mats > kMaxSharedMats) {
    for (int m = 0; m < n_mats; ++m) MatMulTeam(*ws[m], x, ys[m], n_tokens, act, scales[m]);
    return;
  }
  const kernels::WeightView& w0 = *ws[0];
  const size_t act_bytes = kernels::ActivationBytesFor(w0);
  const int64_t be = kernels::ActivationBlockElems(w0);
  const size_t block_bytes = be > 0 ? kernels::ActivationBytes(w0.type, be) : 0;
  if (be > 0) {
    // Block-wise formats: items are ranges of blocks of one token (the bytes do not depend on the
    // split), so decode's single vector is quantized in parallel too.
    const int64_t nb = w0.cols / be, unit = TeamUnit(nb, 1), per_tok = TeamItems(nb, unit), n = per_tok * n_tokens;
    for (int64_t i = TeamFirst(n); i < n; i = TeamNext(n, i)) {
      const int64_t t = i / per_tok, b0 = i % per_tok * unit, b1 = std::min(nb, b0 + unit);
      kernels::QuantizeActivations(w0.type, x + t * w0.cols + b0 * be, (b1 - b0) * be,
                                   act + act_bytes * static_cast<size_t>(t) + static_cast<size_t>(b0) * block_bytes);
    }
  } else {
    for (int64_t t = TeamFirst(n_tokens); t < n_tokens; t = TeamNext(n_tokens, t)) {
      kernels::QuantizeActivationsFor(w0, x + t * w0.cols, act + act_bytes * static_cast<size_t>(t));
    }
  }
  TeamSync();
  // Items are ranges of 16-row chunks of one matrix, about 4 per thread (8 measured 3-6 % slower
  // in 2-thread decode: a kernel call per item), one kernel call each (the kernels gather
  // per-call activation data once); each output element is computed by exactly one thread, and a
  // row's value does not depend on the range it falls in.
  int64_t first_item[kMaxSharedMats + 1];
  int64_t unit[kMaxSharedMats];
  first_item[0] = 0;
  for (int m = 0; m < n_mats; ++m) {
    const int64_t n_chunks = (ws[m]->rows + 15) / 16;
    unit[m] = TeamUnit(n_chunks, 1, 4);
    first_item[m + 1] = first_item[m] + TeamItems(n_chunks, unit[m]);
  }
  const int64_t n_items = first_item[n_mats];
  for (int64_t i = TeamFirst(n_items); i < n_items; i = TeamNext(n_items, i)) {
    int m = 0;
    while (i >= first_item[m + 1]) ++m;
    const kernels::WeightView& w = *ws[m];
    const int64_t r0 = (i - first_item[m]) * unit[m] * 16;
    const int64_t r1 = std::min(w.rows, r0 + unit[m] * 16);
    (w.gemm ? w.gemm : kernels::GemmRef)(w, act, act_bytes, n_tokens, ys[m], w.rows, r0, r1, scales[m]);
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
  const kernels::ElementwiseKernels& v = Vec();
  if (p.neox && v.rope_neox != nullptr) {
    v.rope_neox(x, n_heads, head_dim, half, cs, sn);
  } else if (!p.neox && v.rope_pairs != nullptr) {
    // The vector form takes the factors per lane: (cs, sn) and (sn, cs) of each pair.
    float m_cache[2][1024];
    std::vector<float> big_m1, big_m2;
    float* m1 = m_cache[0];
    float* m2 = m_cache[1];
    if (half > 512) {
      big_m1.resize(2 * static_cast<size_t>(half));
      big_m2.resize(2 * static_cast<size_t>(half));
      m1 = big_m1.data();
      m2 = big_m2.data();
    }
    for (int i = 0; i < half; ++i) {
      m1[2 * i] = cs[i], m1[2 * i + 1] = sn[i];
      m2[2 * i] = sn[i], m2[2 * i + 1] = cs[i];
    }
    v.rope_pairs(x, n_heads, head_dim, half, m1, m2);
  } else {
    kernels::RotatePairsRef(x, n_heads, head_dim, half, p.neox, cs, sn);
  }
}

float ExpfPoly(float x) { return kernels::ExpfPolyRef(x); }

void SwiGluTeam(const float* gate, const float* up, float* out, int64_t n_tokens, int64_t dim) {
  // llama.cpp evaluates SiLU 16 lanes at a time with ExpfPoly and the row tail with libm expf;
  // doing the same keeps the int8-quantized activations that follow identical. Items are
  // 16-aligned slices of rows (the numerics of an element do not depend on its slice).
  const int64_t vec = dim / 16 * 16;
  const kernels::SwiGluVecFn vec_fn = Vec().swiglu;
  const int64_t unit = TeamUnit(dim, 16), per_row = TeamItems(dim, unit), n = per_row * n_tokens;
  for (int64_t i = TeamFirst(n); i < n; i = TeamNext(n, i)) {
    const int64_t t = i / per_row, i0 = i % per_row * unit, i1 = std::min(dim, i0 + unit);
    SwiGluRange(gate + t * dim, up + t * dim, out + t * dim, i0, i1, vec, vec_fn);
  }
  TeamSync();
}

void SwiGlu(const float* gate, const float* up, float* out, int64_t n_tokens, int64_t dim, int n_threads) {
  const bool par = n_threads > 1 && n_tokens > 1 && n_tokens * dim >= kParallelMin;
  RunTeam(n_threads, [&] { SwiGluTeam(gate, up, out, n_tokens, dim); }, par);
}

void ReluSqrGluTeam(const float* gate, const float* up, float* out, int64_t n) {
  const int64_t unit = TeamUnit(n, 16), items = TeamItems(n, unit);
  for (int64_t it = TeamFirst(items); it < items; it = TeamNext(items, it)) {
    const int64_t i1 = std::min(n, (it + 1) * unit);
    const auto fn = Vec().relu_sqr_glu;
    (fn ? fn : kernels::ReluSqrGluRef)(gate + it * unit, up + it * unit, out + it * unit, i1 - it * unit);
  }
  TeamSync();
}

void ReluSqrGlu(const float* gate, const float* up, float* out, int64_t n, int n_threads) {
  const bool par = n_threads > 1 && n >= kParallelMin;
  RunTeam(n_threads, [&] { ReluSqrGluTeam(gate, up, out, n); }, par);
}

}  // namespace trine::ops
