// Ternary repacking to TQ2_0 blocks.
#include "repack.h"

#include <cstdint>
#include <cstring>

#include "core/fp16.h"
#include "tensor/blocks.h"
#include "tensor/quantize_ref.h"

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

Status RepackToTq2(const WeightView& src, std::vector<uint8_t>* storage, WeightView* dst) {
  if (src.cols % kQK_K != 0) {
    return Unsupported(std::string("ternary repack needs rows that are a multiple of 256, got ") +
                       std::to_string(src.cols));
  }
  const int64_t nb = src.cols / kQK_K;
  storage->assign(static_cast<size_t>(src.rows * nb) * sizeof(BlockTQ2_0), 0);
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
  if (isa != Isa::kAvx512) return false;
  if (type == TypeId::kQ4_0) return true;
  return type == TypeId::kTQ2_0 && variant != TernaryVariant::kMulFree;  // TQ1_0 / I2_S: once repacked
}

Status InterleaveX16(const WeightView& src, std::vector<uint8_t>* storage, WeightView* dst) {
  const int64_t be = X16BlockElems(src.type);
  if (be == 0 || src.interleave != 0 || src.cols % be != 0) {
    return Unsupported("x16 interleave needs plain TQ2_0 or Q4_0 rows");
  }
  const bool q4 = src.type == TypeId::kQ4_0;
  const size_t block_bytes = q4 ? sizeof(BlockQ4_0) : sizeof(BlockTQ2_0);
  const size_t d_off = q4 ? 0 : kQK_K / 4, qs_off = q4 ? 2 : 0, qs_bytes = q4 ? kQK4_0 / 2 : kQK_K / 4;
  const size_t lines = qs_bytes / 4;
  const int64_t nb = src.cols / be;
  const int64_t groups = (src.rows + 15) / 16;
  const size_t scale_bytes = X16ScaleBytes(nb);
  const size_t group_bytes = scale_bytes + static_cast<size_t>(nb) * lines * 64;
  storage->assign(static_cast<size_t>(groups) * group_bytes + 64, 0);
  uint8_t* base = storage->data();
  base += (64 - reinterpret_cast<uintptr_t>(base) % 64) % 64;
  // Groups are independent: spread them over the threads (a load-time cost of ~0.5 GB of copies).
#if defined(_OPENMP)  // the NEON cross build of the kernel checks has no OpenMP
#pragma omp parallel for schedule(static)
#endif
  for (int64_t gi = 0; gi < groups; ++gi) {
    uint8_t* g = base + static_cast<size_t>(gi) * group_bytes;
    for (int64_t r = gi * 16; r < src.rows && r < gi * 16 + 16; ++r) {
      const uint8_t* row = src.data + static_cast<size_t>(r) * src.row_bytes;
      const int i = static_cast<int>(r % 16);
      for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* blk = row + static_cast<size_t>(b) * block_bytes;
        std::memcpy(g + 32 * b + 2 * i, blk + d_off, 2);
        uint8_t* codes = g + scale_bytes + static_cast<size_t>(b) * lines * 64;
        for (size_t k = 0; k < lines; ++k) std::memcpy(codes + 64 * k + 4 * i, blk + qs_off + 4 * k, 4);
      }
    }
  }
  *dst = src;
  dst->data = base;
  dst->interleave = 16;
  dst->group_bytes = group_bytes;
  return Status::Ok();
}

}  // namespace trine::kernels
