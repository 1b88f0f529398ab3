// Scalar reference matrix-vector products over every weight format, with activations quantized
// the way llama.cpp's CPU backend quantizes them for that weight type (its vec_dot_type): Q8_K for
// TQ1_0/TQ2_0/Q4_K/Q6_K, Q8_0 for Q4_0/Q8_0, fp16 for F16, bf16 for BF16, fp32 for F32, and int8
// per row (bitnet.cpp) for I2_S. Integer block sums are exact; only the float accumulation order
// can differ from llama.cpp. This is the specification the SIMD kernels are tested against.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tensor/dtype.h"

namespace trine::kernels {

struct WeightView;

// Batched matmul kernel contract: for rows [r0, r1) and n_tokens activation vectors (token t at
// xq + t * act_stride, from QuantizeActivations), y[t * ldy + r] = dot(row r, token t) *
// w.tensor_scale * scale.
using GemmFn = void (*)(const WeightView& w, const uint8_t* xq, size_t act_stride, int n_tokens, float* y,
                        int64_t ldy, int64_t r0, int64_t r1, float scale);

// A weight matrix as the kernels see it: `rows` outputs, each `cols` inputs (cols = ne[0]).
// Ternary weights are TQ2_0 blocks here (TQ1_0 and I2_S are repacked at load time), or TQ1_0 in
// the x16 layout (read in place where the CPU has AVX-512 VBMI).
struct WeightView {
  TypeId type = TypeId::kF32;
  int64_t rows = 0;
  int64_t cols = 0;
  const uint8_t* data = nullptr;
  size_t row_bytes = 0;   // bytes of one row (I2_S: cols/4; rows share one tensor scale)
  float tensor_scale = 1.0f;  // I2_S per-tensor scale, 1 otherwise
  GemmFn gemm = nullptr;      // kernel bound at load time (null: GemmRef)
  // Activation precision: false = quantized as llama.cpp does for this weight type (Q8_K, Q8_0,
  // fp16); true = kept in fp32 against dequantized weights (the "16/32-bit activation" rung the
  // profiler can choose per layer; GemmDequantF32 implements it).
  bool f32_activations = false;
  // In-memory layout. 0: the file's row-major blocks (row r at data + r * row_bytes). 16: rows
  // interleaved in groups of 16 for the AVX-512 and AVX2 kernels (TQ1_0, TQ2_0, Q4_0, Q4_K and Q6_K; built
  // at load time by InterleaveX16, kernels/repack.h): group g (rows 16g..16g+15, zero padding past
  // `rows`) starts at data + g * group_bytes (64-byte aligned) and holds its blocks in pairs
  // (X16ScalesOffset / X16CodesOffset below): 64 bytes with the 16 fp16 scales of block 2c and of
  // block 2c + 1 (32 each), then each block's quant bytes qs as Q/4 lines of 64 bytes (Q = 64 for
  // TQ2_0, 52 for TQ1_0 (qs then qh), 16 for Q4_0, 144 for Q4_K (the whole block, d and dmin
  // included), 208 for Q6_K): line k holds in dword lane i the bytes qs[4k .. 4k+3] of row 16g+i's
  // block b. The group is read front to back as one stream: with all scales in a header ahead of
  // the codes, the two interleaved streams per group left the hardware prefetchers behind (Q4_0
  // decode on Zen 5 read 21-25 GB/s of 32-38; kernels/README.md, "x16 layout"). row_bytes stays
  // the file's row size.
  //
  // kInterleaveLut (TQ2_0 only; the lookup-table kernels on AVX2 and NEON, built at load time by
  // InterleaveLut): group g (rows 16g..16g+15, zero rows past `rows`) starts at data + g *
  // group_bytes (32-byte aligned) and holds its blocks in order, each LutBlockBytes: the 16 rows'
  // fp16 scales (32 bytes), then 64 lines of 16 bytes where byte i of line j is qs[j] of row 16g+i.
  // The file's code bytes are kept as they are (code 3 included): a byte's low nibble indexes the
  // 16-entry table of its two elements n = 0, 1 and its high nibble that of n = 2, 3, so one
  // 16-byte line is one vpshufb / tbl lookup per nibble for 16 rows (kernels/README.md, "Ternary
  // lookup-table kernels").
  int interleave = 0;
  size_t group_bytes = 0;
};

// WeightView::interleave of the lookup-table layout (a value apart from x16's 16: both have
// 16-row groups but different bytes).
constexpr int kInterleaveLut = -16;
// Bytes of one block of one 16-row group in the lookup-table layout, and the offsets of block b's
// scales and code lines in a group.
constexpr size_t kLutBlockBytes = 32 + 64 * 16;
inline size_t LutScalesOffset(int64_t b) { return static_cast<size_t>(b) * kLutBlockBytes; }
inline size_t LutCodesOffset(int64_t b) { return static_cast<size_t>(b) * kLutBlockBytes + 32; }

// Byte offsets inside an x16 group of block b's 16 fp16 scales and of its code lines, and the
// group's size, for blocks of `code_bytes` bytes of lines (a multiple of 64). Blocks 2c and 2c + 1
// share one 64-byte scale line ahead of their codes; a last odd block's scale line is half padding.
inline size_t X16ChunkBytes(size_t code_bytes) { return 64 + 2 * code_bytes; }
inline size_t X16ScalesOffset(int64_t b, size_t code_bytes) {
  return static_cast<size_t>(b >> 1) * X16ChunkBytes(code_bytes) + 32 * static_cast<size_t>(b & 1);
}
inline size_t X16CodesOffset(int64_t b, size_t code_bytes) {
  return static_cast<size_t>(b >> 1) * X16ChunkBytes(code_bytes) + 64 + static_cast<size_t>(b & 1) * code_bytes;
}
inline size_t X16GroupBytes(int64_t nb, size_t code_bytes) {
  return static_cast<size_t>((nb + 1) / 2) * 64 + static_cast<size_t>(nb) * code_bytes;
}
// Where the fp16 scale and the quant bytes sit in a block of a type with an x16 layout: the
// qs_bytes at qs_off are the block's code lines (line k: bytes 4k..4k+3 of the 16 rows), d comes
// from the group's scale lines (Q4_K's code lines hold it too).
struct X16Format {
  size_t block_bytes, d_off, qs_off, qs_bytes;
};
X16Format X16FormatOf(TypeId type);
// Elements per block of a type with an x16 layout (TQ1_0, TQ2_0, Q4_K: 256, Q4_0: 32), 0 for other types.
int64_t X16BlockElems(TypeId type);
// Row r of `w` in the file's row-major layout: w.data + r * row_bytes, or (interleaved layouts)
// the row gathered into `scratch` (at least row_bytes bytes).
const uint8_t* RowData(const WeightView& w, int64_t r, uint8_t* scratch);

// Activation bytes / quantizer / kernel for a bound weight, honouring f32_activations.
size_t ActivationBytesFor(const WeightView& w);
void QuantizeActivationsFor(const WeightView& w, const float* x, void* dst);

// Elements per independently quantized activation block for `w` (Q8_K: 256, Q8_0: 32), or 0 when
// the vector is quantized as a whole (I2_S) or not block-wise: a block range of a vector can be
// quantized on its own (QuantizeActivations on the sub-range) with the same bytes.
int64_t ActivationBlockElems(const WeightView& w);
// Bytes QuantizeActivations writes for one input vector of `cols` elements.
size_t ActivationBytes(TypeId weight_type, int64_t cols);
// Quantizes one input vector for dot products with rows of `weight_type`, with the active ISA's
// quantizer (KernelTable::quantize_*; the same bytes as QuantizeActivationsRef).
void QuantizeActivations(TypeId weight_type, const float* x, int64_t cols, void* dst);
// The scalar reference of QuantizeActivations (TRINE_ISA=ref runs it).
void QuantizeActivationsRef(TypeId weight_type, const float* x, int64_t cols, void* dst);
// Q8_0 activations as llama.cpp's AVX quantize_row_q8_0 (the scalar reference of
// KernelTable::quantize_q8_0): per block of 32, id = 127/amax, q = round-half-even(x * id).
void QuantizeRowQ8_0Act(const float* x, void* dst, int64_t n);
// dst[r - r0] = dot(row r, x) for r in [r0, r1); xq from QuantizeActivations.
void GemvRef(const WeightView& w, const void* xq, float* dst, int64_t r0, int64_t r1);
// Dot of one row (row index r) with quantized activations.
float DotRowRef(const WeightView& w, int64_t r, const void* xq);

// GemmFn for f32 activations on any weight type: each row is dequantized to fp32 once and dotted
// with every token's fp32 activations (sequential fp32 sums). Scale factors as GemmRef.
void GemmDequantF32(const WeightView& w, const uint8_t* xq, size_t act_stride, int n_tokens, float* y, int64_t ldy,
                    int64_t r0, int64_t r1, float scale);

// Scalar reference GemmFn: each row is unpacked once and applied to every token; per element the
// result equals DotRowRef(w, r, x) * w.tensor_scale * scale.
void GemmRef(const WeightView& w, const uint8_t* xq, size_t act_stride, int n_tokens, float* y, int64_t ldy,
             int64_t r0, int64_t r1, float scale);

}  // namespace trine::kernels
