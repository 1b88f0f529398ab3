// The KV cache: one pool of fixed-size blocks shared by every sequence of a context.
//
// Each sequence holds positions 0 .. pos(seq) - 1; position p lives in row p % kKvBlockPositions
// of the pool block named by entry p / kKvBlockPositions of the sequence's block table. A block
// can be shared by several sequences (a forked prompt prefix): it carries a reference count and
// is copied before one of them writes into it (copy on write). No position is reserved for a
// sequence that does not use it, so many short sequences and one long one draw on the same pool.
//
// Memory layout: K is (n_layer, n_blocks, kKvBlockPositions, k_row bytes) and V likewise, so one
// layer's rows of one block are contiguous, and a single sequence whose table is 0, 1, 2, ... is
// laid out exactly as a plain (n_layer, n_ctx, row) cache.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "ref/attention_ref.h"

namespace trine {

// KV cache precision (llama.cpp's -ctk / -ctv types). Q8_0 and Q4_0 store each row as 32-value
// blocks and need head_dim % 32 == 0; F32 is for K and V together only.
enum class KvType { kF16, kF32, kQ8_0, kQ4_0 };

const char* KvTypeName(KvType type);                     // "f16", "f32", "q8_0", "q4_0"
bool ParseKvType(const std::string& name, KvType* type);  // the names above
// Bytes of one position of one layer's K (or V) rows of kv_dim values.
size_t KvRowBytes(KvType type, int kv_dim);
// The attention kernels' name of a row type (F32 rows have none: kF16 is returned).
kernels::KvRowType KvRowTypeOf(KvType type);

constexpr int kKvBlockPositions = kernels::kKvBlockPositions;

class KvCache {
 public:
  KvType type = KvType::kF16;    // K rows
  KvType type_v = KvType::kF16;  // V rows
  int n_layer = 0;
  int kv_dim = 0;
  size_t k_row = 0, v_row = 0;  // bytes per position of one layer

  // Checks the combination (F32 only for both; block types need head_dim % 32 == 0) and sizes a
  // zeroed pool of PoolBlocks(pool_positions) blocks for up to n_seq_max sequences of at most
  // n_ctx positions each (pool_positions 0: n_ctx). With one sequence and a pool that holds n_ctx
  // positions, the sequence owns every block from the start (no allocation while decoding).
  Status Allocate(KvType type_k, KvType type_v, int n_layer, int n_ctx, int n_head_kv, int head_dim,
                  int n_seq_max = 1, int pool_positions = 0);
  // Blocks of a pool of `positions` positions, and the bytes such a pool takes (0: invalid sizes).
  static int PoolBlocks(int positions) { return (positions + kKvBlockPositions - 1) / kKvBlockPositions; }
  static double Bytes(KvType type_k, KvType type_v, int n_layer, int pool_positions, int kv_dim);

  int n_ctx() const { return n_ctx_; }
  int n_seq_max() const { return static_cast<int>(seqs_.size()); }
  int n_blocks() const { return n_blocks_; }
  int n_free_blocks() const { return static_cast<int>(free_.size()); }
  // Positions held by `seq` (0 .. n_seq_max - 1).
  int SeqPos(int seq) const { return seqs_[static_cast<size_t>(seq)].n_pos; }

  // Makes positions SeqPos(seq) .. n - 1 of `seq` writable: allocates the blocks they need and
  // copies any of those blocks the sequence shares with another one. On error nothing changes.
  // Errors: n > n_ctx (INVALID_ARGUMENT), not enough free blocks (OUT_OF_MEMORY, "KV pool full").
  Status Reserve(int seq, int n);
  // The free blocks Reserve(seq, n) would take.
  int BlocksNeeded(int seq, int n) const;
  // Blocks `seq` holds alone: what Truncate(seq, 0) would give back.
  int OwnedBlocks(int seq) const;
  // Declares positions 0 .. n - 1 of `seq` written (n within what Reserve made room for).
  void SetSeqPos(int seq, int n) { seqs_[static_cast<size_t>(seq)].n_pos = n; }
  // Forgets positions >= p of `seq` (p is clamped to [0, SeqPos]) and returns the blocks it no
  // longer uses, also those Reserve took beyond SeqPos.
  void Truncate(int seq, int p);
  // `dst` drops what it held and becomes the first n positions of `src` (n <= SeqPos(src)),
  // sharing its blocks. Errors: src == dst, sequence ids out of range, n out of range.
  Status Fork(int src, int dst, int n);

  // The block table of `seq` (entry i: the pool block of positions 16i .. 16i + 15).
  const int32_t* BlockTable(int seq) const { return seqs_[static_cast<size_t>(seq)].blocks.data(); }
  // Head `head` of layer `layer` of `seq` as the attention kernels read it.
  kernels::KvHead KHead(int seq, int layer, size_t head_offset_bytes, kernels::KvRowType row_type) const;
  kernels::KvHead VHead(int seq, int layer, size_t head_offset_bytes, kernels::KvRowType row_type) const;

  const uint8_t* KRow(int seq, int layer, int pos) const { return Row(k_, k_row, seq, layer, pos); }
  const uint8_t* VRow(int seq, int layer, int pos) const { return Row(v_, v_row, seq, layer, pos); }
  // Writes position `pos` of layer `layer` of `seq` (reserved) from kv_dim floats of K and V.
  void Store(int seq, int layer, int pos, const float* k, const float* v);
  // Copies `n` values of position `pos` of layer `layer`, from element `offset`, into fp32
  // (for the block types, offset and n must be multiples of 32).
  void LoadK(int seq, int layer, int pos, int offset, int n, float* dst) const;
  void LoadV(int seq, int layer, int pos, int offset, int n, float* dst) const;

 private:
  struct Seq {
    std::vector<int32_t> blocks;
    int n_pos = 0;
  };
  const uint8_t* Row(const std::vector<uint8_t>& pool, size_t row, int seq, int layer, int pos) const {
    const int32_t b = seqs_[static_cast<size_t>(seq)].blocks[static_cast<size_t>(pos / kKvBlockPositions)];
    return pool.data() + ((static_cast<size_t>(layer) * static_cast<size_t>(n_blocks_) + static_cast<size_t>(b)) *
                              kKvBlockPositions + static_cast<size_t>(pos % kKvBlockPositions)) * row;
  }
  kernels::KvHead HeadOf(const std::vector<uint8_t>& pool, size_t row, int seq, int layer, size_t head_offset,
                         kernels::KvRowType row_type) const;
  void CopyBlock(int32_t from, int32_t to);
  void Unref(int32_t block);

  int n_ctx_ = 0;
  int n_blocks_ = 0;
  std::vector<uint8_t> k_, v_;
  std::vector<Seq> seqs_;
  std::vector<int32_t> refs_;  // sequences using each block
  std::vector<int32_t> free_;  // blocks with no user (taken from the back)
};

}  // namespace trine
