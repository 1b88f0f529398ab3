// Scalar reference quantize / dequantize for every format. These are the specification the SIMD
// kernels are tested against, and byte-compatible with llama.cpp's reference quantizers.
#pragma once

#include <cstdint>

#include "tensor/blocks.h"

namespace trine {

void DequantizeRowF32(const void* src, float* dst, int64_t n);
void DequantizeRowF16(const void* src, float* dst, int64_t n);
void DequantizeRowBF16(const void* src, float* dst, int64_t n);
void DequantizeRowQ8_0(const void* src, float* dst, int64_t n);
void DequantizeRowQ4_0(const void* src, float* dst, int64_t n);
void DequantizeRowQ4_K(const void* src, float* dst, int64_t n);
void DequantizeRowQ6_K(const void* src, float* dst, int64_t n);
void DequantizeRowQ8_K(const void* src, float* dst, int64_t n);
void DequantizeRowTQ1_0(const void* src, float* dst, int64_t n);
void DequantizeRowTQ2_0(const void* src, float* dst, int64_t n);
// I2_S codes only: writes c - 1 in {-1, 0, +1} (code 3 -> 0); the caller applies the tensor scale.
void DecodeI2SCodes(const uint8_t* src, float* dst, int64_t n);

void QuantizeRowF32(const float* src, void* dst, int64_t n);
void QuantizeRowF16(const float* src, void* dst, int64_t n);
void QuantizeRowBF16(const float* src, void* dst, int64_t n);
void QuantizeRowQ8_0(const float* src, void* dst, int64_t n);
void QuantizeRowQ4_0(const float* src, void* dst, int64_t n);
void QuantizeRowQ4_K(const float* src, void* dst, int64_t n);
void QuantizeRowQ6_K(const float* src, void* dst, int64_t n);
void QuantizeRowQ8_K(const float* src, void* dst, int64_t n);
void QuantizeRowTQ1_0(const float* src, void* dst, int64_t n);
void QuantizeRowTQ2_0(const float* src, void* dst, int64_t n);
// I2_S for a whole tensor: scale = max|w|, codes from sign (as bitnet.cpp's quantize_i2_s);
// writes n/4 code bytes, the fp32 scale, and 28 zero bytes.
void QuantizeI2S(const float* src, uint8_t* dst, int64_t n);

// Round to nearest, ties to even, as ggml's nearest_int (the +12582912.f trick) for |x| < 2^22.
int NearestInt(float x);

}  // namespace trine
