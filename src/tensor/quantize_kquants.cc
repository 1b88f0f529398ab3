// Q4_K and Q6_K reference quantizers (llama.cpp's make_qkx2_quants / make_qx_quants algorithms).
// TODO(#2): replace this placeholder with the full search-based quantizers.
#include <cstring>

#include "tensor/quantize_ref.h"

namespace trine {

void QuantizeRowQ4_K(const float* src, void* dst, int64_t n) {
  std::memset(dst, 0, static_cast<size_t>(n / kQK_K) * sizeof(BlockQ4_K));
  (void)src;
}
void QuantizeRowQ6_K(const float* src, void* dst, int64_t n) {
  std::memset(dst, 0, static_cast<size_t>(n / kQK_K) * sizeof(BlockQ6_K));
  (void)src;
}

}  // namespace trine
