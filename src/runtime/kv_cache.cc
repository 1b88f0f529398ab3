// The paged KV cache: row formats, the block pool, copy on write.
#include "runtime/kv_cache.h"

#include <algorithm>
#include <cstring>

#include "core/fp16.h"
#include "kernels.h"
#include "tensor/blocks.h"
#include "tensor/quantize_ref.h"

namespace trine {

const char* KvTypeName(KvType type) {
  switch (type) {
    case KvType::kF16:
      return "f16";
    case KvType::kF32:
      return "f32";
    case KvType::kQ8_0:
      return "q8_0";
    case KvType::kQ4_0:
      return "q4_0";
  }
  return "?";
}

bool ParseKvType(const std::string& name, KvType* type) {
  for (KvType t : {KvType::kF16, KvType::kF32, KvType::kQ8_0, KvType::kQ4_0}) {
    if (name == KvTypeName(t)) {
      *type = t;
      return true;
    }
  }
  return false;
}

kernels::KvRowType KvRowTypeOf(KvType t) {
  if (t == KvType::kQ8_0) return kernels::KvRowType::kQ8_0;
  if (t == KvType::kQ4_0) return kernels::KvRowType::kQ4_0;
  return kernels::KvRowType::kF16;
}

namespace {

bool IsBlockType(KvType t) { return t == KvType::kQ8_0 || t == KvType::kQ4_0; }

void StoreRow(KvType type, const float* src, int n, uint8_t* dst) {
  switch (type) {
    case KvType::kF16:
      // fp16 rounding of every value: the active ISA's F16 activation quantizer (same bits).
      kernels::QuantizeActivations(TypeId::kF16, src, n, dst);
      break;
    case KvType::kF32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      break;
    case KvType::kQ8_0:
      QuantizeRowQ8_0(src, dst, n);  // the cache write of llama.cpp (ggml_cpy to q8_0)
      break;
    case KvType::kQ4_0:
      QuantizeRowQ4_0(src, dst, n);
      break;
  }
}

void LoadRow(KvType type, const uint8_t* row, int offset, int n, float* dst) {
  switch (type) {
    case KvType::kF16: {
      const float* table = Fp16ToFp32Table();
      const uint16_t* r = reinterpret_cast<const uint16_t*>(row) + offset;
      for (int i = 0; i < n; ++i) dst[i] = table[r[i]];
      break;
    }
    case KvType::kF32:
      std::memcpy(dst, reinterpret_cast<const float*>(row) + offset, static_cast<size_t>(n) * sizeof(float));
      break;
    case KvType::kQ8_0:
      DequantizeRowQ8_0(row + static_cast<size_t>(offset / kQK8_0) * sizeof(BlockQ8_0), dst, n);
      break;
    case KvType::kQ4_0:
      DequantizeRowQ4_0(row + static_cast<size_t>(offset / kQK4_0) * sizeof(BlockQ4_0), dst, n);
      break;
  }
}

}  // namespace

size_t KvRowBytes(KvType type, int kv_dim) {
  if (type == KvType::kF32) return static_cast<size_t>(kv_dim) * sizeof(float);
  return kernels::KvRowBytes(KvRowTypeOf(type), kv_dim);
}

double KvCache::Bytes(KvType type_k, KvType type_v, int n_layer, int pool_positions, int kv_dim) {
  return static_cast<double>(n_layer) * static_cast<double>(PoolBlocks(pool_positions)) * kKvBlockPositions *
         static_cast<double>(KvRowBytes(type_k, kv_dim) + KvRowBytes(type_v, kv_dim));
}

Status KvCache::Allocate(KvType tk, KvType tv, int layers, int ctx, int n_head_kv, int head_dim, int n_seq_max,
                         int pool_positions) {
  if ((tk == KvType::kF32) != (tv == KvType::kF32)) {
    return InvalidArgument(std::string("KV cache types ") + KvTypeName(tk) + " (K) and " + KvTypeName(tv) +
                           " (V): f32 is only supported for K and V together");
  }
  if ((IsBlockType(tk) || IsBlockType(tv)) && head_dim % 32 != 0) {
    return InvalidArgument(std::string("KV cache type ") + KvTypeName(IsBlockType(tk) ? tk : tv) +
                           " needs a head size that is a multiple of 32; this model's is " +
                           std::to_string(head_dim) + " (use -ctk/-ctv f16)");
  }
  if (n_seq_max < 1) return InvalidArgument("n_seq_max must be >= 1, got " + std::to_string(n_seq_max));
  if (pool_positions < 0) return InvalidArgument("KV pool size must be >= 0, got " + std::to_string(pool_positions));
  type = tk;
  type_v = tv;
  n_layer = layers;
  n_ctx_ = ctx;
  kv_dim = n_head_kv * head_dim;
  k_row = KvRowBytes(tk, kv_dim);
  v_row = KvRowBytes(tv, kv_dim);
  n_blocks_ = PoolBlocks(pool_positions > 0 ? pool_positions : ctx);
  const size_t rows = static_cast<size_t>(layers) * static_cast<size_t>(n_blocks_) * kKvBlockPositions;
  k_.assign(rows * k_row, 0);
  v_.assign(rows * v_row, 0);
  seqs_.assign(static_cast<size_t>(n_seq_max), Seq());
  refs_.assign(static_cast<size_t>(n_blocks_), 0);
  free_.clear();
  for (int32_t b = n_blocks_ - 1; b >= 0; --b) free_.push_back(b);  // block 0 is taken first
  if (n_seq_max == 1 && n_blocks_ >= PoolBlocks(ctx)) {
    // One sequence that can fill the pool: it owns the blocks in order from the start.
    Seq& s = seqs_[0];
    while (!free_.empty()) {
      s.blocks.push_back(free_.back());
      refs_[static_cast<size_t>(free_.back())] = 1;
      free_.pop_back();
    }
  }
  return Status::Ok();
}

void KvCache::CopyBlock(int32_t from, int32_t to) {
  for (int l = 0; l < n_layer; ++l) {
    const size_t base = static_cast<size_t>(l) * static_cast<size_t>(n_blocks_);
    const size_t kb = k_row * kKvBlockPositions, vb = v_row * kKvBlockPositions;
    std::memcpy(k_.data() + (base + static_cast<size_t>(to)) * kb, k_.data() + (base + static_cast<size_t>(from)) * kb, kb);
    std::memcpy(v_.data() + (base + static_cast<size_t>(to)) * vb, v_.data() + (base + static_cast<size_t>(from)) * vb, vb);
  }
}

void KvCache::Unref(int32_t block) {
  if (--refs_[static_cast<size_t>(block)] == 0) free_.push_back(block);
}

int KvCache::BlocksNeeded(int seq, int n) const {
  const Seq& s = seqs_[static_cast<size_t>(seq)];
  if (n <= s.n_pos) return 0;
  // A new block for each missing table entry, and a copy of each shared one written.
  int need = 0;
  for (size_t i = static_cast<size_t>(s.n_pos / kKvBlockPositions); i <= static_cast<size_t>((n - 1) / kKvBlockPositions);
       ++i) {
    if (i >= s.blocks.size() || refs_[static_cast<size_t>(s.blocks[i])] > 1) ++need;
  }
  return need;
}

int KvCache::OwnedBlocks(int seq) const {
  int n = 0;
  for (int32_t b : seqs_[static_cast<size_t>(seq)].blocks) n += refs_[static_cast<size_t>(b)] == 1 ? 1 : 0;
  return n;
}

Status KvCache::Reserve(int seq, int n) {
  Seq& s = seqs_[static_cast<size_t>(seq)];
  if (n > n_ctx_) {
    return InvalidArgument("sequence " + std::to_string(seq) + " would hold " + std::to_string(n) +
                           " positions, more than the context size " + std::to_string(n_ctx_) + " (use -c)");
  }
  if (n <= s.n_pos) return Status::Ok();
  const size_t first = static_cast<size_t>(s.n_pos / kKvBlockPositions);
  const size_t last = static_cast<size_t>((n - 1) / kKvBlockPositions);
  const size_t need = static_cast<size_t>(BlocksNeeded(seq, n));
  if (need > free_.size()) {
    return Status(StatusCode::kOutOfMemory,
                  "KV pool full: sequence " + std::to_string(seq) + " needs " + std::to_string(need) +
                      " more blocks of " + std::to_string(kKvBlockPositions) + " positions, " +
                      std::to_string(free_.size()) + " of " + std::to_string(n_blocks_) +
                      " are free (a larger pool: -c / kv_pool_size)");
  }
  for (size_t i = first; i <= last; ++i) {
    if (i < s.blocks.size() && refs_[static_cast<size_t>(s.blocks[i])] <= 1) continue;
    const int32_t fresh = free_.back();
    free_.pop_back();
    refs_[static_cast<size_t>(fresh)] = 1;
    if (i < s.blocks.size()) {  // shared: copy, then let go of the shared block
      CopyBlock(s.blocks[i], fresh);
      Unref(s.blocks[i]);
      s.blocks[i] = fresh;
    } else {
      s.blocks.push_back(fresh);
    }
  }
  return Status::Ok();
}

void KvCache::Truncate(int seq, int p) {
  Seq& s = seqs_[static_cast<size_t>(seq)];
  s.n_pos = std::clamp(p, 0, s.n_pos);
  // A single sequence that owns the whole pool keeps it (nothing else could use the blocks).
  if (seqs_.size() == 1 && static_cast<int>(s.blocks.size()) == n_blocks_) return;
  const size_t keep = static_cast<size_t>(PoolBlocks(s.n_pos));  // also drops blocks reserved but unused
  while (s.blocks.size() > keep) {
    Unref(s.blocks.back());
    s.blocks.pop_back();
  }
}

Status KvCache::Fork(int src, int dst, int n) {
  const int n_seq = n_seq_max();
  if (src < 0 || src >= n_seq || dst < 0 || dst >= n_seq) {
    return InvalidArgument("sequence ids " + std::to_string(src) + " -> " + std::to_string(dst) + " outside [0, " +
                           std::to_string(n_seq) + ")");
  }
  if (src == dst) return InvalidArgument("cannot fork sequence " + std::to_string(src) + " onto itself");
  const Seq& s = seqs_[static_cast<size_t>(src)];
  if (n < 0 || n > s.n_pos) {
    return InvalidArgument("fork of " + std::to_string(n) + " positions: sequence " + std::to_string(src) + " holds " +
                           std::to_string(s.n_pos));
  }
  Truncate(dst, 0);  // several sequences: no block is left (only a lone sequence keeps the pool)
  Seq& d = seqs_[static_cast<size_t>(dst)];
  d.blocks.assign(s.blocks.begin(), s.blocks.begin() + PoolBlocks(n));
  for (int32_t b : d.blocks) ++refs_[static_cast<size_t>(b)];
  d.n_pos = n;
  return Status::Ok();
}

kernels::KvHead KvCache::HeadOf(const std::vector<uint8_t>& pool, size_t row, int seq, int layer,
                                size_t head_offset, kernels::KvRowType row_type) const {
  kernels::KvHead h;
  h.type = row_type;
  h.stride = row;
  h.block_bytes = row * kKvBlockPositions;
  h.data = pool.data() + static_cast<size_t>(layer) * static_cast<size_t>(n_blocks_) * h.block_bytes + head_offset;
  h.blocks = BlockTable(seq);
  return h;
}

kernels::KvHead KvCache::KHead(int seq, int layer, size_t head_offset, kernels::KvRowType row_type) const {
  return HeadOf(k_, k_row, seq, layer, head_offset, row_type);
}

kernels::KvHead KvCache::VHead(int seq, int layer, size_t head_offset, kernels::KvRowType row_type) const {
  return HeadOf(v_, v_row, seq, layer, head_offset, row_type);
}

void KvCache::Store(int seq, int layer, int pos, const float* ks, const float* vs) {
  StoreRow(type, ks, kv_dim, const_cast<uint8_t*>(KRow(seq, layer, pos)));
  StoreRow(type_v, vs, kv_dim, const_cast<uint8_t*>(VRow(seq, layer, pos)));
}

void KvCache::LoadK(int seq, int layer, int pos, int offset, int n, float* dst) const {
  LoadRow(type, KRow(seq, layer, pos), offset, n, dst);
}

void KvCache::LoadV(int seq, int layer, int pos, int offset, int n, float* dst) const {
  LoadRow(type_v, VRow(seq, layer, pos), offset, n, dst);
}

}  // namespace trine
