// Kernel dispatch: one table of function pointers per ISA level, chosen once per process from the
// CPU's features (or TRINE_ISA=ref|avx2|avx512|neon), and bound to each weight tensor at load
// time. Every entry has the GemmFn contract of kernels/ref/matmul_ref.h (GemmRef): results of
// the integer ternary kernels are bit-identical to the reference; float kernels are within
// rounding of it.
#pragma once

#include <string>

#include "core/status.h"
#include "ref/attention_ref.h"
#include "ref/matmul_ref.h"

namespace trine::kernels {

enum class Isa { kRef = 0, kAvx2 = 1, kAvx512 = 2, kNeon = 3 };
const char* IsaName(Isa isa);
bool IsaSupported(Isa isa);  // compiled in and the CPU has it

// A ternary kernel's strategy (the defaults per ISA are in kernels/README.md with numbers).
enum class TernaryVariant {
  kDefault,   // the fastest measured on this ISA
  kInt8Dot,   // VNNI vpdpbusd / maddubs / sdot on 2-bit codes x int8 activations
  kMulFree,   // masked add/sub of int16-widened activations under the +1/-1 bit-planes
  kLut,       // table lookup: per-token tables of activation partial sums indexed by weight groups
};
const char* TernaryVariantName(TernaryVariant v);  // "default", "int8dot", "mulfree", "lut"

// The variant a kDefault request means on `isa`: TRINE_TERNARY=int8dot|mulfree|lut when set (an
// unknown value is an error reported by TernaryVariantStatus), else the fastest measured there
// (kernels/README.md). A variant the ISA has no kernel for runs the int8-dot kernel (SelectGemm).
TernaryVariant ResolveTernaryVariant(TernaryVariant v, Isa isa);
Status TernaryVariantStatus();

// One row of activations quantized for a weight type (n a multiple of the block size: 256 for
// Q8_K, 32 for Q8_0), byte-identical to the scalar reference (QuantizeRowQ8_K, QuantizeRowQ8_0Act,
// QuantizeRowF16) for every input, NaN, inf and denormals included.
using QuantizeActFn = void (*)(const float* x, void* dst, int64_t n);

struct KernelTable {
  Isa isa = Isa::kRef;
  GemmFn tq2_int8dot = nullptr;  // TQ2_0 blocks x Q8_K activations
  GemmFn tq2_mulfree = nullptr;  // same contract, multiplication-free
  GemmFn f16 = nullptr;          // F16 weights x fp16-rounded activations
  GemmFn q8_0 = nullptr;         // Q8_0 x Q8_0
  GemmFn q4_0 = nullptr;         // Q4_0 x Q8_0
  GemmFn q4_K = nullptr;         // Q4_K x Q8_K
  GemmFn q6_K = nullptr;         // Q6_K x Q8_K
  GemmFn f32 = nullptr;          // F32 weights x fp32 activations
  GemmFn f32_act = nullptr;      // any weight x fp32 activations (WeightView::f32_activations)
  QuantizeActFn quantize_q8_K = nullptr;  // activations for TQ1_0/TQ2_0/Q4_K/Q6_K (QuantizeActivations)
  QuantizeActFn quantize_q8_0 = nullptr;  // activations for Q4_0/Q8_0
  QuantizeActFn quantize_f16 = nullptr;   // activations for F16
  // Row converters of load-time requantization, byte-identical to the scalar ones
  // (ActiveDequantizeRow / ActiveQuantizeRow).
  DequantizeRowFn dequantize_q6_K = nullptr;
  QuantizeRowFn quantize_q4_0 = nullptr;
  GemmFn tq2_lut = nullptr;  // ternary x q8_K by table lookup (same contract as tq2_int8dot)
};

// The table of `isa` (entries it lacks are null: callers fall back to GemmRef).
const KernelTable& GetKernelTable(Isa isa);

// The ISA in use: TRINE_ISA when set (an unsupported or unknown value is an error reported by
// ActiveIsaStatus and falls back to the best supported level), else the best supported level.
Isa ActiveIsa();
Status ActiveIsaStatus();

// AMX-INT8 (x86): AmxAvailable() when this build has the AMX kernel, the CPU has AMX-TILE +
// AMX-INT8 with OS-enabled tile state (and AVX-512 VBMI, which every AMX CPU has) and Linux
// granted the process the tile-data permission (cpu_features.h AmxPermitted). AmxEnabled():
// available and not turned off by TRINE_AMX=0; then SelectGemm's ternary int8-dot kernel on avx512
// is GemmTq2Amx, which runs TDPBSUD tiles on the TQ2_0 / TQ1_0 x16 layouts for n_tokens >=
// AmxMinTokens() and the AVX-512 kernel otherwise (decode, short batches, plain rows). Bit-identical to GemmRef like every integer kernel. Calling GemmTq2Amx
// needs AmxAvailable().
bool AmxAvailable();
bool AmxEnabled();
int AmxMinTokens();
void GemmTq2Amx(const WeightView& w, const uint8_t* xq, size_t act_stride, int n_tokens, float* y, int64_t ldy,
                int64_t r0, int64_t r1, float scale);

// The kernel for a weight of this type on `isa` (TQ1_0 and I2_S use the TQ2_0 entries: they are
// repacked to TQ2_0 at load time, except TQ1_0 in the x16 layout, which the AVX-512 entries read
// in place). Returns GemmRef when the ISA has no specialised kernel;
// *name gets a description such as "tq2_0 x q8_K avx512 vpdpbusd".
GemmFn SelectGemm(TypeId type, Isa isa, TernaryVariant variant, std::string* name);

// The row converters a load-time requantization (Model::SetOutputType) uses for `from` -> fp32 ->
// `to`: the active ISA's vector versions where it has them, else the types' scalar ones (the
// bytes are the same either way). Null where the type has none.
DequantizeRowFn ActiveDequantizeRow(TypeId from);
QuantizeRowFn ActiveQuantizeRow(TypeId to);

// The kernel for a weight of this type with f32_activations on: the ISA's tiled fp32 kernel, or
// GemmDequantF32 (the scalar reference) on the ref ISA / where it has none. *name as SelectGemm.
GemmFn SelectGemmF32Act(TypeId type, Isa isa, std::string* name);

// oneDNN's f32 matmul as a GemmFn for F32 weights x fp32 activations (kernels/onednn/), where this
// build has oneDNN: OneDnnAvailable() says so. SelectGemm picks it for F32 weights on the SIMD ISAs
// only with TRINE_ONEDNN=1: within float rounding of GemmRef, but its summation order depends on
// the token count and row slice, so results change with threads and batching (off by default).
bool OneDnnAvailable();
void GemmF32OneDnn(const WeightView& w, const uint8_t* xq, size_t act_stride, int n_tokens, float* y, int64_t ldy,
                   int64_t r0, int64_t r1, float scale);

// The fp16-cache attention kernel of `isa` (AttnF16Ref when it has none).
AttnF16Fn SelectAttnF16(Isa isa);
// The attention kernel over F16 / Q8_0 / Q4_0 K and V rows of `isa` (AttnRef when it has none).
AttnFn SelectAttn(Isa isa);
// The grouped attention kernel of `isa` and the number of query heads it walks at once over K and
// V rows of these types and head size (1: no grouped kernel there; call SelectAttn's per head).
AttnGroupFn SelectAttnGroup(Isa isa);
int AttnGroupWidth(Isa isa, KvRowType k, KvRowType v, int head_dim);

// SwiGLU over n values (a multiple of 16) with ops::SwiGlu's exact numerics (its ExpfPoly part):
// out = gate / (1 + e^-gate) * up (SwiGluVecRef).
using SwiGluVecFn = void (*)(const float* gate, const float* up, float* out, int64_t n);

// The element-wise steps of the forward pass in vectors, each bit-identical to its scalar form in
// src/runtime/ops.cc (which runs where a member is null: TRINE_ISA=ref, a build without xsimd).
// One source, kernels/simd/elementwise_xsimd.h, compiled per ISA (kernels/README.md, "xsimd for
// element-wise operations").
struct ElementwiseKernels {
  SwiGluVecFn swiglu = nullptr;
  // RMSNorm: 1 / sqrt(mean(x^2) + eps) of a row, and out[k] = x[k] * scale * w[k].
  float (*rms_scale)(const float* x, int64_t dim, float eps) = nullptr;
  void (*scale_mul)(const float* x, float scale, const float* w, float* out, int64_t n) = nullptr;
  // out = relu(gate)^2 * up.
  void (*relu_sqr_glu)(const float* gate, const float* up, float* out, int64_t n) = nullptr;
  // RoPE rotations of n_heads heads: neox pairs (i, i + half) by cs/sn; normal-mode adjacent
  // pairs by m1 = (cs[i], sn[i]) and m2 = (sn[i], cs[i]) interleaved (2 * half values each).
  void (*rope_neox)(float* x, int n_heads, int head_dim, int half, const float* cs, const float* sn) = nullptr;
  void (*rope_pairs)(float* x, int n_heads, int head_dim, int half, const float* m1, const float* m2) = nullptr;
};
const ElementwiseKernels& SelectElementwise(Isa isa);

}  // namespace trine::kernels
