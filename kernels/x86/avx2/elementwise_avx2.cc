// AVX2 + FMA instance of the xsimd element-wise kernels (kernels/simd/elementwise_xsimd.h).
#include "simd/elementwise_xsimd.h"

namespace trine::kernels {

extern const ElementwiseKernels kElementwiseAvx2;
const ElementwiseKernels kElementwiseAvx2 = simd::Table<xsimd::fma3<xsimd::avx2>>();

}  // namespace trine::kernels
