// Reference operators; numerics follow llama.cpp's CPU backend where it matters for parity
// (RMSNorm's fp32 squares summed in double, theta by repeated multiplication and fused rotations
// in RoPE).
#include "runtime/ops.h"

#include <omp.h>

#include <algorithm>
#include <cmath>

#include "core/team.h"
#include "kernels.h"

namespace trine::ops {

// Element-wise work below this many values runs on the calling thread when an operator opens its
// own region (a parallel region costs more than it saves).
constexpr int64_t kParallelMin = 16384;
// Matrices MatMulSharedTeam runs as one step (Q/K/V are 3); more run one step each.
constexpr int kMaxSharedMats = 8;

namespace {

// 1 / sqrt(mean(x^2) + eps) of one row. Each square is rounded to fp32 before it is summed in
// double, as llama.cpp's rms_norm does ((ggml_float)(x * x)); squaring in double instead moved the
// fp32 mean by an ulp in some rows, a seed of the drift of issue 34. Element i goes to partial sum
// i % 8: independent chains the compiler vectorizes, where one running sum is a dim-long chain of
// dependent double adds; that differs from llama.cpp's sequential double sum by a few ulp of the
// double, far below what moves the fp32 mean. The order is fixed, so every thread computing it
// gets the same bits.
float RmsScale(const float* xt, int dim, float eps) {
  double s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int i = 0;
  for (; i + 8 <= dim; i += 8) {
    for (int j = 0; j < 8; ++j) s[j] += static_cast<double>(xt[i + j] * xt[i + j]);
  }
  for (int j = 0; i < dim; ++i, ++j) s[j] += static_cast<double>(xt[i] * xt[i]);
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

// The RoPE rotation of every head's pairs: llama.cpp's CPU RoPE as its g++ build compiles it
// (fp-contract fast: the first product of each rotation fused into the add), measured against
// ggml_rope_ext bit for bit in normal and neox mode. An unfused rotation differs in 1 ulp of ~17 %
// of the values, which the fp16 Q/K rounding of attention and the Q8_K activation rounding
// downstream turn into visible logit changes (issue 34). std::fma is exact wherever it runs; the
// x86 clone with FMA makes it an instruction instead of a libm call (llama-1b's Q and K, one token
// and layer, in a standalone loop: 2.6 us unfused, 9.7 us through fmaf calls, 2.4 us with the clone).
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target_clones("fma", "default")))
#endif
// (cs, sn not const: GCC 12 takes a const pointer to a partly written array, Rope's caches, for a
// read of all of it and warns that it may be uninitialized.)
void RotatePairs(float* x, int n_heads, int head_dim, int half, bool neox, float* cs, float* sn) {
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

}  // namespace

void RmsNormTeam(const float* x, const float* w, float* out, int n_tokens, int dim, float eps) {
  if (n_tokens >= omp_get_num_threads() || out == x) {
    // An item per row (in place, each row is read whole before it is written, by one thread).
    for (int64_t t = TeamFirst(n_tokens); t < n_tokens; t = TeamNext(n_tokens, t)) {
      const float* xt = x + t * dim;
      float* ot = out + t * dim;
      const float scale = RmsScale(xt, dim, eps);
      for (int k = 0; k < dim; ++k) ot[k] = xt[k] * scale * w[k];
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
    const float scale = RmsScale(xt, dim, eps);
    for (int64_t k = k0; k < k1; ++k) ot[k] = xt[k] * scale * w[k];
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
  RotatePairs(x, n_heads, head_dim, half, p.neox, cs, sn);
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
  // doing the same keeps the int8-quantized activations that follow identical. Items are
  // 16-aligned slices of rows (the numerics of an element do not depend on its slice).
  const int64_t vec = dim / 16 * 16;
  static const kernels::SwiGluVecFn vec_fn = kernels::SelectSwiGluVec(kernels::ActiveIsa());
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
    for (int64_t i = it * unit; i < i1; ++i) {
      const float g = gate[i] > 0.0f ? gate[i] : 0.0f;
      out[i] = g * g * up[i];
    }
  }
  TeamSync();
}

void ReluSqrGlu(const float* gate, const float* up, float* out, int64_t n, int n_threads) {
  const bool par = n_threads > 1 && n >= kParallelMin;
  RunTeam(n_threads, [&] { ReluSqrGluTeam(gate, up, out, n); }, par);
}

}  // namespace trine::ops
