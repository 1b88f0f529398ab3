// Reference operators of the forward pass (fp32 unless stated). Each operates on a batch of
// tokens laid out row-major: (n_tokens, dim). Threaded with OpenMP over independent rows or
// elements, so results do not depend on the thread count.
//
// Each operator comes in two forms. `Op(..., n_threads)` opens its own parallel region.
// `OpTeam(...)` is called by every thread of an enclosing parallel region with the same arguments
// (a layer step runs in one region, src/runtime/arch/, opened by RunTeam in core/team.h); its work
// is a step of items the threads claim (TeamFirst/TeamNext) and it returns once every item is done
// (TeamSync), so every thread then sees the whole result. Every write of shared data is inside an
// item: a thread that comes late finds the work done. Called outside any region, a Team form runs
// all the work on the calling thread.
#pragma once

#include <cstdint>
#include <vector>

#include "ref/matmul_ref.h"

namespace trine::ops {

// out[t] = x[t] / sqrt(mean(x[t]^2) + eps) * w; the sum of squares is accumulated in double
// (8 interleaved partial sums added in a fixed order). Rows are split across n_threads.
void RmsNorm(const float* x, const float* w, float* out, int n_tokens, int dim, float eps, int n_threads = 1);

void RmsNormTeam(const float* x, const float* w, float* out, int n_tokens, int dim, float eps);

// x[i] += y[i] for i < n (the residual connection), split across n_threads.
void AddInPlace(float* x, const float* y, int64_t n, int n_threads = 1);
void AddInPlaceTeam(float* x, const float* y, int64_t n);

// y (n_tokens, w.rows) = x (n_tokens, w.cols) @ W^T, times `scale`. `act` is scratch of at least
// n_tokens * ActivationBytes(w.type, w.cols) bytes.
void MatMul(const kernels::WeightView& w, const float* x, float* y, int n_tokens, std::vector<uint8_t>* act,
            int n_threads, float scale = 1.0f);

// MatMul of several matrices with the same input x (Q/K/V, gate/up): when they share the
// activation format, x is quantized once and all of them run in one parallel region (each thread
// its rows of each matrix); results equal separate MatMul calls.
void MatMulShared(const kernels::WeightView* const* ws, float* const* ys, const float* scales, int n_mats,
                  const float* x, int n_tokens, std::vector<uint8_t>* act, int n_threads);
// Grows `act` to the activation scratch the Team matmuls of n_tokens need for any of `ws` (before
// the parallel region: the Team forms do not allocate).
void ReserveActivations(const kernels::WeightView* const* ws, int n_mats, int n_tokens, std::vector<uint8_t>* act);
void MatMulTeam(const kernels::WeightView& w, const float* x, float* y, int n_tokens, uint8_t* act, float scale = 1.0f);
void MatMulSharedTeam(const kernels::WeightView* const* ws, float* const* ys, const float* scales, int n_mats,
                      const float* x, int n_tokens, uint8_t* act);

struct RopeParams {
  int n_rot = 0;             // rotated dims per head
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;
  bool neox = false;         // pairs (i, i + n_rot/2) instead of (2i, 2i+1)
  const float* freq_factors = nullptr;  // (n_rot/2) divisors of theta, or null
};
// Rotates `n_heads` heads of `head_dim` values at position `pos` in place.
void Rope(float* x, int n_heads, int head_dim, int pos, const RopeParams& p);

// e^x by polynomial (max error ~1.5 ulp); the approximation llama.cpp's vectorised SiLU uses.
float ExpfPoly(float x);
// out = silu(gate) * up (llama SwiGLU) over n_tokens rows of dim values.
void SwiGlu(const float* gate, const float* up, float* out, int64_t n_tokens, int64_t dim, int n_threads = 1);
void SwiGluTeam(const float* gate, const float* up, float* out, int64_t n_tokens, int64_t dim);
// out = relu(gate)^2 * up (BitNet b1.58's squared-ReLU gated FFN).
void ReluSqrGlu(const float* gate, const float* up, float* out, int64_t n, int n_threads = 1);
void ReluSqrGluTeam(const float* gate, const float* up, float* out, int64_t n);

}  // namespace trine::ops
