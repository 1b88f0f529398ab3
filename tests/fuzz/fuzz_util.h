// Helpers shared by the libFuzzer targets: invariant checks that abort (libFuzzer then saves the
// input as a crash), per-process scratch files, and the path of the bundled models.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#ifndef TRINE_MODELS_DIR
#error "TRINE_MODELS_DIR must point at the repository's models/ folder"
#endif

namespace trine::fuzz {

// Aborts with `what` when an invariant does not hold.
inline void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "invariant violated: %s\n", what);
    std::abort();
  }
}

inline std::string ModelPath(const char* name) { return std::string(TRINE_MODELS_DIR) + "/" + name; }

// A file named after this process in $TMPDIR (or /tmp), so parallel fuzz jobs do not collide.
inline std::string ScratchPath(const char* suffix) {
  const char* dir = std::getenv("TMPDIR");
  return std::string(dir && *dir ? dir : "/tmp") + "/trine-fuzz-" + std::to_string(getpid()) + suffix;
}

// Writes data to path; false when the file cannot be written (the input is then skipped).
inline bool WriteFile(const std::string& path, const uint8_t* data, size_t size) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return false;
  const bool ok = size == 0 || std::fwrite(data, 1, size, f) == size;
  return std::fclose(f) == 0 && ok;
}

}  // namespace trine::fuzz
