// TRINE_DUMP_TENSORS (see tensor_dump.h).
#include "runtime/tensor_dump.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/team.h"

namespace trine {
namespace {

const char* Prefix() {
  static const char* p = std::getenv("TRINE_DUMP_TENSORS");
  return p != nullptr && p[0] != '\0' ? p : nullptr;
}

std::atomic<int> g_passes{0};
std::atomic<bool> g_active{false};
int g_seq = 0;  // written by one thread per step only

}  // namespace

bool TensorDumpActive() { return g_active.load(std::memory_order_relaxed); }

void TensorDumpBeginPass() {
  if (Prefix() == nullptr) return;
  g_active.store(g_passes.fetch_add(1) == 0, std::memory_order_relaxed);
}

void TensorDumpTeam(const char* name, int layer, const float* data, int64_t rows, int64_t row_len) {
  for (int64_t i = TeamFirst(1); i < 1; i = TeamNext(1, i)) {
    const std::string full = layer >= 0 ? std::string(name) + "-" + std::to_string(layer) : std::string(name);
    char num[16];
    std::snprintf(num, sizeof(num), "%04d", g_seq++);
    const std::string path = std::string(Prefix()) + num + "_" + full + ".bin";
    if (FILE* f = std::fopen(path.c_str(), "wb")) {
      std::fwrite(data, sizeof(float), static_cast<size_t>(rows * row_len), f);
      std::fclose(f);
    }
    const std::string index = std::string(Prefix()) + "index.txt";
    if (FILE* f = std::fopen(index.c_str(), g_seq == 1 ? "w" : "a")) {
      std::fprintf(f, "%s %s %lld %lld\n", num, full.c_str(), static_cast<long long>(rows),
                   static_cast<long long>(row_len));
      std::fclose(f);
    }
  }
  TeamSync();
}

}  // namespace trine
