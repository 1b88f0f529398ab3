// MappedFile: a read-only view of a whole file, by mmap when possible and by read() otherwise.
// Depends on nothing but POSIX.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"

namespace trine {

class MappedFile {
 public:
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  // Opens `path`. With `use_mmap` false (or when mmap fails) the file is read into memory.
  // Directories, empty names and unreadable files give kIoError naming the path.
  static Status Open(const std::string& path, bool use_mmap, std::unique_ptr<MappedFile>* out);

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }
  bool is_mmapped() const { return mapped_; }

 private:
  MappedFile() = default;
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  bool mapped_ = false;
  std::vector<uint8_t> buffer_;  // holds the bytes when not mmapped
};

}  // namespace trine
