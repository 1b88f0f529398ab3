// Traits table, type-name parsing, on-disk id mapping and tensor-level (de)quantization.
#include "tensor/dtype.h"

#include <cctype>
#include <cstring>
#include <limits>

#include "tensor/quantize_ref.h"

namespace trine {
namespace {

constexpr TypeTraits kTraits[] = {
    {"f32", 0, 1, 4, false, false, DequantizeRowF32, QuantizeRowF32},
    {"f16", 1, 1, 2, false, false, DequantizeRowF16, QuantizeRowF16},
    {"bf16", 30, 1, 2, false, false, DequantizeRowBF16, QuantizeRowBF16},
    {"q8_0", 8, kQK8_0, sizeof(BlockQ8_0), true, false, DequantizeRowQ8_0, QuantizeRowQ8_0},
    {"q4_0", 2, kQK4_0, sizeof(BlockQ4_0), true, false, DequantizeRowQ4_0, QuantizeRowQ4_0},
    {"q4_K", 12, kQK_K, sizeof(BlockQ4_K), true, false, DequantizeRowQ4_K, QuantizeRowQ4_K},
    {"q6_K", 14, kQK_K, sizeof(BlockQ6_K), true, false, DequantizeRowQ6_K, QuantizeRowQ6_K},
    {"q8_K", 15, kQK_K, sizeof(BlockQ8_K), true, false, DequantizeRowQ8_K, QuantizeRowQ8_K},
    {"tq1_0", 34, kQK_K, sizeof(BlockTQ1_0), true, false, DequantizeRowTQ1_0, QuantizeRowTQ1_0},
    {"tq2_0", 35, kQK_K, sizeof(BlockTQ2_0), true, false, DequantizeRowTQ2_0, QuantizeRowTQ2_0},
    {"i2_s", 36, kQKI2S, sizeof(BlockI2S), true, true, nullptr, nullptr},
};
static_assert(sizeof(kTraits) / sizeof(kTraits[0]) == static_cast<size_t>(TypeId::kCount),
              "one traits entry per TypeId");

bool IsBitnetCppArch(const std::string& arch) {
  return arch == "bitnet-b1.58" || arch == "bitnet-25";
}

}  // namespace

const TypeTraits& GetTypeTraits(TypeId t) { return kTraits[static_cast<int>(t)]; }

bool ParseTypeName(const std::string& name, TypeId* out) {
  std::string lower;
  for (char c : name) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (int i = 0; i < static_cast<int>(TypeId::kCount); ++i) {
    std::string n = kTraits[i].name;
    for (char& c : n) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (n == lower) {
      *out = static_cast<TypeId>(i);
      return true;
    }
  }
  return false;
}

double BitsPerWeight(TypeId t) {
  const TypeTraits& tr = GetTypeTraits(t);
  return 8.0 * static_cast<double>(tr.block_bytes) / static_cast<double>(tr.block_elems);
}

bool TypeFromGgmlId(uint32_t ggml_id, const std::string& arch, TypeId* out) {
  if (ggml_id == 36) {
    if (!IsBitnetCppArch(arch)) return false;
    *out = TypeId::kI2_S;
    return true;
  }
  for (int i = 0; i < static_cast<int>(TypeId::kCount); ++i) {
    if (kTraits[i].ggml_id == ggml_id && static_cast<TypeId>(i) != TypeId::kI2_S) {
      *out = static_cast<TypeId>(i);
      return true;
    }
  }
  return false;
}

bool TensorBytes(TypeId t, int64_t n_elems, uint64_t* bytes) {
  const TypeTraits& tr = GetTypeTraits(t);
  if (n_elems < 0 || n_elems % tr.block_elems != 0) return false;
  const uint64_t blocks = static_cast<uint64_t>(n_elems / tr.block_elems);
  const uint64_t per = static_cast<uint64_t>(tr.block_bytes);
  if (blocks > std::numeric_limits<uint64_t>::max() / per) return false;
  uint64_t total = blocks * per;
  if (tr.per_tensor_scale) total += kI2STailBytes;
  *bytes = total;
  return true;
}

Status DequantizeTensor(TypeId t, const void* src, size_t src_bytes, int64_t n_elems, float* dst) {
  uint64_t need = 0;
  if (!TensorBytes(t, n_elems, &need)) {
    return InvalidArgument(std::string("dequantize: ") + TypeName(t) + ": " +
                           std::to_string(n_elems) + " elements is not a whole number of blocks");
  }
  if (need > src_bytes) return InvalidArgument("dequantize: source buffer too small");
  const TypeTraits& tr = GetTypeTraits(t);
  if (t == TypeId::kI2_S) {
    const uint8_t* codes = static_cast<const uint8_t*>(src);
    float scale;
    std::memcpy(&scale, codes + n_elems / 4, 4);
    DecodeI2SCodes(codes, dst, n_elems);
    for (int64_t i = 0; i < n_elems; ++i) dst[i] *= scale;
    return Status::Ok();
  }
  tr.dequantize_row(src, dst, n_elems);
  return Status::Ok();
}

Status QuantizeTensor(TypeId t, const float* src, int64_t n_elems, int64_t row_elems, void* dst) {
  const TypeTraits& tr = GetTypeTraits(t);
  if (row_elems <= 0 || n_elems % row_elems != 0 || row_elems % tr.block_elems != 0) {
    return InvalidArgument(std::string("quantize: ") + TypeName(t) + " needs rows that are a multiple of " +
                           std::to_string(tr.block_elems) + " elements, got " + std::to_string(row_elems));
  }
  if (t == TypeId::kI2_S) {
    QuantizeI2S(src, static_cast<uint8_t*>(dst), n_elems);
    return Status::Ok();
  }
  const int64_t rows = n_elems / row_elems;
  const size_t row_bytes = static_cast<size_t>(row_elems / tr.block_elems * tr.block_bytes);
  for (int64_t r = 0; r < rows; ++r) {
    tr.quantize_row(src + r * row_elems, static_cast<uint8_t*>(dst) + static_cast<size_t>(r) * row_bytes,
                    row_elems);
  }
  return Status::Ok();
}

}  // namespace trine
