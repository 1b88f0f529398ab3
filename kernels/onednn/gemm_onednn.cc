// F32 weights x fp32 activations through oneDNN's matmul (Debian's libdnnl), which measured
// 1.5-3.6x faster than the hand-written fp32 kernels at 1-64 tokens on one thread
// (bench/onednn_bench.cc; kernels/README.md, "oneDNN"). The weights are read where they lie (the
// file's row-major rows, seen by oneDNN as a K x N matrix with strides {1, K}); nothing is copied.
//
// Threads: trine splits the rows among its OpenMP team and each thread calls this on its slice.
// oneDNN's OpenMP runtime would start a team of its own from a thread outside an active parallel
// region (a one-thread run), so every call pins oneDNN to the calling thread.
#include <omp.h>

#include <oneapi/dnnl/dnnl.hpp>

#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <vector>

#include "kernels.h"

namespace trine::kernels {
namespace {

using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t>;  // M, N, K, lda, ldw, ldy

// A primitive and the scratchpad it wants. The scratchpad is the caller's (scratchpad_mode::user):
// with the library's own, two threads running primitives at once share one buffer unless oneDNN
// was built with DNNL_ENABLE_CONCURRENT_EXEC, and Debian's is not (two threads gave wrong logits).
struct Prim {
  dnnl::matmul matmul;
  dnnl::memory::desc scratchpad;
};

struct Cache {
  std::mutex mu;
  std::map<Key, std::shared_ptr<const Prim>> prims;
};

dnnl::engine& Engine() {
  static dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  return eng;
}

Cache& GetCache() {
  static Cache c;
  return c;
}

// One primitive per shape and strides; a model has a handful (its matrices x the token counts of
// its batches), and the cache starts over past 512 so odd inputs cannot grow it without bound.
std::shared_ptr<const Prim> Primitive(const Key& key) {
  Cache& c = GetCache();
  std::lock_guard<std::mutex> lock(c.mu);
  auto it = c.prims.find(key);
  if (it != c.prims.end()) return it->second;
  const auto [m, n, k, lda, ldw, ldy] = key;
  using dt = dnnl::memory::data_type;
  const dnnl::memory::desc src({m, k}, dt::f32, dnnl::memory::dims{lda, 1});
  const dnnl::memory::desc wei({k, n}, dt::f32, dnnl::memory::dims{1, ldw});
  const dnnl::memory::desc dst({m, n}, dt::f32, dnnl::memory::dims{ldy, 1});
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src, wei, dst), attr, Engine());
  auto prim = std::make_shared<const Prim>(Prim{dnnl::matmul(pd), pd.scratchpad_desc()});
  if (c.prims.size() >= 512) c.prims.clear();
  c.prims.emplace(key, prim);
  return prim;
}

// Runs oneDNN on the calling thread only, restoring the thread's OpenMP setting afterwards.
class OneThread {
 public:
  OneThread() : saved_(omp_get_max_threads()) { omp_set_num_threads(1); }
  ~OneThread() { omp_set_num_threads(saved_); }

 private:
  int saved_;
};

}  // namespace

bool OneDnnAvailable() {
  static const bool ok = [] {
    try {
      (void)Engine();
      return true;
    } catch (const dnnl::error&) {
      return false;
    }
  }();
  return ok;
}

void GemmF32OneDnn(const WeightView& w, const uint8_t* xq, size_t act_stride, int n_tokens, float* y, int64_t ldy,
                   int64_t r0, int64_t r1, float scale) {
  if (r1 <= r0 || n_tokens <= 0) return;
  const int64_t n = r1 - r0, k = w.cols;
  const int64_t lda = static_cast<int64_t>(act_stride / sizeof(float));
  const int64_t ldw = static_cast<int64_t>(w.row_bytes / sizeof(float));
  OneThread one_thread;
  try {
    const auto prim = Primitive(Key{n_tokens, n, k, lda, ldw, ldy});
    using dt = dnnl::memory::data_type;
    dnnl::engine& eng = Engine();
    dnnl::memory src({{n_tokens, k}, dt::f32, dnnl::memory::dims{lda, 1}}, eng,
                     const_cast<float*>(reinterpret_cast<const float*>(xq)));
    dnnl::memory wei({{k, n}, dt::f32, dnnl::memory::dims{1, ldw}}, eng,
                     const_cast<float*>(reinterpret_cast<const float*>(w.data + static_cast<size_t>(r0) * w.row_bytes)));
    dnnl::memory dst({{n_tokens, n}, dt::f32, dnnl::memory::dims{ldy, 1}}, eng, y + r0);
    thread_local std::vector<uint8_t> scratch_bytes;
    if (scratch_bytes.size() < prim->scratchpad.get_size()) scratch_bytes.resize(prim->scratchpad.get_size());
    dnnl::memory scratch(prim->scratchpad, eng, scratch_bytes.data());
    dnnl::stream strm(eng);
    prim->matmul.execute(strm, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_DST, dst}, {DNNL_ARG_SCRATCHPAD, scratch}});
    strm.wait();
  } catch (const dnnl::error&) {
    // Cannot happen for f32 matmul on a CPU engine; the reference keeps the result right if it does.
    GemmRef(w, xq, act_stride, n_tokens, y, ldy, r0, r1, scale);
    return;
  }
  const float s = w.tensor_scale * scale;
  if (s != 1.0f) {
    for (int t = 0; t < n_tokens; ++t) {
      float* row = y + static_cast<int64_t>(t) * ldy;
      for (int64_t r = r0; r < r1; ++r) row[r] *= s;
    }
  }
}

}  // namespace trine::kernels
