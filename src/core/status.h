// Status: the error type every fallible trine function returns. No exceptions cross module
// boundaries; a Status carries a code and a message that names the file, field and byte offset.
#pragma once

#include <string>
#include <utility>

namespace trine {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,  // bad flag, API argument or prompt
  kInvalidFile,      // malformed or unsupported model file
  kIoError,          // open/read/mmap failed
  kUnsupported,      // valid input that this build cannot handle (shape, type, arch)
  kOutOfMemory,
  kCancelled,
  kInternal,
  kUnavailable,      // a bounded queue or pool is full now; the same request may succeed later
};

class Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
inline Status InvalidFile(std::string m) { return {StatusCode::kInvalidFile, std::move(m)}; }
inline Status IoError(std::string m) { return {StatusCode::kIoError, std::move(m)}; }
inline Status Unsupported(std::string m) { return {StatusCode::kUnsupported, std::move(m)}; }
inline Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }

// Propagates a non-ok Status to the caller.
#define TRINE_RETURN_IF_ERROR(expr)        \
  do {                                     \
    ::trine::Status trine_status_ = (expr); \
    if (!trine_status_.ok()) return trine_status_; \
  } while (0)

}  // namespace trine
