// Tensor element types: the internal TypeId enum, its traits table, and the mapping from on-disk
// ggml type ids (which depends on the file: bitnet.cpp reuses id 36 for I2_S).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/status.h"

namespace trine {

enum class TypeId : uint8_t {
  kF32,
  kF16,
  kBF16,
  kQ8_0,
  kQ4_0,
  kQ4_K,
  kQ6_K,
  kQ8_K,
  kTQ1_0,
  kTQ2_0,
  kI2_S,
  kCount,
};

// Converts `n_elems` elements of a row (a whole number of blocks) to fp32.
using DequantizeRowFn = void (*)(const void* src, float* dst, int64_t n_elems);
// Quantizes `n_elems` fp32 values (a whole number of blocks) into blocks at dst.
using QuantizeRowFn = void (*)(const float* src, void* dst, int64_t n_elems);

struct TypeTraits {
  const char* name;         // lower-case, as llama.cpp prints it ("tq2_0")
  uint32_t ggml_id;         // on-disk id in the files that use it
  int64_t block_elems;      // elements per block
  int64_t block_bytes;      // bytes per block
  bool quantized;           // false for F32/F16/BF16
  bool per_tensor_scale;    // I2_S: one fp32 scale after all codes, 32-byte tail
  DequantizeRowFn dequantize_row;  // null when the type cannot be read row by row (I2_S)
  QuantizeRowFn quantize_row;      // null when a tensor-level quantizer is needed (I2_S)
};

const TypeTraits& GetTypeTraits(TypeId t);
inline const char* TypeName(TypeId t) { return GetTypeTraits(t).name; }
// Parses "f16", "TQ2_0", "q4_k" ... (case-insensitive). Returns false when unknown.
bool ParseTypeName(const std::string& name, TypeId* out);

// Bits per weight including block scales (I2_S: 2, not counting the 32-byte tensor tail).
double BitsPerWeight(TypeId t);

// Resolves an on-disk ggml type id. `arch` is general.architecture: id 36 means I2_S only in
// bitnet.cpp's files (bitnet-b1.58, bitnet-25); upstream reserves it.
bool TypeFromGgmlId(uint32_t ggml_id, const std::string& arch, TypeId* out);

// Bytes a tensor of `n_elems` elements takes, or false on overflow or when n_elems is not a whole
// number of blocks.
bool TensorBytes(TypeId t, int64_t n_elems, uint64_t* bytes);

// Dequantizes a whole tensor (any type, I2_S included) of n_elems into dst.
Status DequantizeTensor(TypeId t, const void* src, size_t src_bytes, int64_t n_elems, float* dst);
// Quantizes a whole tensor (any type, I2_S included); dst must hold TensorBytes(t, n_elems).
Status QuantizeTensor(TypeId t, const float* src, int64_t n_elems, int64_t row_elems, void* dst);

}  // namespace trine
