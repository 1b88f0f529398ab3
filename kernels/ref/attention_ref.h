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

// ---- Attention over a KV cache whose K and V rows are each F16, Q8_0 or Q4_0 (llama.cpp's
// -ctk / -ctv), with llama.cpp's CPU flash-attention numerics per cache type:
//  - K F16: Q rounded to fp16 and K.Q as DotF16Order (exactly AttnF16Ref's scores).
//  - K Q8_0 / Q4_0: Q quantized to Q8_0 blocks (QuantizeRowQ8_0), then per 32-element block the
//    exact integer dot sumi, and s = sum over blocks, in block order, of float(sumi) * (dk * dq)
//    in fp32 (ggml's vec_dot_q8_0_q8_0 / vec_dot_q4_0_q8_0 reference order).
//  - V F16: the fp16 accumulator of AttnF16Ref.
//  - V Q8_0 / Q4_0: an fp32 accumulator (ggml's VKQ32 path): on a new maximum acc *= ms, then
//    acc = fma(q * d, vs, acc) with each value dequantized as q * d ((nibble - 8) * d for Q4_0).
//  The softmax sum is fma(sum, ms, vs) and the output acc * (1 / sum), as in AttnF16Ref.
// Quantized rows need head_dim % 32 == 0 (blocks never straddle heads); SIMD versions must give
// the reference's bits.
enum class KvRowType { kF16 = 0, kQ8_0 = 1, kQ4_0 = 2 };

// A paged cache keeps each sequence's positions in blocks of kKvBlockPositions rows; a block table
// (one entry per block of the sequence) says where each block lies in the pool.
constexpr int kKvBlockShift = 4;
constexpr int kKvBlockPositions = 1 << kKvBlockShift;

// One head of one layer of a KV cache. Contiguous (blocks == null): `data` points at the head's
// values (F16) or first block (Q8_0/Q4_0) at position 0, and position p starts p * `stride` bytes
// further. Paged: position p is row p % kKvBlockPositions (`stride` bytes apart) of pool block
// blocks[p / kKvBlockPositions], and pool block b starts b * `block_bytes` bytes after `data`.
struct KvHead {
  KvRowType type = KvRowType::kF16;
  const uint8_t* data = nullptr;
  size_t stride = 0;
  const int32_t* blocks = nullptr;
  size_t block_bytes = 0;
};

// The first byte of position p's row of head h.
inline const uint8_t* KvRowAt(const KvHead& h, int p) {
  if (h.blocks == nullptr) return h.data + static_cast<size_t>(p) * h.stride;
  return h.data + static_cast<size_t>(h.blocks[p >> kKvBlockShift]) * h.block_bytes +
         static_cast<size_t>(p & (kKvBlockPositions - 1)) * h.stride;
}

// q: head_dim fp32 values (unrounded: the kernel rounds or quantizes them as above).
using AttnFn = void (*)(const float* q, const KvHead& k, const KvHead& v, int n_kv, int head_dim, float scale,
                        float* out);

void AttnRef(const float* q, const KvHead& k, const KvHead& v, int n_kv, int head_dim, float scale, float* out);

// n_q query heads that share one KV head (GQA), back to back in q and out (head_dim apart): the
// same bits as n_q AttnFn calls.
using AttnGroupFn = void (*)(const float* q, int n_q, const KvHead& k, const KvHead& v, int n_kv, int head_dim,
                             float scale, float* out);

// Bytes of `n` values of a row of this type (n % 32 == 0 for the block types).
size_t KvRowBytes(KvRowType type, int n);

}  // namespace trine::kernels
