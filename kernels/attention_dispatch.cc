// Selection of the fp16-cache attention kernel per ISA (separate from the GEMM table so the two
// families can grow independently).
#include "kernels.h"
#include "ref/attention_ref.h"

namespace trine::kernels {

#if defined(TRINE_HAVE_AVX2)
void AttnAvx2(const float* q, const KvHead& k, const KvHead& v, int n_kv, int head_dim, float scale, float* out);
#endif
#if defined(TRINE_HAVE_AVX512)
void AttnF16Avx512(const float* q, const uint16_t* k, const uint16_t* v, size_t stride, int n_kv, int head_dim,
                   float scale, float* out);
void AttnAvx512(const float* q, const KvHead& k, const KvHead& v, int n_kv, int head_dim, float scale, float* out);
void AttnGroupAvx512(const float* q, int n_q, const KvHead& k, const KvHead& v, int n_kv, int head_dim, float scale,
                     float* out);
int AttnGroupWidthAvx512(KvRowType k, KvRowType v, int head_dim);
#endif

#if defined(TRINE_HAVE_XSIMD_AVX2)
extern const ElementwiseKernels kElementwiseAvx2;
#endif
#if defined(TRINE_HAVE_XSIMD_AVX512)
extern const ElementwiseKernels kElementwiseAvx512;
#endif
#if defined(TRINE_HAVE_XSIMD_NEON)
extern const ElementwiseKernels kElementwiseNeon;
#endif

const ElementwiseKernels& SelectElementwise(Isa isa) {
  static const ElementwiseKernels kNone;
#if defined(TRINE_HAVE_XSIMD_AVX512)
  if (isa == Isa::kAvx512) return kElementwiseAvx512;
#endif
#if defined(TRINE_HAVE_XSIMD_AVX2)
  if (isa == Isa::kAvx2) return kElementwiseAvx2;
#endif
#if defined(TRINE_HAVE_XSIMD_NEON)
  if (isa == Isa::kNeon) return kElementwiseNeon;
#endif
  (void)isa;
  return kNone;
}

AttnF16Fn SelectAttnF16(Isa isa) {
#if defined(TRINE_HAVE_AVX512)
  if (isa == Isa::kAvx512) return AttnF16Avx512;
#endif
  (void)isa;
  return AttnF16Ref;
}

}  // namespace trine::kernels

namespace trine::kernels {

AttnFn SelectAttn(Isa isa) {
#if defined(TRINE_HAVE_AVX512)
  if (isa == Isa::kAvx512) return AttnAvx512;
#endif
#if defined(TRINE_HAVE_AVX2)
  if (isa == Isa::kAvx2) return AttnAvx2;
#endif
  (void)isa;
  return AttnRef;
}

AttnGroupFn SelectAttnGroup(Isa isa) {
#if defined(TRINE_HAVE_AVX512)
  if (isa == Isa::kAvx512) return AttnGroupAvx512;
#endif
  (void)isa;
  return nullptr;
}

int AttnGroupWidth(Isa isa, KvRowType k, KvRowType v, int head_dim) {
#if defined(TRINE_HAVE_AVX512)
  if (isa == Isa::kAvx512) return AttnGroupWidthAvx512(k, v, head_dim);
#endif
  (void)isa, (void)k, (void)v, (void)head_dim;
  return 1;
}

}  // namespace trine::kernels
