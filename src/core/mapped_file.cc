// MappedFile implementation: mmap(PROT_READ, MAP_PRIVATE) with a read() fallback.
#include "core/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace trine {

MappedFile::~MappedFile() {
  if (mapped_ && data_ != nullptr) munmap(const_cast<uint8_t*>(data_), size_);
}

Status MappedFile::Open(const std::string& path, bool use_mmap, std::unique_ptr<MappedFile>* out) {
  if (path.empty()) return IoError("empty file name");
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return IoError(path + ": cannot open: " + std::strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    return IoError(path + ": cannot stat: " + std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return IoError(path + ": not a regular file");
  }
  std::unique_ptr<MappedFile> f(new MappedFile());
  f->path_ = path;
  f->size_ = static_cast<size_t>(st.st_size);
  if (f->size_ == 0) {
    ::close(fd);
    *out = std::move(f);
    return Status::Ok();
  }
  if (use_mmap) {
    void* p = mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p != MAP_FAILED) {
      f->data_ = static_cast<const uint8_t*>(p);
      f->mapped_ = true;
    }
  }
  if (!f->mapped_) {
    f->buffer_.resize(f->size_);
    size_t done = 0;
    while (done < f->size_) {
      ssize_t n = ::read(fd, f->buffer_.data() + done, f->size_ - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        int e = errno;
        ::close(fd);
        return IoError(path + ": read failed at byte " + std::to_string(done) + ": " +
                       (n == 0 ? "unexpected end of file" : std::strerror(e)));
      }
      done += static_cast<size_t>(n);
    }
    f->data_ = f->buffer_.data();
  }
  ::close(fd);
  *out = std::move(f);
  return Status::Ok();
}

}  // namespace trine
