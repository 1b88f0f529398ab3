// NEON (AArch64) instance of the xsimd element-wise kernels (kernels/simd/elementwise_xsimd.h).
#include "simd/elementwise_xsimd.h"

namespace trine::kernels {

extern const ElementwiseKernels kElementwiseNeon;
const ElementwiseKernels kElementwiseNeon = simd::Table<xsimd::neon64>();

}  // namespace trine::kernels
