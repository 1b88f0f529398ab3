// ISA selection and the per-ISA kernel tables.
#include "kernels.h"

#include <cstdlib>
#include <cstring>

#include "cpu_features.h"
#include "repack.h"

namespace trine::kernels {

// Tables defined in the per-ISA translation units (compiled with their own flags).
#if defined(TRINE_HAVE_AVX512)
const KernelTable& Avx512Table();
#endif
#if defined(TRINE_HAVE_AVX2)
const KernelTable& Avx2Table();
#endif
#if defined(TRINE_HAVE_NEON)
const KernelTable& NeonTable();
#endif

namespace {

const KernelTable& RefTable() {
  static const KernelTable t{Isa::kRef, GemmRef, nullptr, GemmRef, GemmRef, GemmRef, GemmRef, GemmRef, GemmRef,
                             GemmDequantF32};
  return t;
}

Isa BestIsa() {
  if (IsaSupported(Isa::kAvx512)) return Isa::kAvx512;
  if (IsaSupported(Isa::kAvx2)) return Isa::kAvx2;
  if (IsaSupported(Isa::kNeon)) return Isa::kNeon;
  return Isa::kRef;
}

struct Selection {
  Isa isa;
  Status status;
};

Selection Select() {
  const char* env = std::getenv("TRINE_ISA");
  if (env == nullptr || *env == '\0') return {BestIsa(), Status::Ok()};
  for (Isa i : {Isa::kRef, Isa::kAvx2, Isa::kAvx512, Isa::kNeon}) {
    if (std::strcmp(env, IsaName(i)) == 0) {
      if (IsaSupported(i)) return {i, Status::Ok()};
      return {BestIsa(), Unsupported(std::string("TRINE_ISA=") + env + ": this CPU or build lacks it")};
    }
  }
  return {BestIsa(), InvalidArgument(std::string("TRINE_ISA=") + env + " is not one of ref, avx2, avx512, neon")};
}

const Selection& GetSelection() {
  static const Selection s = Select();
  return s;
}

#if defined(TRINE_HAVE_ONEDNN)
// oneDNN for F32 weights only with TRINE_ONEDNN=1. It is faster (kernels/README.md, "oneDNN"), but
// its summation order follows the batch's token count and the thread's row slice, so logits would
// change with -t and with the sequences batched beside a request; the hand-written kernel keeps
// each row's result independent of both, which trine promises by default.
bool OneDnnEnabled() {
  static const bool on = [] {
    const char* env = std::getenv("TRINE_ONEDNN");
    return env != nullptr && std::strcmp(env, "1") == 0 && OneDnnAvailable();
  }();
  return on;
}
#endif

struct VariantChoice {
  bool set;  // TRINE_TERNARY named a variant
  TernaryVariant variant;
  Status status;
};

VariantChoice ChooseVariant() {
  const char* env = std::getenv("TRINE_TERNARY");
  if (env == nullptr || *env == '\0') return {false, TernaryVariant::kDefault, Status::Ok()};
  for (TernaryVariant v : {TernaryVariant::kInt8Dot, TernaryVariant::kMulFree, TernaryVariant::kLut}) {
    if (std::strcmp(env, TernaryVariantName(v)) == 0) return {true, v, Status::Ok()};
  }
  return {false, TernaryVariant::kDefault,
          InvalidArgument(std::string("TRINE_TERNARY=") + env + " is not one of int8dot, mulfree, lut")};
}

const VariantChoice& GetVariantChoice() {
  static const VariantChoice c = ChooseVariant();
  return c;
}

}  // namespace

const char* TernaryVariantName(TernaryVariant v) {
  switch (v) {
    case TernaryVariant::kDefault: return "default";
    case TernaryVariant::kInt8Dot: return "int8dot";
    case TernaryVariant::kMulFree: return "mulfree";
    case TernaryVariant::kLut: return "lut";
  }
  return "?";
}

TernaryVariant ResolveTernaryVariant(TernaryVariant v, Isa isa) {
  if (v != TernaryVariant::kDefault) return v;
  const VariantChoice& c = GetVariantChoice();
  if (c.set) return c.variant;
  (void)isa;  // int8 dot measures fastest on every ISA (kernels/README.md, "Variants and defaults")
  return TernaryVariant::kInt8Dot;
}

Status TernaryVariantStatus() { return GetVariantChoice().status; }

#if !defined(TRINE_HAVE_ONEDNN)
bool OneDnnAvailable() { return false; }
void GemmF32OneDnn(const WeightView& w, const uint8_t* xq, size_t act_stride, int n_tokens, float* y, int64_t ldy,
                   int64_t r0, int64_t r1, float scale) {
  GemmRef(w, xq, act_stride, n_tokens, y, ldy, r0, r1, scale);
}
#endif

const char* IsaName(Isa isa) {
  switch (isa) {
    case Isa::kRef: return "ref";
    case Isa::kAvx2: return "avx2";
    case Isa::kAvx512: return "avx512";
    case Isa::kNeon: return "neon";
  }
  return "?";
}

bool IsaSupported(Isa isa) {
  const CpuFeatures& f = GetCpuFeatures();
  switch (isa) {
    case Isa::kRef: return true;
#if defined(TRINE_HAVE_AVX2)
    case Isa::kAvx2: return f.avx2;
#endif
#if defined(TRINE_HAVE_AVX512)
    case Isa::kAvx512: return f.avx512;
#endif
#if defined(TRINE_HAVE_NEON)
    case Isa::kNeon: return f.neon_dotprod;
#endif
    default: return false;
  }
  (void)f;
}

const KernelTable& GetKernelTable(Isa isa) {
  switch (isa) {
#if defined(TRINE_HAVE_AVX512)
    case Isa::kAvx512: return Avx512Table();
#endif
#if defined(TRINE_HAVE_AVX2)
    case Isa::kAvx2: return Avx2Table();
#endif
#if defined(TRINE_HAVE_NEON)
    case Isa::kNeon: return NeonTable();
#endif
    default: return RefTable();
  }
}

#if defined(TRINE_HAVE_AMX)
// The AMX translation unit is built with VBMI too (its TQ1_0 lookups); every AMX CPU has it.
bool AmxAvailable() { return IsaSupported(Isa::kAvx512) && GetCpuFeatures().avx512_vbmi && AmxPermitted(); }
#else
bool AmxAvailable() { return false; }
int AmxMinTokens() { return 0; }
void GemmTq2Amx(const WeightView& w, const uint8_t* xq, size_t act_stride, int n_tokens, float* y, int64_t ldy,
                int64_t r0, int64_t r1, float scale) {
  GetKernelTable(ActiveIsa()).tq2_int8dot(w, xq, act_stride, n_tokens, y, ldy, r0, r1, scale);
}
#endif

bool AmxEnabled() {
  static const bool on = [] {
    const char* env = std::getenv("TRINE_AMX");
    if (env != nullptr && std::strcmp(env, "0") == 0) return false;
    return AmxAvailable();
  }();
  return on;
}

Isa ActiveIsa() { return GetSelection().isa; }
Status ActiveIsaStatus() { return GetSelection().status; }

GemmFn SelectGemm(TypeId type, Isa isa, TernaryVariant variant, std::string* name) {
  const KernelTable& t = GetKernelTable(isa);
  GemmFn fn = nullptr;
  std::string what;
  variant = ResolveTernaryVariant(variant, isa);
  switch (type) {
    case TypeId::kTQ1_0:
    case TypeId::kTQ2_0:
    case TypeId::kI2_S:
      if (variant == TernaryVariant::kMulFree && t.tq2_mulfree) {
        fn = t.tq2_mulfree;
        what = "ternary x q8_K multiplication-free (masked add/sub)";
      } else if (variant == TernaryVariant::kLut && t.tq2_lut) {
        fn = t.tq2_lut;
        what = "ternary x q8_K table lookup";
      } else if (isa == Isa::kAvx512 && AmxEnabled()) {
        fn = GemmTq2Amx;
        what = "ternary x q8_K amx-int8 tdpbsud for >= " + std::to_string(AmxMinTokens()) +
               " tokens on the x16 layout, int8 dot below";
      } else {
        fn = t.tq2_int8dot;
        what = "ternary x q8_K int8 dot";
      }
      if (type == TypeId::kTQ1_0 && WantsX16(type, isa, variant)) what += "; tq1_0 read in place (vbmi digit lookup)";
      break;
    case TypeId::kF16:
      fn = t.f16;
      what = "f16 x f16";
      break;
    case TypeId::kF32:
      fn = t.f32;
      what = "f32 x f32";
#if defined(TRINE_HAVE_ONEDNN)
      if (isa != Isa::kRef && OneDnnEnabled()) {
        fn = GemmF32OneDnn;
        what = "f32 x f32 oneDNN matmul";
      }
#endif
      break;
    case TypeId::kQ8_0:
      fn = t.q8_0;
      what = "q8_0 x q8_0";
      break;
    case TypeId::kQ4_0:
      fn = t.q4_0;
      what = "q4_0 x q8_0";
      break;
    case TypeId::kQ4_K:
      fn = t.q4_K;
      what = "q4_K x q8_K";
      break;
    case TypeId::kQ6_K:
      fn = t.q6_K;
      what = "q6_K x q8_K";
      break;
    default:
      break;
  }
  if (fn == nullptr || fn == GemmRef) {
    if (name) *name = std::string(TypeName(type)) + ": scalar reference";
    return GemmRef;
  }
  if (name) *name = std::string(TypeName(type)) + ": " + what + " (" + IsaName(isa) + ")";
  return fn;
}

DequantizeRowFn ActiveDequantizeRow(TypeId from) {
  const KernelTable& k = GetKernelTable(ActiveIsa());
  if (from == TypeId::kQ6_K && k.dequantize_q6_K != nullptr) return k.dequantize_q6_K;
  return GetTypeTraits(from).dequantize_row;
}

QuantizeRowFn ActiveQuantizeRow(TypeId to) {
  const KernelTable& k = GetKernelTable(ActiveIsa());
  if (to == TypeId::kQ4_0 && k.quantize_q4_0 != nullptr) return k.quantize_q4_0;
  return GetTypeTraits(to).quantize_row;
}

GemmFn SelectGemmF32Act(TypeId type, Isa isa, std::string* name) {
  const GemmFn fn = GetKernelTable(isa).f32_act;
  // The SIMD kernels cover these types (and fall back themselves for layouts they lack: TQ1_0 is
  // theirs only in the x16 layout); I2_S is repacked to TQ2_0 at load, so only a hand-built view
  // reaches here with it.
  const bool covered = type == TypeId::kF32 || type == TypeId::kF16 || type == TypeId::kBF16 || type == TypeId::kQ8_0 ||
                       type == TypeId::kQ4_0 || type == TypeId::kQ4_K || type == TypeId::kQ6_K ||
                       type == TypeId::kTQ2_0 || type == TypeId::kTQ1_0;
  if (fn == nullptr || fn == GemmDequantF32 || !covered) {
    if (name) *name = std::string(TypeName(type)) + " x f32: scalar dequantize + dot";
    return GemmDequantF32;
  }
  if (name) *name = std::string(TypeName(type)) + " x f32: dequantized tile + fma (" + IsaName(isa) + ")";
  return fn;
}

}  // namespace trine::kernels
