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

// The (int8_t) cast of a float as it compiles on this target, made defined for every input (the
// cast is undefined behaviour for NaN and out-of-range values, which inf activations reach): the
// target's 32-bit truncating conversion (x86 cvttss2si: INT_MIN for NaN and out-of-range values;
// AArch64 fcvtzs: saturating, NaN to 0), then the low byte. The SIMD quantizers use the same
// instructions, so references and kernels agree byte for byte on NaN and inf too.
inline int8_t TruncToInt8(float v) {
  int32_t i;
#if defined(__aarch64__)
  if (v != v) {
    i = 0;
  } else if (v >= 2147483648.0f) {
    i = INT32_MAX;
  } else if (v < -2147483648.0f) {
    i = INT32_MIN;
  } else {
    i = static_cast<int32_t>(v);
  }
#else
  i = (v >= -2147483648.0f && v < 2147483648.0f) ? static_cast<int32_t>(v) : INT32_MIN;
#endif
  return static_cast<int8_t>(static_cast<uint8_t>(static_cast<uint32_t>(i) & 0xFFu));
}

}  // namespace trine
