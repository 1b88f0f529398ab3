// Attention of one query head over an fp16 KV cache, with llama.cpp's flash-attention numerics for
// short batches: Q rounded to fp16, K.Q summed as its AVX-512 vec_dot_f16 does (4 x 16 fp32 lanes
// with fused multiply-adds per 64 elements, a fixed reduction tree, the tail in double), an online
// softmax in fp32 (expf), and V.softmax accumulated in fp16 storage with fused multiply-adds.
// SIMD versions must give the same bits.
#pragma once

#include <cstddef>
#include <cstdint>

namespace trine::kernels {

// q: head_dim fp16-representable floats. k, v: the head's values at position 0; position p is at
// k + p * stride. Attends to positions 0 .. n_kv-1; writes head_dim floats to out.
using AttnF16Fn = void (*)(const float* q, const uint16_t* k, const uint16_t* v, size_t stride, int n_kv,
                           int head_dim, float scale, float* out);

void AttnF16Ref(const float* q, const uint16_t* k, const uint16_t* v, size_t stride, int n_kv, int head_dim,
                float scale, float* out);

// The K.Q dot product above, on fp32 copies of fp16 values.
float DotF16Order(const float* x, const float* y, int n);

}  // namespace trine::kernels
