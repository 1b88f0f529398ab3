// GGUF v3 writer (used by quantize, mkmodel and tests). Metadata keeps insertion order, tensor
// data is laid out in insertion order, each tensor padded with zeros to the alignment, as ggml's
// gguf writer does, so files trine writes match llama.cpp's byte for byte.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "gguf/gguf_value.h"
#include "tensor/dtype.h"

namespace trine {

class GgufWriter {
 public:
  // Sets `key`, replacing an existing value in place (its position is kept).
  void Set(const std::string& key, GgufValue value);
  void Remove(const std::string& key);
  const GgufValue* Find(const std::string& key) const;
  void SetAlignment(uint32_t alignment) { alignment_ = alignment; }

  // Adds a tensor; `ne` has 1..4 dims, ne[0] the row length. With `copy` false the caller keeps
  // `data` alive until the file is written (quantize streams large models this way).
  Status AddTensor(const std::string& name, TypeId type, const std::vector<int64_t>& ne, const void* data,
                   size_t n_bytes, bool copy = true);

  Status WriteFile(const std::string& path) const;
  std::vector<uint8_t> WriteToBuffer() const;

 private:
  struct Tensor {
    std::string name;
    TypeId type;
    std::vector<int64_t> ne;
    const void* data;
    size_t n_bytes;
    std::vector<uint8_t> owned;
  };
  template <typename Sink>
  void Emit(Sink& sink) const;

  uint32_t alignment_ = 32;
  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::vector<Tensor> tensors_;
};

}  // namespace trine
