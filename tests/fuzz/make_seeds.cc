// Writes the seed corpus for gguf_reader_fuzz into the directory given as argv[1]: a minimal raw
// file, a kv-only file, a tiny complete llama model (1 layer, E 32, 8 tokens) and an I2_S tensor
// in a bitnet-b1.58 file. Built only with TRINE_BUILD_FUZZERS; the seeds are checked in too.
#include <cstdio>
#include <string>
#include <vector>

#include "gguf/gguf_test_builders.h"

namespace t = trine::testing;

static bool Write(const std::string& path, const std::vector<uint8_t>& b) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return false;
  const bool ok = std::fwrite(b.data(), 1, b.size(), f) == b.size();
  return std::fclose(f) == 0 && ok;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  bool ok = Write(dir + "/minimal.gguf", t::MinimalRaw().Encode());

  t::RawFile kv_only = t::MinimalRaw();
  kv_only.tensors.clear();
  kv_only.pad = false;
  kv_only.kvs.push_back(t::Kv("x.a", 9, t::Bytes().U32(8).U64(2).Str("a").Str("bc")));
  kv_only.kvs.push_back(t::Kv("x.n", 9, t::Bytes().U32(9).U64(1).U32(4).U64(1).U32(7)));
  ok &= Write(dir + "/kv_only.gguf", kv_only.Encode());

  t::RawFile i2s = t::MinimalRaw();
  i2s.kvs[0] = t::KvStr("general.architecture", "bitnet-b1.58");
  i2s.tensors[0].type = 36;
  i2s.tensors[0].ne = {128, 2};
  ok &= Write(dir + "/i2s.gguf", i2s.Encode());

  // A tiny llama model: E 32, 2 heads (1 kv head), F 32, 1 layer, 8 tokens, tied output.
  t::ModelSpec m;
  m.Set("general.architecture", trine::GgufValue::String("llama"));
  m.Set("llama.context_length", trine::GgufValue::U32(64));
  m.Set("llama.embedding_length", trine::GgufValue::U32(32));
  m.Set("llama.block_count", trine::GgufValue::U32(1));
  m.Set("llama.feed_forward_length", trine::GgufValue::U32(32));
  m.Set("llama.attention.head_count", trine::GgufValue::U32(2));
  m.Set("llama.attention.head_count_kv", trine::GgufValue::U32(1));
  m.Set("llama.attention.layer_norm_rms_epsilon", trine::GgufValue::F32(1e-5f));
  m.Set("tokenizer.ggml.model", trine::GgufValue::String("llama"));
  t::SetVocab(&m, 8);
  m.Set("tokenizer.ggml.bos_token_id", trine::GgufValue::U32(1));
  m.tensors = {{"token_embd.weight", trine::TypeId::kF32, {32, 8}},
               {"blk.0.attn_norm.weight", trine::TypeId::kF32, {32}},
               {"blk.0.attn_q.weight", trine::TypeId::kF16, {32, 32}},
               {"blk.0.attn_k.weight", trine::TypeId::kF16, {32, 16}},
               {"blk.0.attn_v.weight", trine::TypeId::kF16, {32, 16}},
               {"blk.0.attn_output.weight", trine::TypeId::kF16, {32, 32}},
               {"blk.0.ffn_norm.weight", trine::TypeId::kF32, {32}},
               {"blk.0.ffn_gate.weight", trine::TypeId::kQ8_0, {32, 32}},
               {"blk.0.ffn_up.weight", trine::TypeId::kQ8_0, {32, 32}},
               {"blk.0.ffn_down.weight", trine::TypeId::kQ4_0, {32, 32}},
               {"output_norm.weight", trine::TypeId::kF32, {32}}};
  const std::vector<uint8_t> model = t::BuildModel(m);
  ok &= !model.empty() && Write(dir + "/tiny_llama.gguf", model);
  if (!ok) std::fprintf(stderr, "failed to write seeds to %s\n", dir.c_str());
  return ok ? 0 : 1;
}
