// AVX-512 instance of the xsimd element-wise kernels (kernels/simd/elementwise_xsimd.h).
#include "simd/elementwise_xsimd.h"

namespace trine::kernels {

extern const ElementwiseKernels kElementwiseAvx512;
const ElementwiseKernels kElementwiseAvx512 = simd::Table<xsimd::avx512f>();

}  // namespace trine::kernels
