// Standalone kernel conformance check for the cross-built AArch64 NEON kernels, run under
// qemu-aarch64 by scripts/test-neon.sh (registered as the ctest test `neon_kernels_qemu`). It
// links only kernels/ and the tensor code (no GoogleTest, PCRE2 or OpenMP, which Debian's cross
// toolchain does not ship for arm64), and checks what tests/kernels/kernel_conformance_test.cc
// checks on x86, on more ragged shapes and more types:
//   - every kernel of the active ISA's table (TRINE_ISA is honoured) against GemmRef;
//   - outputs NaN-poisoned first, leading dimension wider than rows: every (row, token) in
//     [r0, r1) written, nothing else touched; row ranges split as threads would (empty ones too);
//   - integer paths (TQ2_0 / TQ1_0 / I2_S x Q8_K: int8 dot, mul-free and lookup (on its layout,
//     RowData round trip checked); Q8_0 and Q4_0 x Q8_0) equal to
//     the reference bit for bit; F16 within an NMSE limit and a max-error bound;
//   - the activation quantizers (KernelTable::quantize_*) byte-identical to the scalar references
//     on tests/kernels/quantize_act_cases.h's inputs (edge values, block sub-ranges);
//   - the xsimd element-wise kernels (SelectElementwise: SwiGLU, RMSNorm, ReLU^2, RoPE) equal to
//     their scalar forms bit for bit on tests/kernels/elementwise_cases.h's inputs;
//   - shapes with rows 1..65, tokens 1..130 (across the 64-token tile), cols 256..6912, plus
//     Q4_0/Q8_0/F16 column counts that are not multiples of 256 (F16: of 4 either).
// Usage: neon_kernel_check [--expect-isa ref|neon] [--expect-isa-error] [--no-kernels]
// (--no-kernels: only the ISA selection checks, for runs on a CPU without the dot product).
// Exit status 0 when every check passes, 1 otherwise (each failure is printed).
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "../kernels/elementwise_cases.h"
#include "../kernels/quantize_act_cases.h"
#include "cpu_features.h"
#include "kernels.h"
#include "repack.h"
#include "tensor/dtype.h"

namespace trine::kernels {
namespace {

int g_failures = 0;

#define CHECK_MSG(cond, ...)                                   \
  do {                                                         \
    if (!(cond)) {                                             \
      ++g_failures;                                            \
      std::fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
      std::fprintf(stderr, __VA_ARGS__);                       \
      std::fprintf(stderr, "\n");                              \
    }                                                          \
  } while (0)

struct Shape {
  int64_t rows, cols;
  int n_tokens;
};

// kSaturate: all +1 / all -1 rows, constant activations; kRawBytes: TQ2_0 code bytes set at
// random after quantizing, so code 3 (no quantizer writes it, a file may hold it) appears too.
enum class Weights { kRandom, kSaturate, kRawBytes };
enum class Acts { kNormal, kEdge, kConstant };

struct Case {
  TypeId file_type;
  TernaryVariant variant;
  const char* label;
};

bool IsTernary(TypeId t) { return t == TypeId::kTQ2_0 || t == TypeId::kTQ1_0 || t == TypeId::kI2_S; }

std::vector<float> MakeWeights(TypeId t, const Shape& s, Weights kind, std::mt19937* rng) {
  const int64_t n = s.rows * s.cols;
  std::vector<float> w(static_cast<size_t>(n));
  if (IsTernary(t)) {
    for (int64_t r = 0; r < s.rows; ++r) {
      for (int64_t i = 0; i < s.cols; ++i) {
        const int v = kind == Weights::kSaturate ? (r % 2 == 0 ? 1 : -1) : static_cast<int>((*rng)() % 3) - 1;
        w[static_cast<size_t>(r * s.cols + i)] = static_cast<float>(v) * 0.037f;
      }
    }
    return w;
  }
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (auto& v : w) v = kind == Weights::kSaturate ? 0.5f : nd(*rng);
  return w;
}

std::vector<float> MakeActivations(int64_t n, Acts kind, int t, std::mt19937* rng) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n));
  if (kind == Acts::kConstant) {
    // Every Q8_K value becomes -128 (the signed max is positive), the int16 worst case for the
    // multiplication-free accumulators; odd tokens get the opposite sign (+127).
    for (auto& v : x) v = t % 2 == 0 ? 3.0f : -3.0f;
    return x;
  }
  for (auto& v : x) v = nd(*rng);
  if (kind == Acts::kEdge && t == 0) {
    for (int64_t i = 0; i < std::min<int64_t>(n, 256); ++i) x[static_cast<size_t>(i)] = 0.0f;  // all-zero block
    if (n > 300) x[300] = 1e4f;
    if (n > 600) x[600] = -1e4f;
  }
  return x;
}

struct Result {
  int shapes = 0;
  double max_nmse = 0.0;
};

void CheckShape(Isa isa, const Case& c, const Shape& s, Weights wkind, Acts akind, std::mt19937* rng, Result* res) {
  char where[192];
  std::snprintf(where, sizeof(where), "%s %s: %" PRId64 "x%" PRId64 " tokens %d%s%s", IsaName(isa), c.label, s.rows,
                s.cols, s.n_tokens,
                wkind == Weights::kSaturate ? " saturate" : wkind == Weights::kRawBytes ? " raw-bytes" : "",
                akind == Acts::kEdge ? " edge" : akind == Acts::kConstant ? " const-act" : "");
  const int64_t n = s.rows * s.cols;
  const std::vector<float> wf = MakeWeights(c.file_type, s, wkind, rng);
  uint64_t bytes = 0;
  if (!TensorBytes(c.file_type, n, &bytes)) {
    CHECK_MSG(false, "%s: TensorBytes failed", where);
    return;
  }
  std::vector<uint8_t> wq(bytes);
  const Status qs = QuantizeTensor(c.file_type, wf.data(), n, s.cols, wq.data());
  CHECK_MSG(qs.ok(), "%s: QuantizeTensor: %s", where, qs.message().c_str());
  if (!qs.ok()) return;
  if (wkind == Weights::kRawBytes && c.file_type == TypeId::kTQ2_0) {
    for (size_t i = 0; i < wq.size(); i += 66) {
      for (size_t j = 0; j < 64; ++j) wq[i + j] = static_cast<uint8_t>((*rng)());
    }
  }
  WeightView w;
  w.type = c.file_type;
  w.rows = s.rows;
  w.cols = s.cols;
  w.data = wq.data();
  w.row_bytes = static_cast<size_t>(bytes / static_cast<uint64_t>(s.rows));
  if (c.file_type == TypeId::kI2_S) {
    w.row_bytes = static_cast<size_t>(s.cols / 4);
    std::memcpy(&w.tensor_scale, wq.data() + n / 4, 4);
  }
  PageBuffer repacked;
  if (NeedsTernaryRepack(w)) {
    const Status rs = RepackToTq2(w, &repacked, &w);
    CHECK_MSG(rs.ok(), "%s: RepackToTq2: %s", where, rs.message().c_str());
    if (!rs.ok()) return;
  }
  // The lookup kernels read their own layout (built as the loader does); GemmRef reads plain rows.
  const WeightView plain = w;
  PageBuffer lut;
  if (WantsLutLayout(w.type, isa, c.variant)) {
    const Status ls = InterleaveLut(plain, &lut, &w);
    CHECK_MSG(ls.ok() && w.interleave == kInterleaveLut, "%s: InterleaveLut: %s", where, ls.message().c_str());
    if (!ls.ok()) return;
    std::vector<uint8_t> scratch(w.row_bytes);
    for (int64_t r = 0; r < s.rows; ++r) {
      if (std::memcmp(RowData(w, r, scratch.data()), plain.data + static_cast<size_t>(r) * plain.row_bytes,
                      plain.row_bytes) != 0) {
        CHECK_MSG(false, "%s: RowData of the lookup-table layout differs at row %" PRId64, where, r);
        return;
      }
    }
  }

  const size_t act = ActivationBytes(w.type, s.cols);
  std::vector<uint8_t> xq(act * static_cast<size_t>(s.n_tokens));
  for (int t = 0; t < s.n_tokens; ++t) {
    const std::vector<float> x = MakeActivations(s.cols, akind, t, rng);
    QuantizeActivations(w.type, x.data(), s.cols, xq.data() + act * static_cast<size_t>(t));
  }

  const int64_t ldy = s.rows + 3;  // padding rows must stay NaN
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> want(static_cast<size_t>(ldy * s.n_tokens), nan), got = want;
  GemmRef(plain, xq.data(), act, s.n_tokens, want.data(), ldy, 0, s.rows, 0.75f);

  std::string name;
  GemmFn fn = SelectGemm(w.type, isa, c.variant, &name);
  if (isa != Isa::kRef) CHECK_MSG(fn != GemmRef, "%s: %s has no specialised kernel (%s)", where, IsaName(isa), name.c_str());
  // Row ranges as threads split them: [0, a), [a, a) (empty), [a, b), [b, rows).
  const int64_t a = s.rows / 3, b = s.rows - s.rows / 4;
  const int64_t cuts[][2] = {{0, a}, {a, a}, {a, b}, {b, s.rows}};
  for (const auto& cut : cuts) fn(w, xq.data(), act, s.n_tokens, got.data(), ldy, cut[0], cut[1], 0.75f);

  double err = 0.0, ref = 0.0, max_abs_err = 0.0, max_abs_ref = 0.0;
  int mismatches = 0;
  for (int t = 0; t < s.n_tokens; ++t) {
    for (int64_t r = 0; r < ldy; ++r) {
      const size_t i = static_cast<size_t>(t * ldy + r);
      if (r >= s.rows) {
        if (!std::isnan(got[i])) {
          CHECK_MSG(false, "%s: wrote padding row %" PRId64 " token %d", where, r, t);
          return;
        }
        continue;
      }
      if (std::isnan(got[i])) {
        CHECK_MSG(false, "%s: row %" PRId64 " token %d not written (NaN)", where, r, t);
        return;
      }
      if (c.file_type != TypeId::kF16 && std::memcmp(&got[i], &want[i], 4) != 0) {
        if (mismatches++ < 3) {
          CHECK_MSG(false, "%s: row %" PRId64 " token %d: got %.9g want %.9g (must be bit-identical)", where, r, t,
                    static_cast<double>(got[i]), static_cast<double>(want[i]));
        }
      }
      const double d = static_cast<double>(got[i]) - static_cast<double>(want[i]);
      err += d * d;
      ref += static_cast<double>(want[i]) * static_cast<double>(want[i]);
      max_abs_err = std::max(max_abs_err, std::fabs(d));
      max_abs_ref = std::max(max_abs_ref, std::fabs(static_cast<double>(want[i])));
    }
  }
  if (mismatches > 3) CHECK_MSG(false, "%s: %d values differ from the reference in all", where, mismatches);
  const double nmse = err / std::max(ref, 1e-30);
  res->max_nmse = std::max(res->max_nmse, nmse);
  if (c.file_type == TypeId::kF16) {
    // fp32 sums of <= 6912 fp16 products in another order: relative error ~1e-6 at worst.
    CHECK_MSG(nmse < 1e-10, "%s: NMSE %.3g >= 1e-10", where, nmse);
    CHECK_MSG(max_abs_err <= 1e-4 * std::max(max_abs_ref, 1.0), "%s: max abs error %.3g (max |ref| %.3g)", where,
              max_abs_err, max_abs_ref);
  }
  ++res->shapes;
}

std::vector<Shape> ShapesFor(TypeId t, std::mt19937* rng) {
  // cols multiples of 256 for every type (ternary blocks are 256 wide).
  std::vector<Shape> s = {{1, 256, 1},    {2, 256, 130},  {7, 256, 3},   {33, 512, 1},  {16, 2560, 2},
                          {5, 6912, 1},   {65, 768, 65},  {3, 1024, 130}, {64, 1280, 64}, {17, 6912, 3},
                          {65, 256, 129}, {1, 6912, 130}};
  if (t == TypeId::kQ8_0 || t == TypeId::kQ4_0 || t == TypeId::kF16) {
    s.insert(s.end(), {{3, 32, 5}, {9, 96, 70}, {4, 288, 2}, {65, 160, 1}});
  }
  if (t == TypeId::kF16) s.insert(s.end(), {{1, 1, 1}, {3, 257, 4}, {5, 263, 66}, {2, 4099, 3}});
  // Seeded random ragged shapes: rows 1..65, cols 256..6912, tokens 1..130, bounded work.
  for (int k = 0; k < 8;) {
    Shape r{1 + static_cast<int64_t>((*rng)() % 65), 256 * (1 + static_cast<int64_t>((*rng)() % 27)),
            1 + static_cast<int>((*rng)() % 130)};
    if (r.rows * r.cols * r.n_tokens > 3'000'000) continue;
    s.push_back(r);
    ++k;
  }
  return s;
}

void RunConformance(Isa isa) {
  const Case cases[] = {
      {TypeId::kTQ2_0, TernaryVariant::kInt8Dot, "tq2_0 int8dot"},
      {TypeId::kTQ2_0, TernaryVariant::kMulFree, "tq2_0 mulfree"},
      {TypeId::kTQ1_0, TernaryVariant::kInt8Dot, "tq1_0 int8dot"},
      {TypeId::kTQ1_0, TernaryVariant::kMulFree, "tq1_0 mulfree"},
      {TypeId::kI2_S, TernaryVariant::kInt8Dot, "i2_s int8dot"},
      {TypeId::kI2_S, TernaryVariant::kMulFree, "i2_s mulfree"},
      {TypeId::kTQ2_0, TernaryVariant::kLut, "tq2_0 lut"},
      {TypeId::kTQ1_0, TernaryVariant::kLut, "tq1_0 lut"},
      {TypeId::kI2_S, TernaryVariant::kLut, "i2_s lut"},
      {TypeId::kQ8_0, TernaryVariant::kDefault, "q8_0"},
      {TypeId::kQ4_0, TernaryVariant::kDefault, "q4_0"},
      {TypeId::kF16, TernaryVariant::kDefault, "f16"},
  };
  for (const Case& c : cases) {
    const auto t0 = std::chrono::steady_clock::now();
    const int before = g_failures;
    std::mt19937 rng(1234);
    Result res;
    for (const Shape& s : ShapesFor(c.file_type, &rng)) {
      CheckShape(isa, c, s, Weights::kRandom, Acts::kNormal, &rng, &res);
      CheckShape(isa, c, s, Weights::kRandom, Acts::kEdge, &rng, &res);
    }
    // Worst-case accumulator ranges: rows of all +1 / all -1 against all -128 / +127 activations.
    for (const Shape& s : {Shape{4, 6912, 2}, Shape{3, 256, 3}}) {
      CheckShape(isa, c, s, Weights::kSaturate, Acts::kConstant, &rng, &res);
    }
    // (Not the mul-free kernel: its masks read code 3 as 1, weight 0.)
    if (c.file_type == TypeId::kTQ2_0 && c.variant != TernaryVariant::kMulFree) {
      for (const Shape& s : {Shape{37, 2560, 5}, Shape{3, 256, 3}, Shape{16, 6912, 1}}) {
        CheckShape(isa, c, s, Weights::kRawBytes, Acts::kConstant, &rng, &res);
        CheckShape(isa, c, s, Weights::kRawBytes, Acts::kNormal, &rng, &res);
      }
    }
    const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::string name;
    SelectGemm(c.file_type == TypeId::kF16 || c.file_type == TypeId::kQ8_0 || c.file_type == TypeId::kQ4_0
                   ? c.file_type
                   : TypeId::kTQ2_0,
               isa, c.variant, &name);
    std::printf("%-4s %-14s %3d checks  %s  max NMSE %.2g  %.2fs  [%s]\n", g_failures == before ? "ok" : "FAIL",
                c.label, res.shapes, c.file_type == TypeId::kF16 ? "nmse-bounded" : "bit-exact", res.max_nmse, sec,
                name.c_str());
  }
}

// The xsimd element-wise kernels of `isa` against their scalar forms, bit for bit
// (tests/kernels/elementwise_cases.h, as the x86 suite's Elementwise test).
void RunElementwise(Isa isa) {
  const ElementwiseKernels& k = SelectElementwise(isa);
  if (k.rms_scale == nullptr) {
    std::printf("--   elementwise (no %s kernels: the scalar forms run)\n", IsaName(isa));
    return;
  }
  const auto t0 = std::chrono::steady_clock::now();
  const int before = g_failures;
  int checked = 0;
  for (const std::string& f : CheckElementwise(k, &checked)) CHECK_MSG(false, "elementwise on %s: %s", IsaName(isa), f.c_str());
  const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%-4s elementwise %4d rows  bit-exact  %.2fs\n", g_failures == before ? "ok" : "FAIL", checked, sec);
}

// The activation quantizers of `isa`'s table against the scalar references, byte for byte, on
// tests/kernels/quantize_act_cases.h's inputs (the x86 suite's quantize_act_conformance_test).
void RunQuantizeAct(Isa isa) {
  for (const QuantActKind& k : QuantActKinds()) {
    const QuantizeActFn fn = GetKernelTable(isa).*k.entry;
    if (fn == nullptr) {
      std::printf("--   quantize %-5s (no %s entry: the reference runs)\n", k.name, IsaName(isa));
      continue;
    }
    const auto t0 = std::chrono::steady_clock::now();
    const int before = g_failures;
    int checked = 0;
    for (const QuantActInput& in : QuantActInputs()) {
      const std::string err = CompareQuantizer(k, fn, in.x);
      CHECK_MSG(err.empty(), "quantize %s on %s, %s: %s", k.name, IsaName(isa), in.name.c_str(), err.c_str());
      ++checked;
    }
    const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("%-4s quantize %-5s %3d rows  byte-exact  %.2fs\n", g_failures == before ? "ok" : "FAIL", k.name,
                checked, sec);
  }
}

int Main(int argc, char** argv) {
  std::string expect_isa;
  bool expect_isa_error = false, kernels = true;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--expect-isa" && i + 1 < argc) {
      expect_isa = argv[++i];
    } else if (arg == "--expect-isa-error") {
      expect_isa_error = true;
    } else if (arg == "--no-kernels") {
      kernels = false;
    } else {
      std::fprintf(stderr, "usage: %s [--expect-isa ref|neon] [--expect-isa-error] [--no-kernels]\n", argv[0]);
      return 2;
    }
  }
  const char* env = std::getenv("TRINE_ISA");
  const Isa isa = ActiveIsa();
  const Status st = ActiveIsaStatus();
  std::printf("cpu: %s; TRINE_ISA=%s; active ISA %s%s%s\n", GetCpuFeatures().ToString().c_str(), env ? env : "(unset)",
              IsaName(isa), st.ok() ? "" : "; ", st.ok() ? "" : st.message().c_str());
  if (!expect_isa.empty()) {
    CHECK_MSG(expect_isa == IsaName(isa), "active ISA is %s, expected %s", IsaName(isa), expect_isa.c_str());
  }
  CHECK_MSG(st.ok() != expect_isa_error, "ActiveIsaStatus is %s, expected %s", st.ok() ? "ok" : "an error",
            expect_isa_error ? "an error" : "ok");
#if defined(__aarch64__)
  CHECK_MSG(IsaSupported(Isa::kNeon) == GetCpuFeatures().neon_dotprod, "IsaSupported(neon) disagrees with HWCAP");
#endif
  if (kernels) {
    RunConformance(isa);
    RunQuantizeAct(isa);
    RunElementwise(isa);
  }
  if (g_failures != 0) {
    std::printf("neon_kernel_check: %d failure(s)\n", g_failures);
    return 1;
  }
  std::printf("neon_kernel_check: all checks passed on %s\n", IsaName(isa));
  return 0;
}

}  // namespace
}  // namespace trine::kernels

int main(int argc, char** argv) { return trine::kernels::Main(argc, argv); }
