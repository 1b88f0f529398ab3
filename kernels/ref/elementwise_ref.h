// The scalar forms of the forward pass's element-wise steps: the definitions that src/runtime/ops.cc
// runs where no vector kernel is selected (TRINE_ISA=ref, a build without xsimd) and that every
// ElementwiseKernels member (kernels.h) equals bit for bit. Numerics follow llama.cpp's CPU backend
// where it matters for parity (see each function).
#pragma once

#include <cstdint>

namespace trine::kernels {

// e^x by polynomial (max error ~1.5 ulp); the approximation llama.cpp's vectorised SiLU uses.
float ExpfPolyRef(float x);
// out = gate / (1 + ExpfPolyRef(-gate)) * up over n values (SwiGLU's vector part).
void SwiGluVecRef(const float* gate, const float* up, float* out, int64_t n);
// 1 / sqrt(mean(x^2) + eps) of one row (RMSNorm).
float RmsScaleRef(const float* x, int64_t dim, float eps);
// out[k] = x[k] * scale * w[k].
void ScaleMulRef(const float* x, float scale, const float* w, float* out, int64_t n);
// out = relu(gate)^2 * up.
void ReluSqrGluRef(const float* gate, const float* up, float* out, int64_t n);
// RoPE's rotation of each head's pairs by (cs[i], sn[i]), i < half: (i, i + half) in neox mode,
// (2i, 2i + 1) otherwise.
void RotatePairsRef(float* x, int n_heads, int head_dim, int half, bool neox, const float* cs, const float* sn);

}  // namespace trine::kernels
