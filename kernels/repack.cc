// Ternary repacking to TQ2_0 blocks and the 16-row interleaved (x16) layouts.
#include "repack.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/fp16.h"
#include "cpu_features.h"
#include "tensor/blocks.h"
#include "tensor/quantize_ref.h"
#include "x86/tq1_x16.h"

namespace trine::kernels {

bool NeedsTernaryRepack(const WeightView& w) { return w.type == TypeId::kTQ1_0 || w.type == TypeId::kI2_S; }

static void EncodeTq2Block(const int8_t* codes, uint16_t d, BlockTQ2_0* out) {
  for (int h = 0; h < 2; ++h) {
    for (int m = 0; m < 32; ++m) {
      uint8_t q = 0;
      for (int n = 0; n < 4; ++n) q |= static_cast<uint8_t>((codes[128 * h + 32 * n + m] & 3) << (2 * n));
      out->qs[32 * h + m] = q;
    }
  }
  out->d = d;
}

Status RepackToTq2(const WeightView& src, PageBuffer* storage, WeightView* dst) {
  if (src.cols % kQK_K != 0) {
    return Unsupported(std::string("ternary repack needs rows that are a multiple of 256, got ") +
                       std::to_string(src.cols));
  }
  const int64_t nb = src.cols / kQK_K;
  // Every block is written below, so a buffer of the right size is reused as it is (the weight
  // streamer repacks into the same slot for every token).
  const size_t bytes = static_cast<size_t>(src.rows * nb) * sizeof(BlockTQ2_0);
  if (storage->size() != bytes) *storage = PageBuffer(bytes);
  BlockTQ2_0* out = reinterpret_cast<BlockTQ2_0*>(storage->data());
  std::vector<float> vals(static_cast<size_t>(kQK_K));
  int8_t codes[kQK_K];
  for (int64_t r = 0; r < src.rows; ++r) {
    const uint8_t* row = src.data + static_cast<size_t>(r) * src.row_bytes;
    for (int64_t b = 0; b < nb; ++b) {
      uint16_t d = 0x3C00;  // fp16 1.0 for I2_S
      if (src.type == TypeId::kTQ1_0) {
        BlockTQ1_0 blk;
        std::memcpy(&blk, row + b * static_cast<int64_t>(sizeof(BlockTQ1_0)), sizeof(blk));
        d = blk.d;
        blk.d = 0x3C00;  // decode the codes with d = 1
        DequantizeRowTQ1_0(&blk, vals.data(), kQK_K);
      } else if (src.type == TypeId::kI2_S) {
        // I2_S rows start on 32-byte block boundaries since cols % 128 == 0.
        DecodeI2SCodes(row + b * (kQK_K / 4), vals.data(), kQK_K);
      } else {
        return Unsupported("ternary repack: unexpected source type");
      }
      for (int j = 0; j < kQK_K; ++j) codes[j] = static_cast<int8_t>(vals[static_cast<size_t>(j)] + 1.0f);
      EncodeTq2Block(codes, d, &out[r * nb + b]);
    }
  }
  *dst = src;
  dst->type = TypeId::kTQ2_0;
  dst->data = storage->data();
  dst->row_bytes = static_cast<size_t>(nb) * sizeof(BlockTQ2_0);
  return Status::Ok();
}

bool WantsX16(TypeId type, Isa isa, TernaryVariant variant) {
  variant = ResolveTernaryVariant(variant, isa);
  if (isa == Isa::kAvx2) {
    // The AVX2 Q4_0, Q4_K, Q6_K and int8-dot ternary kernels read x16 (TQ1_0 and I2_S once
    // repacked to TQ2_0).
    if (type == TypeId::kQ4_0 || type == TypeId::kQ4_K || type == TypeId::kQ6_K) return true;
    return type == TypeId::kTQ2_0 && variant == TernaryVariant::kInt8Dot;
  }
  if (isa != Isa::kAvx512) return false;
  if (type == TypeId::kQ4_0 || type == TypeId::kQ4_K || type == TypeId::kQ6_K) return true;
  if (variant != TernaryVariant::kInt8Dot) return false;
  if (type == TypeId::kTQ1_0) return Tq1X16Enabled();
  return type == TypeId::kTQ2_0;  // I2_S: once repacked
}

bool Tq1X16Enabled() {
#if defined(TRINE_HAVE_AVX512)
  static const bool on = [] {
    const char* env = std::getenv("TRINE_TQ1_X16");
    if (env != nullptr && std::strcmp(env, "0") == 0) return false;
    return GetCpuFeatures().avx512_vbmi;
  }();
  return on;
#else
  return false;
#endif
}

namespace {

// Where the x16 layout puts each part of a TQ1_0 / TQ2_0 / Q4_0 / Q4_K / Q6_K block.
struct X16Layout {
  size_t block_bytes = 0, d_off = 0, qs_off = 0, lines = 0, group_bytes = 0;
  int64_t nb = 0, groups = 0;
  const uint8_t* recode = nullptr;  // code byte -> layout byte (TQ1_0: Tq1Codec), else kept as is
};

Status X16LayoutOf(const WeightView& w, X16Layout* l) {
  const int64_t be = X16BlockElems(w.type);
  if (be == 0 || w.interleave != 0 || w.cols % be != 0) {
    return Unsupported("x16 interleave needs plain TQ1_0, TQ2_0, Q4_0, Q4_K or Q6_K rows");
  }
  if (w.type == TypeId::kQ4_0) {
    *l = {sizeof(BlockQ4_0), 0, 2, kQK4_0 / 2 / 4};
  } else if (w.type == TypeId::kQ6_K) {
    *l = {sizeof(BlockQ6_K), offsetof(BlockQ6_K, d), 0, (sizeof(BlockQ6_K) - 2) / 4};  // ql, qh, scales: 52 lines
  } else if (w.type == TypeId::kQ4_K) {
    *l = {sizeof(BlockQ4_K), offsetof(BlockQ4_K, d), 0, sizeof(BlockQ4_K) / 4};  // the whole block: 36 lines
  } else if (w.type == TypeId::kTQ1_0) {
    *l = {sizeof(BlockTQ1_0), offsetof(BlockTQ1_0, d), 0, (sizeof(BlockTQ1_0) - 2) / 4};  // qs + qh: 13 lines
    l->recode = kTq1Codec.recode.data();
  } else {
    *l = {sizeof(BlockTQ2_0), offsetof(BlockTQ2_0, d), 0, kQK_K / 4 / 4};
  }
  l->nb = w.cols / be;
  l->groups = (w.rows + 15) / 16;
  l->group_bytes = X16GroupBytes(l->nb, l->lines * 64);
  return Status::Ok();
}

// Group g (zeroed) from its n_rows plain rows at `rows` (stride row_bytes).
void InterleaveGroup(const X16Layout& l, const uint8_t* rows, size_t row_bytes, int n_rows, uint8_t* g) {
  for (int i = 0; i < n_rows; ++i) {
    const uint8_t* row = rows + static_cast<size_t>(i) * row_bytes;
    for (int64_t b = 0; b < l.nb; ++b) {
      const uint8_t* blk = row + static_cast<size_t>(b) * l.block_bytes;
      std::memcpy(g + X16ScalesOffset(b, l.lines * 64) + 2 * i, blk + l.d_off, 2);
      uint8_t* codes = g + X16CodesOffset(b, l.lines * 64);
      for (size_t k = 0; k < l.lines; ++k) {
        uint8_t* to = codes + 64 * k + 4 * i;
        const uint8_t* from = blk + l.qs_off + 4 * k;
        if (l.recode == nullptr) {
          std::memcpy(to, from, 4);
        } else {
          for (int j = 0; j < 4; ++j) to[j] = l.recode[from[j]];
        }
      }
    }
  }
}

// Storage for the layout (core/page_buffer.h): *storage when it is already exactly the layout's
// size (a slice the caller took from a PageArena), else a new PageBuffer; *dst describes it. The
// lanes of the rows a partial last group lacks must read as zero, so that group is cleared.
uint8_t* AllocX16(const WeightView& src, const X16Layout& l, PageBuffer* storage, WeightView* dst) {
  const size_t bytes = static_cast<size_t>(l.groups) * l.group_bytes;
  if (storage->size() != bytes) *storage = PageBuffer(bytes);
  uint8_t* base = storage->data();
  if (src.rows % 16 != 0) std::memset(base + bytes - l.group_bytes, 0, l.group_bytes);
  *dst = src;
  dst->data = base;
  dst->interleave = 16;
  dst->group_bytes = l.group_bytes;
  return base;
}

}  // namespace

size_t X16Bytes(const WeightView& w) {
  X16Layout l;
  if (!X16LayoutOf(w, &l).ok()) return 0;
  return static_cast<size_t>(l.groups) * l.group_bytes;
}

Status InterleaveX16(const WeightView& src, PageBuffer* storage, WeightView* dst, const X16StepDone& step_done) {
  X16Layout l;
  TRINE_RETURN_IF_ERROR(X16LayoutOf(src, &l));
  const WeightView from = src;  // dst may alias src
  uint8_t* base = AllocX16(from, l, storage, dst);
  const size_t src_group_bytes = 16 * from.row_bytes;
  constexpr size_t kStepBytes = size_t{16} << 20;
  const int64_t step_groups =
      step_done ? std::max<int64_t>(1, static_cast<int64_t>(kStepBytes / src_group_bytes)) : l.groups;
  for (int64_t g0 = 0; g0 < l.groups; g0 += step_groups) {
    const int64_t g1 = std::min(l.groups, g0 + step_groups);
    // Groups are independent: spread them over the threads (a load-time cost of ~0.5 GB of copies).
#if defined(_OPENMP)  // the NEON cross build of the kernel checks has no OpenMP
#pragma omp parallel for schedule(static)
#endif
    for (int64_t gi = g0; gi < g1; ++gi) {
      const int n_rows = static_cast<int>(std::min<int64_t>(16, from.rows - gi * 16));
      InterleaveGroup(l, from.data + static_cast<size_t>(gi) * src_group_bytes, from.row_bytes, n_rows,
                      base + static_cast<size_t>(gi) * l.group_bytes);
    }
    if (step_done) {
      const size_t end = std::min(static_cast<size_t>(g1) * src_group_bytes, static_cast<size_t>(from.rows) * from.row_bytes);
      step_done(static_cast<size_t>(g0) * src_group_bytes, end - static_cast<size_t>(g0) * src_group_bytes);
    }
  }
  return Status::Ok();
}

Status InterleaveX16Rows(const WeightView& shape, const X16RowSource& fill, PageBuffer* storage,
                         WeightView* dst) {
  X16Layout l;
  TRINE_RETURN_IF_ERROR(X16LayoutOf(shape, &l));
  const WeightView from = shape;
  uint8_t* base = AllocX16(from, l, storage, dst);
#if defined(_OPENMP)
#pragma omp parallel
#endif
  {
    std::vector<uint8_t> rows(16 * from.row_bytes);
#if defined(_OPENMP)
#pragma omp for schedule(static)
#endif
    for (int64_t gi = 0; gi < l.groups; ++gi) {
      const int n_rows = static_cast<int>(std::min<int64_t>(16, from.rows - gi * 16));
      fill(gi * 16, n_rows, rows.data());
      InterleaveGroup(l, rows.data(), from.row_bytes, n_rows, base + static_cast<size_t>(gi) * l.group_bytes);
    }
  }
  return Status::Ok();
}

bool WantsLutLayout(TypeId type, Isa isa, TernaryVariant variant) {
  if (type != TypeId::kTQ2_0 || ResolveTernaryVariant(variant, isa) != TernaryVariant::kLut) return false;
  return (isa == Isa::kAvx2 || isa == Isa::kNeon) && GetKernelTable(isa).tq2_lut != nullptr;
}

size_t LutBytes(const WeightView& w) {
  if (w.type != TypeId::kTQ2_0 || w.interleave != 0 || w.cols % kQK_K != 0) return 0;
  return static_cast<size_t>((w.rows + 15) / 16) * static_cast<size_t>(w.cols / kQK_K) * kLutBlockBytes;
}

Status InterleaveLut(const WeightView& src, PageBuffer* storage, WeightView* dst) {
  const size_t bytes = LutBytes(src);
  if (bytes == 0) return Unsupported("lookup-table layout needs plain TQ2_0 rows");
  const WeightView from = src;  // dst may alias src
  const int64_t nb = from.cols / kQK_K;
  const int64_t groups = (from.rows + 15) / 16;
  const size_t group_bytes = static_cast<size_t>(nb) * kLutBlockBytes;
  if (storage->size() != bytes) *storage = PageBuffer(bytes);
  uint8_t* base = storage->data();
  // Rows past `rows` in the last group must read as code 0 with scale 0 (computed, never stored).
  if (from.rows % 16 != 0) std::memset(base + bytes - group_bytes, 0, group_bytes);
#if defined(_OPENMP)
#pragma omp parallel for schedule(static)
#endif
  for (int64_t gi = 0; gi < groups; ++gi) {
    uint8_t* g = base + static_cast<size_t>(gi) * group_bytes;
    const int n_rows = static_cast<int>(std::min<int64_t>(16, from.rows - gi * 16));
    for (int i = 0; i < n_rows; ++i) {
      const BlockTQ2_0* row =
          reinterpret_cast<const BlockTQ2_0*>(from.data + static_cast<size_t>(gi * 16 + i) * from.row_bytes);
      for (int64_t b = 0; b < nb; ++b) {
        std::memcpy(g + LutScalesOffset(b) + 2 * i, &row[b].d, 2);
        uint8_t* codes = g + LutCodesOffset(b);
        for (int j = 0; j < 64; ++j) codes[16 * j + i] = row[b].qs[j];
      }
    }
  }
  *dst = from;
  dst->data = base;
  dst->interleave = kInterleaveLut;
  dst->group_bytes = group_bytes;
  return Status::Ok();
}

}  // namespace trine::kernels
