// A catalogue of malformed GGUF files. Each case is built in memory (raw bytes for header-level
// faults, a mutated valid tiny llama model for model- and tokenizer-level faults) and must be
// refused twice: by the library (GgufFile::Open, LoadModelConfig or LoadVocab returns a non-ok
// Status whose message names the problem) and by `trine inspect` (exit 1, stderr "error: ...",
// no signal). Also: every truncation of a valid model fails cleanly, absurd counts are refused
// without allocating, and the valid base model passes, so each check can fail.
#include <gtest/gtest.h>
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <limits>
#include <new>
#include <set>

#include "common/test_util.h"
#include "gguf/gguf_reader.h"
#include "gguf/gguf_test_builders.h"
#include "model/model_config.h"
#include "tokenizer/vocab.h"

// ---- Allocation accounting for this test binary ---------------------------------------------
// Replaces the global operator new/delete to track the high-water mark of live heap bytes, so a
// test can check that parsing a file did not allocate from a count the file merely claims.
namespace {
std::atomic<size_t> g_live_bytes{0};
std::atomic<size_t> g_peak_bytes{0};

void* TrackedAllocOrNull(size_t n) noexcept {
  void* p = std::malloc(n ? n : 1);
  if (!p) return nullptr;
  const size_t live = g_live_bytes.fetch_add(malloc_usable_size(p)) + malloc_usable_size(p);
  size_t peak = g_peak_bytes.load();
  while (live > peak && !g_peak_bytes.compare_exchange_weak(peak, live)) {
  }
  return p;
}
void* TrackedAlloc(size_t n) {
  void* p = TrackedAllocOrNull(n);
  if (!p) throw std::bad_alloc();
  return p;
}
void TrackedFree(void* p) noexcept {
  if (!p) return;
  g_live_bytes.fetch_sub(malloc_usable_size(p));
  std::free(p);
}
}  // namespace

void* operator new(size_t n) { return TrackedAlloc(n); }
void* operator new[](size_t n) { return TrackedAlloc(n); }
void operator delete(void* p) noexcept { TrackedFree(p); }
void operator delete[](void* p) noexcept { TrackedFree(p); }
void operator delete(void* p, size_t) noexcept { TrackedFree(p); }
void operator delete[](void* p, size_t) noexcept { TrackedFree(p); }
// The nothrow forms too (std::stable_sort uses them), so every pair matches under ASan. The
// align_val_t forms are left to the runtime: they are allocated and freed there consistently.
void* operator new(size_t n, const std::nothrow_t&) noexcept { return TrackedAllocOrNull(n); }
void* operator new[](size_t n, const std::nothrow_t&) noexcept { return TrackedAllocOrNull(n); }
void operator delete(void* p, const std::nothrow_t&) noexcept { TrackedFree(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { TrackedFree(p); }

namespace trine {
namespace {

using testing::Bytes;
using testing::Kv;
using testing::KvStr;
using testing::KvU32;
using testing::MinimalRaw;
using testing::ModelSpec;
using testing::RawFile;
using testing::RawTensor;
using testing::RunTrine;
using testing::TempPath;
using testing::WriteFileBytes;

constexpr uint64_t kU64Max = std::numeric_limits<uint64_t>::max();
constexpr size_t kPeakLimit = 64u << 20;  // heap growth allowed while checking one small file

// Heap high-water mark (bytes above the live heap at construction) over a scope.
class PeakHeap {
 public:
  PeakHeap() : base_(g_live_bytes.load()) { g_peak_bytes.store(base_); }
  size_t growth() const { return g_peak_bytes.load() - base_; }

 private:
  size_t base_;
};

// Quotes a path for the shell that RunTrine uses.
std::string Quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// ---- The valid base files ------------------------------------------------------------------

const std::vector<uint8_t>& BaseBytes() {
  static const std::vector<uint8_t> bytes = testing::BuildModel(testing::BaseModel());
  return bytes;
}

struct BaseLayout {
  uint64_t data_offset = 0;
  uint64_t data_end = 0;  // end of the last tensor's bytes
};
const BaseLayout& Layout() {
  static const BaseLayout layout = [] {
    BaseLayout l;
    const std::string path = TempPath("layout-base.gguf");
    WriteFileBytes(path, BaseBytes());
    std::unique_ptr<GgufFile> f;
    if (!GgufFile::Open(path, &f).ok()) return l;
    l.data_offset = f->data_offset();
    for (const auto& t : f->tensors()) l.data_end = std::max(l.data_end, t.file_offset + t.n_bytes);
    return l;
  }();
  return layout;
}

std::vector<uint8_t> Truncated(size_t n) {
  const auto& b = BaseBytes();
  return std::vector<uint8_t>(b.begin(), b.begin() + static_cast<long>(std::min(n, b.size())));
}

// Offset `delta` bytes past the start of the first occurrence of `needle` in the base file.
size_t BaseOffsetOf(const std::string& needle, size_t delta) {
  const size_t at = testing::FindBytes(BaseBytes(), needle);
  return at == SIZE_MAX ? 0 : at + delta;
}

// ---- The catalogue ---------------------------------------------------------------------------

enum class Stage {
  kOpen,    // GgufFile::Open must fail
  kConfig,  // Open succeeds, LoadModelConfig must fail
  kVocab,   // Open and LoadModelConfig succeed, LoadVocab must fail
};

struct Case {
  std::string name;
  Stage stage;
  std::string expect;  // substring of the error message (library and CLI)
  std::function<std::vector<uint8_t>()> make;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

std::function<std::vector<uint8_t>()> Raw(std::function<void(RawFile&)> mutate) {
  return [mutate] {
    RawFile f = MinimalRaw();
    mutate(f);
    return f.Encode();
  };
}
std::function<std::vector<uint8_t>()> Model(std::function<void(ModelSpec&)> mutate) {
  return [mutate] {
    ModelSpec m = testing::BaseModel();
    mutate(m);
    return testing::BuildModel(m);
  };
}

// The minimal raw file with one extra metadata pair after general.architecture.
std::function<std::vector<uint8_t>()> RawKv(Bytes kv) {
  return Raw([kv](RawFile& f) { f.kvs.push_back(kv); });
}
// As RawKv, but the file ends right after the pair (no tensors, no padding).
std::function<std::vector<uint8_t>()> RawKvAtEnd(Bytes kv) {
  return Raw([kv](RawFile& f) {
    f.kvs.push_back(kv);
    f.tensors.clear();
    f.pad = false;
  });
}
std::function<std::vector<uint8_t>()> RawTensorType(uint32_t type, std::vector<uint64_t> ne, std::string arch) {
  return Raw([=](RawFile& f) {
    f.kvs[0] = KvStr("general.architecture", arch);
    f.tensors[0].type = type;
    f.tensors[0].ne = ne;
  });
}

Bytes NestedArray(int depth) {
  // depth levels of single-element arrays around an empty u8 array.
  Bytes inner;
  inner.U32(0).U64(0);
  for (int i = 0; i < depth; ++i) {
    Bytes outer;
    outer.U32(9).U64(1).Cat(inner);
    inner = outer;
  }
  return inner;
}

std::vector<Case> Catalogue() {
  std::vector<Case> c;
  auto add = [&](std::string name, Stage stage, std::string expect, std::function<std::vector<uint8_t>()> make) {
    c.push_back({std::move(name), stage, std::move(expect), std::move(make)});
  };
  const Stage O = Stage::kOpen, C = Stage::kConfig, V = Stage::kVocab;

  // -- Truncations of the valid model, one per section.
  add("TruncEmpty", O, "not a GGUF file", [] { return Truncated(0); });
  add("TruncInMagic", O, "not a GGUF file", [] { return Truncated(2); });
  add("TruncInVersion", O, "while reading version", [] { return Truncated(6); });
  add("TruncInTensorCount", O, "while reading tensor count", [] { return Truncated(12); });
  add("TruncInKvCount", O, "while reading metadata count", [] { return Truncated(20); });
  // Cut early, the valid model's counts no longer fit in what is left: that check comes first.
  add("TruncInKeyLength", O, "metadata count 20 cannot fit in a file of 27 bytes", [] { return Truncated(27); });
  add("TruncInFirstKey", O, "metadata count 20 cannot fit in a file of 37 bytes", [] {
    return Truncated(BaseOffsetOf("general.architecture", 5));
  });
  add("TruncInFirstValue", O, "metadata count 20 cannot fit", [] {
    return Truncated(BaseOffsetOf("general.architecture", 20 + 4 + 8 + 2));
  });
  add("TruncInScalarValue", O, "metadata count 20 cannot fit", [] {
    return Truncated(BaseOffsetOf("llama.block_count", 17 + 4 + 2));
  });
  add("TruncInArrayHeader", O, "tensor count 21 cannot fit", [] {
    return Truncated(BaseOffsetOf("tokenizer.ggml.tokens", 21 + 4 + 4 + 3));
  });
  add("TruncInStringArray", O, "tensor count 21 cannot fit", [] {
    return Truncated(BaseOffsetOf("tokenizer.ggml.tokens", 21 + 4 + 4 + 8 + 40));
  });
  add("TruncInScalarArray", O, "array of 32 f32 cannot fit", [] {
    return Truncated(BaseOffsetOf("tokenizer.ggml.scores", 21 + 4 + 4 + 8 + 10));
  });
  add("TruncInTensorName", O, "name of tensor 1 length", [] { return Truncated(BaseOffsetOf("blk.0.attn_norm", 3)); });
  add("TruncInTensorDims", O, "tensor 'blk.0.attn_q.weight' dimension 0", [] {
    return Truncated(BaseOffsetOf("blk.0.attn_q.weight", 19 + 4 + 3));
  });
  add("TruncInTensorType", O, "tensor 'blk.0.attn_q.weight' type", [] {
    return Truncated(BaseOffsetOf("blk.0.attn_q.weight", 19 + 4 + 16 + 2));
  });
  add("TruncInTensorOffset", O, "tensor 'blk.0.attn_q.weight' offset", [] {
    return Truncated(BaseOffsetOf("blk.0.attn_q.weight", 19 + 4 + 16 + 4 + 5));
  });
  add("TruncAtDataStart", O, "extends past the end of the file", [] { return Truncated(Layout().data_offset); });
  add("TruncInData", O, "extends past the end of the file", [] { return Truncated(Layout().data_end / 2); });
  add("TruncInLastTensor", O, "tensor 'output.weight' data", [] { return Truncated(Layout().data_end - 100); });
  add("TruncOneByteShort", O, "tensor 'output.weight' data", [] { return Truncated(Layout().data_end - 1); });

  // Truncations of the minimal raw file (24-byte header, key 'general.architecture' at 24..52,
  // type 52..56, value 56..69, tensor info 't' 69..102, data 128..384), where the counts still
  // fit so the cut is found inside the section itself. kv-only: no tensor, so fewer bytes suffice.
  auto raw_cut = [](size_t n, bool with_tensor) {
    return [n, with_tensor] {
      RawFile f = MinimalRaw();
      if (!with_tensor) {
        f.tensors.clear();
        f.pad = false;
      }
      std::vector<uint8_t> b = f.Encode();
      b.resize(std::min(n, b.size()));
      return b;
    };
  };
  add("RawTruncInKey", O, "key of metadata entry 0 length 20 exceeds the 13 bytes left", raw_cut(45, false));
  add("RawTruncInValueType", O, "while reading type of 'general.architecture'", raw_cut(54, false));
  add("RawTruncInValueLength", O, "while reading value of 'general.architecture' length", raw_cut(60, false));
  add("RawTruncInStringValue", O, "value of 'general.architecture' length 5 exceeds", raw_cut(66, true));
  add("RawTruncInTensorNameLength", O, "while reading name of tensor 0 length", raw_cut(73, true));
  add("RawTruncInTensorName", O, "name of tensor 0 length 1 exceeds", raw_cut(77, true));
  add("RawTruncInTensorDimCount", O, "while reading tensor 't' dimension count", raw_cut(80, true));
  add("RawTruncInTensorDim", O, "while reading tensor 't' dimension 0", raw_cut(85, true));
  add("RawTruncInTensorType", O, "while reading tensor 't' type", raw_cut(92, true));
  add("RawTruncInTensorOffset", O, "while reading tensor 't' offset", raw_cut(98, true));
  add("RawTruncInPadding", O, "data section would start at byte 128", raw_cut(110, true));
  add("RawTruncInData", O, "tensor 't' data (offset 0, 128 bytes) extends past the end", raw_cut(200, true));

  // -- Header fields.
  add("BadMagicGGML", O, "bad magic", Raw([](RawFile& f) { f.magic = "GGML"; }));
  add("BadMagicLowercase", O, "bad magic", Raw([](RawFile& f) { f.magic = "gguf"; }));
  add("BadMagicZeros", O, "bad magic", Raw([](RawFile& f) { f.magic = std::string(4, '\0'); }));
  add("Version0", O, "unsupported GGUF version 0", Raw([](RawFile& f) { f.version = 0; }));
  add("Version1", O, "GGUF version 1 is not supported", Raw([](RawFile& f) { f.version = 1; }));
  add("Version4", O, "unsupported GGUF version 4", Raw([](RawFile& f) { f.version = 4; }));
  add("VersionMax", O, "unsupported GGUF version 4294967295", Raw([](RawFile& f) { f.version = 0xFFFFFFFFu; }));
  add("VersionBigEndian", O, "big-endian", Raw([](RawFile& f) { f.version = 0x03000000u; }));
  add("NKvHuge", O, "metadata count 4611686018427387904 cannot fit",
      Raw([](RawFile& f) { f.n_kv = uint64_t{1} << 62; }));
  add("NKvMax", O, "metadata count 18446744073709551615", Raw([](RawFile& f) { f.n_kv = kU64Max; }));
  add("NTensorsHuge", O, "tensor count 1099511627776 cannot fit",
      Raw([](RawFile& f) { f.n_tensors = uint64_t{1} << 40; }));
  add("NTensorsMax", O, "tensor count 18446744073709551615", Raw([](RawFile& f) { f.n_tensors = kU64Max; }));
  add("NKvOneMoreThanPresent", O, "while reading key of metadata entry 1", Raw([](RawFile& f) {
        f.n_kv = 2;
        f.tensors.clear();
        f.pad = false;
      }));
  add("NTensorsOneMoreThanPresent", O, "tensor 1 has an empty name", Raw([](RawFile& f) { f.n_tensors = 2; }));

  // -- Metadata keys and values.
  add("KeyLengthHuge", O, "key of metadata entry 1 length 1152921504606846976 exceeds",
      RawKv(Bytes().U64(uint64_t{1} << 60).Raw("abc")));
  add("KeyLengthMax", O, "key of metadata entry 1 length 18446744073709551615", RawKv(Bytes().U64(kU64Max)));
  add("KeyEmpty", O, "metadata entry 1 has an empty key", RawKv(Kv("", 4, Bytes().U32(1))));
  add("KeyOverlong", O, "key is 65536 bytes (limit 65535)", RawKv(KvU32(std::string(65536, 'k'), 1)));
  add("KeyInvalidUtf8", O, "key is not valid UTF-8", RawKv(KvU32("general.\xff", 1)));
  add("KeyOverlongUtf8", O, "key is not valid UTF-8", RawKv(KvU32("a\xc0\xae", 1)));
  add("KeySurrogateUtf8", O, "key is not valid UTF-8", RawKv(KvU32("a\xed\xa0\x80", 1)));
  add("KeyCutUtf8", O, "key is not valid UTF-8", RawKv(KvU32("ab\xe2\x82", 1)));
  add("KeyDuplicate", O, "duplicate metadata key 'general.architecture'",
      RawKv(KvStr("general.architecture", "llama")));
  add("ValueType13", O, "key 'x.v': unknown value type 13", RawKv(Kv("x.v", 13, Bytes().U32(0))));
  add("ValueTypeMax", O, "key 'x.v': unknown value type 4294967295", RawKv(Kv("x.v", 0xFFFFFFFFu, Bytes())));
  add("StringLength2e60", O, "value of 'x.s' length 1152921504606846976 exceeds",
      RawKv(Kv("x.s", 8, Bytes().U64(uint64_t{1} << 60).Raw("abc"))));
  add("StringLengthMax", O, "value of 'x.s' length 18446744073709551615", RawKv(Kv("x.s", 8, Bytes().U64(kU64Max))));
  add("BoolValue2", O, "key 'x.b': bool value is 2", RawKv(Kv("x.b", 7, Bytes().U8(2))));
  add("ScalarValueTruncated", O, "while reading value of 'x.u'", RawKvAtEnd(Kv("x.u", 4, Bytes().U8(1).U8(2))));
  add("F64ValueTruncated", O, "while reading value of 'x.d'", RawKvAtEnd(Kv("x.d", 12, Bytes().U32(0))));
  add("ArrayElemType13", O, "key 'x.a': unknown array element type 13",
      RawKv(Kv("x.a", 9, Bytes().U32(13).U64(1).U32(0))));
  add("ArrayElemTypeMax", O, "unknown array element type 4294967295",
      RawKv(Kv("x.a", 9, Bytes().U32(0xFFFFFFFFu).U64(0))));
  add("ArrayU8Count2e40", O, "array of 1099511627776 u8 cannot fit",
      RawKv(Kv("x.a", 9, Bytes().U32(0).U64(uint64_t{1} << 40).U8(1))));
  add("ArrayU64CountMax", O, "array of 18446744073709551615 u64 cannot fit",
      RawKv(Kv("x.a", 9, Bytes().U32(10).U64(kU64Max))));
  add("ArrayStringCount2e61", O, "array of 2305843009213693952 string cannot fit",
      RawKv(Kv("x.a", 9, Bytes().U32(8).U64(uint64_t{1} << 61))));
  add("ArrayNestedCount2e50", O, "array of 1125899906842624 array cannot fit",
      RawKv(Kv("x.a", 9, Bytes().U32(9).U64(uint64_t{1} << 50))));
  add("ArrayStringElemLengthHuge", O, "element 1 of 'x.a' length 1152921504606846976 exceeds",
      RawKv(Kv("x.a", 9, Bytes().U32(8).U64(2).Str("ok").U64(uint64_t{1} << 60))));
  add("ArrayTruncated", O, "array of 8 u32 cannot fit", RawKvAtEnd(Kv("x.a", 9, Bytes().U32(4).U64(8).U32(1).U32(2))));
  add("ArrayNestedTooDeep", O, "arrays nested deeper than 4", RawKv(Kv("x.a", 9, NestedArray(10))));
  add("ArrayNestedBadInner", O, "unknown array element type 77",
      RawKv(Kv("x.a", 9, Bytes().U32(9).U64(1).U32(77).U64(0))));
  add("BoolArrayElement7", O, "key 'x.a': bool array element is 7",
      RawKv(Kv("x.a", 9, Bytes().U32(7).U64(3).U8(1).U8(0).U8(7))));

  // -- Keys the reader interprets.
  add("Alignment0", O, "general.alignment 0 is not a power of two", RawKv(KvU32("general.alignment", 0)));
  add("Alignment3", O, "general.alignment 3 is not a power of two", RawKv(KvU32("general.alignment", 3)));
  add("Alignment48", O, "general.alignment 48 is not a power of two", RawKv(KvU32("general.alignment", 48)));
  add("AlignmentString", O, "'general.alignment' must be u32, found string",
      RawKv(KvStr("general.alignment", "32")));
  add("AlignmentU64", O, "'general.alignment' must be u32, found u64",
      RawKv(Kv("general.alignment", 10, Bytes().U64(32))));
  add("AlignmentI32", O, "'general.alignment' must be u32, found i32",
      RawKv(Kv("general.alignment", 5, Bytes().I32(32))));
  add("ArchitectureNotString", O, "'general.architecture' must be a string, found u32",
      Raw([](RawFile& f) { f.kvs[0] = KvU32("general.architecture", 1); }));

  // -- Tensor infos.
  add("TensorNameEmpty", O, "tensor 0 has an empty name", Raw([](RawFile& f) { f.tensors[0].name = ""; }));
  add("TensorNameOverlong", O, "tensor 0 name is 64 bytes (limit 63)",
      Raw([](RawFile& f) { f.tensors[0].name = std::string(64, 'n'); }));
  add("TensorNameInvalidUtf8", O, "tensor 0 name is not valid UTF-8",
      Raw([](RawFile& f) { f.tensors[0].name = "t\xff"; }));
  add("TensorNameOverlongUtf8", O, "tensor 0 name is not valid UTF-8",
      Raw([](RawFile& f) { f.tensors[0].name = "\xc0\xaf"; }));
  add("TensorNameLengthHuge", O, "name of tensor 0 length 1152921504606846976 exceeds",
      Raw([](RawFile& f) { f.tensors[0].name_length = uint64_t{1} << 60; }));
  add("TensorNameDuplicate", O, "duplicate tensor 't'", Raw([](RawFile& f) {
        f.tensors.push_back({"t", {32}, 0, 128, {}, {}});
      }));
  add("TensorDims0", O, "tensor 't': 0 dimensions", Raw([](RawFile& f) { f.tensors[0].ne = {}; }));
  add("TensorDims5", O, "tensor 't': 5 dimensions", Raw([](RawFile& f) { f.tensors[0].ne = {32, 1, 1, 1, 1}; }));
  add("TensorDimsMax", O, "tensor 't': 4294967295 dimensions", Raw([](RawFile& f) {
        f.tensors[0].n_dims = 0xFFFFFFFFu;
      }));
  add("TensorDimZero", O, "tensor 't': dimension 1 is zero", Raw([](RawFile& f) { f.tensors[0].ne = {32, 0}; }));
  add("TensorDim0Zero", O, "tensor 't': dimension 0 is zero", Raw([](RawFile& f) { f.tensors[0].ne = {0}; }));
  add("TensorDimsOverflow2", O, "tensor 't': shape overflows", Raw([](RawFile& f) {
        f.tensors[0].ne = {uint64_t{1} << 32, uint64_t{1} << 32};
      }));
  add("TensorDimsOverflow4", O, "tensor 't': shape overflows", Raw([](RawFile& f) {
        f.tensors[0].ne = {65536, 65536, 65536, 65536};
      }));
  add("TensorDimTopBit", O, "tensor 't': shape overflows", Raw([](RawFile& f) { f.tensors[0].ne = {uint64_t{1} << 63}; }));
  add("TensorByteSizeOverflow", O, "tensor 't': byte size overflows", Raw([](RawFile& f) {
        f.tensors[0].ne = {uint64_t{1} << 31, uint64_t{1} << 31};
      }));
  add("TensorHugeShape", O, "tensor 't' data (offset 0, 4398046511104 bytes) extends past the end",
      Raw([](RawFile& f) { f.tensors[0].ne = {uint64_t{1} << 20, uint64_t{1} << 20}; }));
  for (uint32_t id : {3u, 31u, 32u, 33u, 37u, 38u, 39u, 1000u, 0xFFFFFFFFu}) {
    add("TensorTypeId" + std::to_string(id), O, "tensor 't': unsupported or unknown tensor type id " + std::to_string(id),
        RawTensorType(id, {256}, "llama"));
  }
  add("TensorTypeId36InLlama", O, "type id 36 (I2_S is read only in bitnet-b1.58 files)",
      RawTensorType(36, {256}, "llama"));
  add("TensorTypeId36InBitnet", O, "type id 36 (I2_S is read only in bitnet-b1.58 files)",
      RawTensorType(36, {256}, "bitnet"));
  add("TensorTypeId36NoArch", O, "type id 36", Raw([](RawFile& f) {
        f.kvs.clear();
        f.tensors[0].type = 36;
        f.tensors[0].ne = {256};
      }));
  add("RowNotBlockMultipleQ8_0", O, "row length 48 is not a multiple of the q8_0 block size 32",
      RawTensorType(8, {48}, "llama"));
  add("RowNotBlockMultipleTQ2_0", O, "row length 128 is not a multiple of the tq2_0 block size 256",
      RawTensorType(35, {128, 2}, "llama"));
  add("RowNotBlockMultipleI2_S", O, "row length 64 is not a multiple of the i2_s block size 128",
      RawTensorType(36, {64}, "bitnet-b1.58"));
  add("OffsetMisaligned", O, "tensor 't' offset 4 is not a multiple of the alignment 32",
      Raw([](RawFile& f) { f.tensors[0].offset = 4; }));
  add("OffsetMisalignedCustomAlignment", O, "offset 32 is not a multiple of the alignment 64", Raw([](RawFile& f) {
        f.kvs.push_back(KvU32("general.alignment", 64));
        f.alignment = 64;
        f.tensors[0].offset = 32;
      }));
  add("OffsetPastEnd", O, "tensor 't' data (offset 1099511627776, 128 bytes) extends past the end",
      Raw([](RawFile& f) { f.tensors[0].offset = uint64_t{1} << 40; }));
  add("OffsetNearU64Max", O, "extends past the end of the file",
      Raw([](RawFile& f) { f.tensors[0].offset = kU64Max & ~uint64_t{31}; }));
  add("OffsetLastByteOut", O, "tensor 't' data (offset 160, 128 bytes) extends past the end",
      Raw([](RawFile& f) { f.tensors[0].offset = 160; }));  // 256 data bytes
  add("DataShorterThanTensor", O, "extends past the end of the file", Raw([](RawFile& f) { f.data_bytes = 64; }));
  add("DataSectionPastEof", O, "data section would start at byte", Raw([](RawFile& f) { f.pad = false; }));
  add("TensorsOverlap", O, "tensor 'a' (bytes 0+128) overlaps tensor 'b' at offset 64", Raw([](RawFile& f) {
        f.tensors = {{"a", {32}, 0, 0, {}, {}}, {"b", {32}, 0, 64, {}, {}}};
      }));
  add("TensorsSameOffset", O, "overlaps tensor", Raw([](RawFile& f) {
        f.tensors = {{"a", {32}, 0, 0, {}, {}}, {"b", {16}, 0, 0, {}, {}}};
      }));
  add("TensorsOverlapOutOfOrder", O, "tensor 'c' (bytes 0+256) overlaps tensor 'a' at offset 128",
      Raw([](RawFile& f) {
        f.data_bytes = 512;
        f.tensors = {{"a", {32}, 0, 128, {}, {}}, {"b", {32}, 0, 256, {}, {}}, {"c", {64}, 0, 0, {}, {}}};
      }));

  // -- Model-level: architecture and hyperparameters.
  add("MissingArchitecture", C, "missing required key 'general.architecture'",
      Model([](ModelSpec& m) { m.Remove("general.architecture"); }));
  add("UnsupportedArchitecture", C, "architecture 'gpt2' is not supported",
      Model([](ModelSpec& m) { m.Set("general.architecture", GgufValue::String("gpt2")); }));
  add("MissingBlockCount", C, "missing required key 'llama.block_count'",
      Model([](ModelSpec& m) { m.Remove("llama.block_count"); }));
  add("MissingEmbeddingLength", C, "missing required key 'llama.embedding_length'",
      Model([](ModelSpec& m) { m.Remove("llama.embedding_length"); }));
  add("MissingHeadCount", C, "missing required key 'llama.attention.head_count'",
      Model([](ModelSpec& m) { m.Remove("llama.attention.head_count"); }));
  add("MissingRmsEps", C, "missing required key 'llama.attention.layer_norm_rms_epsilon'",
      Model([](ModelSpec& m) { m.Remove("llama.attention.layer_norm_rms_epsilon"); }));
  add("MissingContextLength", C, "missing required key 'llama.context_length'",
      Model([](ModelSpec& m) { m.Remove("llama.context_length"); }));
  add("BlockCountString", C, "key 'llama.block_count' must be an integer, found string",
      Model([](ModelSpec& m) { m.Set("llama.block_count", GgufValue::String("2")); }));
  add("EmbeddingLengthF32", C, "key 'llama.embedding_length' must be an integer, found f32",
      Model([](ModelSpec& m) { m.Set("llama.embedding_length", GgufValue::F32(64.0f)); }));
  add("HeadCountBool", C, "key 'llama.attention.head_count' must be an integer, found bool",
      Model([](ModelSpec& m) { m.Set("llama.attention.head_count", GgufValue::Bool(true)); }));
  add("HeadCountArray", C, "key 'llama.attention.head_count' must be an integer, found array", Model([](ModelSpec& m) {
        m.Set("llama.attention.head_count", GgufValue::ArrayOf<uint32_t>(GgufType::kU32, {4, 4}));
      }));
  add("RmsEpsString", C, "key 'llama.attention.layer_norm_rms_epsilon' must be a number, found string",
      Model([](ModelSpec& m) { m.Set("llama.attention.layer_norm_rms_epsilon", GgufValue::String("1e-5")); }));
  add("BlockCountZero", C, "key 'llama.block_count' = 0 is out of range",
      Model([](ModelSpec& m) { m.Set("llama.block_count", GgufValue::U32(0)); }));
  add("BlockCountNegative", C, "key 'llama.block_count' = -1 is out of range",
      Model([](ModelSpec& m) { m.Set("llama.block_count", GgufValue::I32(-1)); }));
  add("BlockCountU64Max", C, "key 'llama.block_count' = 18446744073709551615 is out of range",
      Model([](ModelSpec& m) { m.Set("llama.block_count", GgufValue::U64(kU64Max)); }));
  add("EmbeddingLengthHuge", C, "key 'llama.embedding_length' = 4294967295 is out of range",
      Model([](ModelSpec& m) { m.Set("llama.embedding_length", GgufValue::U32(0xFFFFFFFFu)); }));
  add("HeadCountZero", C, "key 'llama.attention.head_count' = 0 is out of range",
      Model([](ModelSpec& m) { m.Set("llama.attention.head_count", GgufValue::U32(0)); }));
  add("HeadCountNotDividingEmbedding", C, "embedding_length 64 is not divisible by attention.head_count 5",
      Model([](ModelSpec& m) { m.Set("llama.attention.head_count", GgufValue::U32(5)); }));
  add("KvHeadsNotDividingHeads", C, "attention.head_count 4 is not divisible by attention.head_count_kv 3",
      Model([](ModelSpec& m) { m.Set("llama.attention.head_count_kv", GgufValue::U32(3)); }));
  add("KvHeadsMoreThanHeads", C, "attention.head_count 4 is not divisible by attention.head_count_kv 8",
      Model([](ModelSpec& m) { m.Set("llama.attention.head_count_kv", GgufValue::U32(8)); }));
  add("KvHeadsZero", C, "key 'llama.attention.head_count_kv' = 0 is out of range",
      Model([](ModelSpec& m) { m.Set("llama.attention.head_count_kv", GgufValue::U32(0)); }));
  add("RopeDimMismatch", C, "rope.dimension_count 8 must equal the head size 16",
      Model([](ModelSpec& m) { m.Set("llama.rope.dimension_count", GgufValue::U32(8)); }));
  add("KeyLengthMismatch", C, "attention.key_length 32 differs",
      Model([](ModelSpec& m) { m.Set("llama.attention.key_length", GgufValue::U32(32)); }));
  add("RmsEpsNegative", C, "key 'llama.attention.layer_norm_rms_epsilon' = -0.000010 is out of range",
      Model([](ModelSpec& m) { m.Set("llama.attention.layer_norm_rms_epsilon", GgufValue::F32(-1e-5f)); }));
  add("RmsEpsNaN", C, "key 'llama.attention.layer_norm_rms_epsilon' = nan is out of range", Model([](ModelSpec& m) {
        m.Set("llama.attention.layer_norm_rms_epsilon", GgufValue::F32(std::numeric_limits<float>::quiet_NaN()));
      }));
  add("RopeFreqBaseZero", C, "key 'llama.rope.freq_base' = 0.000000 is out of range",
      Model([](ModelSpec& m) { m.Set("llama.rope.freq_base", GgufValue::F32(0.0f)); }));
  add("RopeScalingUnknown", C, "rope scaling type 'yarn2' is not supported",
      Model([](ModelSpec& m) { m.Set("llama.rope.scaling.type", GgufValue::String("yarn2")); }));
  add("VocabSizeMismatch", C, "key 'llama.vocab_size' = 33 is out of range [32, 32]",
      Model([](ModelSpec& m) { m.Set("llama.vocab_size", GgufValue::U32(33)); }));

  // -- Model-level: tensors.
  add("MissingTokenEmbd", C, "missing tensor 'token_embd.weight'",
      Model([](ModelSpec& m) { m.RemoveTensor("token_embd.weight"); }));
  add("MissingOutputNorm", C, "missing tensor 'output_norm.weight'",
      Model([](ModelSpec& m) { m.RemoveTensor("output_norm.weight"); }));
  add("MissingAttnK", C, "missing tensor 'blk.0.attn_k.weight'",
      Model([](ModelSpec& m) { m.RemoveTensor("blk.0.attn_k.weight"); }));
  add("MissingLastLayerFfnDown", C, "missing tensor 'blk.1.ffn_down.weight'",
      Model([](ModelSpec& m) { m.RemoveTensor("blk.1.ffn_down.weight"); }));
  add("BlockCountAboveLayers", C, "missing tensor 'blk.2.attn_norm.weight'",
      Model([](ModelSpec& m) { m.Set("llama.block_count", GgufValue::U32(3)); }));
  add("WrongShapeAttnK", C, "tensor 'blk.0.attn_k.weight' has shape [64, 64], expected [64, 32]",
      Model([](ModelSpec& m) { m.Tensor("blk.0.attn_k.weight")->ne = {64, 64}; }));
  add("WrongShapeFfnDownTransposed", C, "tensor 'blk.1.ffn_down.weight' has shape [64, 128], expected [128, 64]",
      Model([](ModelSpec& m) { m.Tensor("blk.1.ffn_down.weight")->ne = {64, 128}; }));
  add("WrongShapeNorm", C, "tensor 'blk.0.attn_norm.weight' has shape [32], expected [64]",
      Model([](ModelSpec& m) { m.Tensor("blk.0.attn_norm.weight")->ne = {32}; }));
  add("WrongShapeNorm2D", C, "tensor 'output_norm.weight' has shape [64, 2], expected [64]",
      Model([](ModelSpec& m) { m.Tensor("output_norm.weight")->ne = {64, 2}; }));
  add("WrongShapeAttnQ3D", C, "tensor 'blk.0.attn_q.weight' has shape [64, 32, 2], expected [64, 64]",
      Model([](ModelSpec& m) { m.Tensor("blk.0.attn_q.weight")->ne = {64, 32, 2}; }));
  add("WrongShapeTokenEmbd", C, "tensor 'token_embd.weight' has shape [32, 64], expected [64, n_vocab]",
      Model([](ModelSpec& m) { m.Tensor("token_embd.weight")->ne = {32, 64}; }));
  add("TokenEmbd1D", C, "tensor 'token_embd.weight' has shape [2048]",
      Model([](ModelSpec& m) { m.Tensor("token_embd.weight")->ne = {2048}; }));
  add("WrongShapeOutput", C, "tensor 'output.weight' has shape [64, 31], expected [64, 32]",
      Model([](ModelSpec& m) { m.Tensor("output.weight")->ne = {64, 31}; }));
  add("NormInQ8_0", C, "tensor 'blk.0.attn_norm.weight' must be f32, f16 or bf16, found q8_0",
      Model([](ModelSpec& m) { m.Tensor("blk.0.attn_norm.weight")->type = TypeId::kQ8_0; }));
  add("OutputNormInQ4_0", C, "tensor 'output_norm.weight' must be f32, f16 or bf16, found q4_0",
      Model([](ModelSpec& m) { m.Tensor("output_norm.weight")->type = TypeId::kQ4_0; }));
  add("VocabLargerThanTokenEmbd", C, "tokenizer has 33 tokens but token_embd.weight has 32 rows",
      Model([](ModelSpec& m) { testing::SetVocab(&m, 33); }));
  add("VocabMuchLargerThanTokenEmbd", C, "tokenizer has 1000 tokens but token_embd.weight has 32 rows",
      Model([](ModelSpec& m) { testing::SetVocab(&m, 1000); }));

  // -- Tokenizer metadata.
  add("ScoresShort", V, "key 'tokenizer.ggml.scores' must be an f32 array of 32 entries", Model([](ModelSpec& m) {
        m.Set("tokenizer.ggml.scores", GgufValue::ArrayOf<float>(GgufType::kF32, testing::SpmScores(31)));
      }));
  add("ScoresF64", V, "key 'tokenizer.ggml.scores' must be an f32 array of 32 entries", Model([](ModelSpec& m) {
        m.Set("tokenizer.ggml.scores", GgufValue::ArrayOf<double>(GgufType::kF64, std::vector<double>(32, -1.0)));
      }));
  add("TokenTypesLong", V, "key 'tokenizer.ggml.token_type' must be an i32 array of 32 entries",
      Model([](ModelSpec& m) {
        m.Set("tokenizer.ggml.token_type", GgufValue::ArrayOf<int32_t>(GgufType::kI32, testing::SpmTypes(33)));
      }));
  add("TokenTypeOutOfRange", V, "tokenizer.ggml.token_type[5] = 7 is not a valid token type", Model([](ModelSpec& m) {
        auto t = testing::SpmTypes(32);
        t[5] = 7;
        m.Set("tokenizer.ggml.token_type", GgufValue::ArrayOf<int32_t>(GgufType::kI32, t));
      }));
  add("TokenTypeNegative", V, "tokenizer.ggml.token_type[3] = -1 is not a valid token type", Model([](ModelSpec& m) {
        auto t = testing::SpmTypes(32);
        t[3] = -1;
        m.Set("tokenizer.ggml.token_type", GgufValue::ArrayOf<int32_t>(GgufType::kI32, t));
      }));
  add("BosOutOfRange", V, "key 'tokenizer.ggml.bos_token_id' = 32 is not a token id (vocabulary has 32 tokens)",
      Model([](ModelSpec& m) { m.Set("tokenizer.ggml.bos_token_id", GgufValue::U32(32)); }));
  add("EosOutOfRange", V, "key 'tokenizer.ggml.eos_token_id' = 1000 is not a token id",
      Model([](ModelSpec& m) { m.Set("tokenizer.ggml.eos_token_id", GgufValue::U32(1000)); }));
  add("EosHugeU64", V, "key 'tokenizer.ggml.eos_token_id' = 4294967296 is not a token id",
      Model([](ModelSpec& m) { m.Set("tokenizer.ggml.eos_token_id", GgufValue::U64(uint64_t{1} << 32)); }));
  add("UnkNegative", V, "key 'tokenizer.ggml.unknown_token_id' = -5 is not a token id",
      Model([](ModelSpec& m) { m.Set("tokenizer.ggml.unknown_token_id", GgufValue::I32(-5)); }));
  add("BosString", V, "key 'tokenizer.ggml.bos_token_id' must be an integer, found string",
      Model([](ModelSpec& m) { m.Set("tokenizer.ggml.bos_token_id", GgufValue::String("1")); }));
  add("TokensNotStrings", V, "key 'tokenizer.ggml.tokens' must be an array of strings", Model([](ModelSpec& m) {
        m.Set("tokenizer.ggml.tokens", GgufValue::ArrayOf<int32_t>(GgufType::kI32, std::vector<int32_t>(32, 0)));
      }));
  add("TokensEmpty", V, "key 'tokenizer.ggml.tokens' is empty",
      Model([](ModelSpec& m) { m.Set("tokenizer.ggml.tokens", GgufValue::StringArray({})); }));
  add("MissingTokens", V, "missing required key 'tokenizer.ggml.tokens'",
      Model([](ModelSpec& m) { m.Remove("tokenizer.ggml.tokens"); }));
  add("TokenizerModelUnsupported", V, "tokenizer model 'bert' is not supported",
      Model([](ModelSpec& m) { m.Set("tokenizer.ggml.model", GgufValue::String("bert")); }));
  add("TokenizerModelNotString", V, "key 'tokenizer.ggml.model' must be a string, found u32",
      Model([](ModelSpec& m) { m.Set("tokenizer.ggml.model", GgufValue::U32(1)); }));
  add("AddBosNotBool", V, "key 'tokenizer.ggml.add_bos_token' must be a bool, found u32",
      Model([](ModelSpec& m) { m.Set("tokenizer.ggml.add_bos_token", GgufValue::U32(1)); }));
  add("Gpt2WithoutMerges", V, "missing required key 'tokenizer.ggml.merges'",
      Model([](ModelSpec& m) { m.Set("tokenizer.ggml.model", GgufValue::String("gpt2")); }));
  add("Gpt2MalformedMerge", V, "tokenizer.ggml.merges[1] is not 'left right'", Model([](ModelSpec& m) {
        m.Set("tokenizer.ggml.model", GgufValue::String("gpt2"));
        m.Set("tokenizer.ggml.merges", GgufValue::StringArray({"a b", "ab"}));
      }));
  return c;
}

// ---- Running one case -------------------------------------------------------------------------

class MalformedGguf : public ::testing::TestWithParam<Case> {};

double SecondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

TEST_P(MalformedGguf, IsRefusedByLibraryAndCli) {
  const Case& k = GetParam();
  const std::vector<uint8_t> bytes = k.make();
  if (k.name != "TruncEmpty") {
    ASSERT_FALSE(bytes.empty()) << "the case builder produced no bytes";
  }
  const std::string path = TempPath(k.name + ".gguf");
  WriteFileBytes(path, bytes);

  // The library refuses the file at the expected stage, naming the problem.
  Status st;
  {
    PeakHeap heap;
    const auto t0 = std::chrono::steady_clock::now();
    std::unique_ptr<GgufFile> f;
    st = GgufFile::Open(path, &f);
    if (k.stage == Stage::kOpen) {
      ASSERT_FALSE(st.ok()) << "GgufFile::Open accepted the file";
      EXPECT_EQ(f, nullptr);
      EXPECT_EQ(st.code(), StatusCode::kInvalidFile) << st.message();
      GgufOpenOptions no_mmap;
      no_mmap.use_mmap = false;
      Status st2 = GgufFile::Open(path, no_mmap, &f);
      EXPECT_EQ(st2.message(), st.message()) << "the read() path disagrees with mmap";
    } else {
      ASSERT_TRUE(st.ok()) << "GgufFile::Open: " << st.message();
      ModelConfig cfg;
      st = LoadModelConfig(*f, &cfg);
      if (k.stage == Stage::kConfig) {
        ASSERT_FALSE(st.ok()) << "LoadModelConfig accepted the file";
      } else {
        ASSERT_TRUE(st.ok()) << "LoadModelConfig: " << st.message();
        Vocab vocab;
        st = LoadVocab(*f, &vocab);
        ASSERT_FALSE(st.ok()) << "LoadVocab accepted the file";
      }
    }
    EXPECT_LT(SecondsSince(t0), 1.0);
    EXPECT_LT(heap.growth(), kPeakLimit);
  }
  EXPECT_NE(st.message().find(k.expect), std::string::npos) << "message: " << st.message();
  EXPECT_NE(st.message().find(path), std::string::npos) << "the message does not name the file: " << st.message();

  // The CLI refuses it too: exit 1, one "error: " line naming the problem, no signal.
  std::string out, err;
  const int rc = RunTrine("inspect " + Quote(path), &out, &err);
  EXPECT_EQ(rc, 1) << "stderr: " << err;
  EXPECT_EQ(err.rfind("error: ", 0), 0u) << "stderr: " << err;
  EXPECT_NE(err.find(k.expect), std::string::npos) << "stderr: " << err;
  EXPECT_EQ(err.find("Sanitizer"), std::string::npos) << err;
  EXPECT_EQ(err.find("runtime error"), std::string::npos) << err;
}

INSTANTIATE_TEST_SUITE_P(Catalogue, MalformedGguf, ::testing::ValuesIn(Catalogue()),
                         [](const ::testing::TestParamInfo<Case>& p) { return p.param.name; });

TEST(MalformedGgufCatalogue, HasAtLeastFiftyDistinctCases) {
  const auto cases = Catalogue();
  EXPECT_GE(cases.size(), 50u);
  std::set<std::string> names;
  for (const auto& k : cases) EXPECT_TRUE(names.insert(k.name).second) << "duplicate case " << k.name;
}

// ---- Positive controls: the unmutated builders produce files that load ------------------------

TEST(MalformedGgufBase, ValidModelPassesEverything) {
  const std::string path = TempPath("valid-base.gguf");
  ASSERT_FALSE(BaseBytes().empty());
  WriteFileBytes(path, BaseBytes());
  std::unique_ptr<GgufFile> f;
  Status st = GgufFile::Open(path, &f);
  ASSERT_TRUE(st.ok()) << st.message();
  ModelConfig cfg;
  st = LoadModelConfig(*f, &cfg);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(cfg.n_layer, testing::kLayers);
  EXPECT_EQ(cfg.n_embd, testing::kE);
  EXPECT_EQ(cfg.n_head_kv, testing::kKvHeads);
  EXPECT_EQ(cfg.n_vocab, testing::kVocab);
  EXPECT_FALSE(cfg.tied_output);
  Vocab vocab;
  st = LoadVocab(*f, &vocab);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(vocab.size(), testing::kVocab);
  EXPECT_EQ(vocab.bos(), 1);
  // The layout every truncation case relies on: the file ends exactly at the last tensor's data.
  EXPECT_EQ(Layout().data_end, BaseBytes().size());
  EXPECT_GT(Layout().data_offset, 0u);

  std::string out, err;
  EXPECT_EQ(RunTrine("inspect " + Quote(path), &out, &err), 0) << err;
  EXPECT_NE(out.find("layers:        2"), std::string::npos) << out;
  EXPECT_EQ(RunTrine("inspect --json " + Quote(path), &out, &err), 0) << err;
  EXPECT_NE(out.find("\"n_vocab\": 32"), std::string::npos) << out;
}

TEST(MalformedGgufBase, MinimalRawFileOpens) {
  const std::string path = TempPath("valid-raw.gguf");
  WriteFileBytes(path, MinimalRaw().Encode());
  std::unique_ptr<GgufFile> f;
  Status st = GgufFile::Open(path, &f);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_EQ(f->tensors().size(), 1u);
  EXPECT_EQ(f->tensors()[0].n_bytes, 128u);
}

TEST(MalformedGgufBase, RawEdgeCasesThatAreValid) {
  // Empty arrays and strings, nested arrays at the depth limit, I2_S in a bitnet-b1.58 file,
  // a tensor ending exactly at end of file, a huge but power-of-two alignment.
  struct Ok {
    const char* name;
    std::function<std::vector<uint8_t>()> make;
  };
  const std::vector<Ok> oks = {
      {"empty-u8-array", RawKv(Kv("x.a", 9, Bytes().U32(0).U64(0)))},
      {"empty-string-array", RawKv(Kv("x.a", 9, Bytes().U32(8).U64(0)))},
      {"empty-nested-array", RawKv(Kv("x.a", 9, Bytes().U32(9).U64(0)))},
      {"empty-string", RawKv(KvStr("x.s", ""))},
      {"nested-depth-4", RawKv(Kv("x.a", 9, NestedArray(4)))},
      {"i2s-in-bitnet-b1.58", RawTensorType(36, {256}, "bitnet-b1.58")},
      {"tensor-at-end", Raw([](RawFile& f) { f.tensors[0].offset = 128; })},
      {"alignment-4096", Raw([](RawFile& f) {
         f.kvs.push_back(KvU32("general.alignment", 4096));
         f.alignment = 4096;
       })},
      {"no-tensors-no-padding", Raw([](RawFile& f) {
         f.tensors.clear();
         f.pad = false;
       })},
  };
  for (const auto& ok : oks) {
    SCOPED_TRACE(ok.name);
    const std::string path = TempPath(std::string("ok-") + ok.name + ".gguf");
    WriteFileBytes(path, ok.make());
    std::unique_ptr<GgufFile> f;
    Status st = GgufFile::Open(path, &f);
    EXPECT_TRUE(st.ok()) << st.message();
    if (f) {
      for (const auto& kv : f->metadata()) EXPECT_FALSE(kv.second.ToDisplayString().empty());
    }
  }
}

// ---- Truncation at every offset ------------------------------------------------------------

TEST(MalformedGgufTruncation, EveryPrefixOfTheValidModelFails) {
  const auto& base = BaseBytes();
  ASSERT_FALSE(base.empty());
  const uint64_t header_end = Layout().data_offset + 64;
  std::vector<size_t> cuts;
  for (size_t n = 0; n < header_end && n < base.size(); ++n) cuts.push_back(n);
  for (size_t n = header_end; n < base.size(); n += 4093) cuts.push_back(n);
  cuts.push_back(base.size() - 1);
  ASSERT_GT(cuts.size(), 1000u);

  // Write the file once and shrink it in place, longest prefix first.
  std::sort(cuts.rbegin(), cuts.rend());
  const std::string path = TempPath("truncated.gguf");
  WriteFileBytes(path, base);
  GgufOpenOptions no_mmap;
  no_mmap.use_mmap = false;
  const auto t0 = std::chrono::steady_clock::now();
  int failures = 0;
  for (size_t n : cuts) {
    ASSERT_EQ(truncate(path.c_str(), static_cast<off_t>(n)), 0);
    std::unique_ptr<GgufFile> f;
    const Status st = GgufFile::Open(path, &f);
    if (st.ok() || st.message().find(path) == std::string::npos) {
      ADD_FAILURE() << "prefix of " << n << " bytes: " << (st.ok() ? "accepted" : st.message());
      if (++failures > 10) break;
    }
    if (n < header_end) {
      const Status st2 = GgufFile::Open(path, no_mmap, &f);
      EXPECT_EQ(st2.message(), st.message()) << "prefix of " << n << " bytes";
    }
  }
  EXPECT_LT(SecondsSince(t0), 20.0);
}

// ---- Claimed sizes that the file cannot back --------------------------------------------------

// Writes `header` and extends the file (sparsely) to `size` bytes, so that counts up to
// size / element-size pass the "fits in the file" check but the elements themselves are garbage.
std::string SparseFile(const std::string& name, const std::vector<uint8_t>& header, uint64_t size) {
  const std::string path = TempPath(name);
  WriteFileBytes(path, header);
  EXPECT_EQ(truncate(path.c_str(), static_cast<off_t>(size)), 0);
  return path;
}

struct ClaimResult {
  Status status;
  double seconds;
  size_t heap_growth;
};
ClaimResult OpenAndMeasure(const std::string& path) {
  PeakHeap heap;
  const auto t0 = std::chrono::steady_clock::now();
  std::unique_ptr<GgufFile> f;
  ClaimResult r;
  r.status = GgufFile::Open(path, &f);
  r.seconds = SecondsSince(t0);
  r.heap_growth = heap.growth();
  return r;
}

TEST(MalformedGgufClaims, AbsurdCountsInSmallFilesAreRejectedQuickly) {
  struct Claim {
    const char* name;
    std::vector<uint8_t> bytes;
    const char* expect;
  };
  const std::vector<Claim> claims = {
      {"array-2e40", RawKv(Kv("x.a", 9, Bytes().U32(0).U64(uint64_t{1} << 40)))(), "cannot fit"},
      {"string-2e60", RawKv(Kv("x.s", 8, Bytes().U64(uint64_t{1} << 60)))(), "exceeds"},
      {"strings-2e60", RawKv(Kv("x.a", 9, Bytes().U32(8).U64(uint64_t{1} << 60)))(), "cannot fit"},
      {"kv-2e62", Raw([](RawFile& f) { f.n_kv = uint64_t{1} << 62; })(), "cannot fit"},
      {"tensors-2e62", Raw([](RawFile& f) { f.n_tensors = uint64_t{1} << 62; })(), "cannot fit"},
  };
  for (const auto& c : claims) {
    SCOPED_TRACE(c.name);
    const std::string path = TempPath(std::string("claim-") + c.name + ".gguf");
    WriteFileBytes(path, c.bytes);
    const ClaimResult r = OpenAndMeasure(path);
    ASSERT_FALSE(r.status.ok());
    EXPECT_NE(r.status.message().find(c.expect), std::string::npos) << r.status.message();
    EXPECT_LT(r.seconds, 1.0);
    EXPECT_LT(r.heap_growth, size_t{1} << 20);
  }
}

// A 256 MiB file whose header claims as many elements as its size allows. The first element is
// malformed, so nothing the count promises exists; the reader must fail at once without sizing a
// container from the count (which would take 1 to 4 GB).
TEST(MalformedGgufClaims, CountsBackedOnlyByFileSizeAllocateNothing) {
  constexpr uint64_t kSize = uint64_t{256} << 20;
  struct Claim {
    const char* name;
    Bytes header;
    const char* expect;
  };
  const uint64_t strings = kSize / 8 - 16, nested = kSize / 12 - 16, kvs = kSize / 14 - 16;
  const std::vector<Claim> claims = {
      {"string-array", Bytes().Raw("GGUF").U32(3).U64(0).U64(1).Cat(Kv("x.a", 9, Bytes().U32(8).U64(strings).U64(kU64Max))),
       "element 0 of 'x.a'"},
      {"nested-array", Bytes().Raw("GGUF").U32(3).U64(0).U64(1).Cat(Kv("x.a", 9, Bytes().U32(9).U64(nested).U32(99))),
       "nested array elements"},
      {"nested-array-small", Bytes().Raw("GGUF").U32(3).U64(0).U64(1).Cat(Kv("x.a", 9, Bytes().U32(9).U64(1000000).U32(99))),
       "unknown array element type 99"},
      {"kv-count", Bytes().Raw("GGUF").U32(3).U64(0).U64(kvs).U64(0), "metadata entry 0 has an empty key"},
  };
  for (const auto& c : claims) {
    SCOPED_TRACE(c.name);
    const std::string path = SparseFile(std::string("sparse-") + c.name + ".gguf", c.header.v, kSize);
    const ClaimResult r = OpenAndMeasure(path);
    ASSERT_FALSE(r.status.ok());
    EXPECT_NE(r.status.message().find(c.expect), std::string::npos) << r.status.message();
    EXPECT_LT(r.seconds, 1.0);
    EXPECT_LT(r.heap_growth, size_t{1} << 20) << "bytes allocated for a claim the file does not back";
    std::string out, err;
    EXPECT_EQ(RunTrine("inspect " + Quote(path), &out, &err), 1) << err;
    EXPECT_NE(err.find(c.expect), std::string::npos) << err;
  }
}

// ---- Paths -------------------------------------------------------------------------------------

// A split-style name is recognised from the path; a very long one must not exhaust the stack.
TEST(MalformedGgufPaths, VeryLongSplitStylePathFailsCleanly) {
  const std::string path = "/nonexistent-dir/" + std::string(120000, 'a') + "-00001-of-00002.gguf";
  std::unique_ptr<GgufFile> f;
  const Status st = GgufFile::Open(path, &f);
  EXPECT_FALSE(st.ok());
  std::string out, err;
  EXPECT_EQ(RunTrine("inspect " + Quote(path), &out, &err), 1);
  EXPECT_EQ(err.rfind("error: ", 0), 0u) << err.substr(0, 200);
}

}  // namespace
}  // namespace trine
