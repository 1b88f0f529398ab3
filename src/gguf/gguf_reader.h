// GGUF reader: parses the header, metadata and tensor infos of GGUF v2/v3 files (and split sets
// named *-00001-of-0000N.gguf) over a read-only mapping. Every count, length, offset, size and
// alignment is checked against the file size with overflow-safe arithmetic before anything is
// allocated or read; errors name the file, the field or tensor, and the byte offset.
//
// Layout (little-endian): "GGUF", u32 version, u64 n_tensors, u64 n_kv, n_kv x {string key,
// u32 value type, value}, n_tensors x {string name, u32 n_dims, u64 ne[n_dims], u32 ggml_type,
// u64 offset}, padding to general.alignment (default 32), tensor data. Strings are u64 length +
// bytes; arrays are u32 element type, u64 count, elements.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/mapped_file.h"
#include "core/status.h"
#include "gguf/gguf_value.h"
#include "tensor/dtype.h"

namespace trine {

constexpr int kGgufMaxDims = 4;
constexpr size_t kGgufMaxNameBytes = 63;  // ggml's GGML_MAX_NAME (64) including the NUL
constexpr uint32_t kGgufDefaultAlignment = 32;

struct GgufTensorInfo {
  std::string name;
  TypeId type = TypeId::kF32;
  uint32_t ggml_type = 0;       // id as stored in the file
  int n_dims = 0;
  int64_t ne[kGgufMaxDims] = {1, 1, 1, 1};  // ne[0] is the row length; unused dims are 1
  int64_t n_elems = 0;
  uint64_t offset = 0;          // relative to the data section of its split
  uint64_t file_offset = 0;     // absolute byte offset in its split file
  uint64_t n_bytes = 0;
  int split = 0;                // index of the split file holding the data
  const uint8_t* data = nullptr;  // points into the mapping; valid while the GgufFile lives

  std::string ShapeString() const;  // "[256, 2048]"
};

struct GgufOpenOptions {
  bool use_mmap = true;
  // When false, a path that looks like a split part opens only that file.
  bool follow_splits = true;
};

class GgufFile {
 public:
  // Opens and validates `path` (and its sibling splits). On error *out is untouched.
  static Status Open(const std::string& path, const GgufOpenOptions& options,
                     std::unique_ptr<GgufFile>* out);
  static Status Open(const std::string& path, std::unique_ptr<GgufFile>* out) {
    return Open(path, GgufOpenOptions(), out);
  }

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint32_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }  // of the first split
  uint64_t file_size() const;                             // all splits together
  bool is_mmapped() const;  // every split is mapped (tensor data are file pages, not a heap copy)
  int n_splits() const { return static_cast<int>(files_.size()); }
  // The file holding split `i` (its path, and whether it is mapped; for streaming loaders).
  const MappedFile& split_file(int i) const { return *files_[static_cast<size_t>(i)]; }
  const std::string& architecture() const { return architecture_; }  // "" when absent

  // Metadata in file order (of the first split).
  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return kv_; }
  const GgufValue* Find(const std::string& key) const;
  // Forgets the parsed value of `key` (Find returns null after; no-op when absent): for a loader
  // that has built its own structures from a large array (a model's vocabulary: 128k token
  // strings and 280k merges are ~15 MB as std::strings) and keeps the file open for its tensors.
  void DropMetadata(const std::string& key);

  // Typed getters: kInvalidFile naming the key when present with a wrong type; `*found` reports
  // presence (missing keys are not errors here).
  Status GetInt(const std::string& key, int64_t* out, bool* found) const;
  Status GetFloat(const std::string& key, double* out, bool* found) const;
  Status GetString(const std::string& key, std::string* out, bool* found) const;
  Status GetBool(const std::string& key, bool* out, bool* found) const;

  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* FindTensor(const std::string& name) const;

 private:
  GgufFile() = default;
  Status ParseOne(const MappedFile& file, int split_index,
                  std::vector<std::pair<std::string, GgufValue>>* kv,
                  std::vector<GgufTensorInfo>* tensors, uint32_t* alignment, uint64_t* data_offset);

  std::string path_;
  uint32_t version_ = 0;
  uint32_t alignment_ = kGgufDefaultAlignment;
  uint64_t data_offset_ = 0;
  std::string architecture_;
  std::vector<std::unique_ptr<MappedFile>> files_;
  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::unordered_map<std::string, size_t> kv_index_;
  std::vector<GgufTensorInfo> tensors_;
  std::unordered_map<std::string, size_t> tensor_index_;
};


}  // namespace trine
