// Profiler: Monte Carlo samples, per-unit KL / activation norms / timings, and the planner.
#include "profiler/profiler.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <random>

#include <omp.h>
#include <time.h>

#include "runtime/ops.h"
#include "tokenizer/tokenizer.h"

namespace trine::profiler {
namespace {

using Clock = std::chrono::steady_clock;

const char* const kTexts[] = {
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her dog.",
    "The sun was shining and the birds were singing. Tom wanted to build a big castle out of sand by the sea.",
    "One day, a small cat found a shiny red ball under the old tree. The cat was very happy and ran home.",
    "Mom said, \"It is time for bed.\" Ben did not want to sleep because he wanted to read his new book.",
};

constexpr const char* kF32Suffix = " + f32 activations";

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// n samples of `len` tokens (fewer when the model's training context is shorter): every fourth
// (the 2nd, 6th, ...) a built-in text, cut to length, the others BOS + random tokens.
std::vector<std::vector<int32_t>> BuildSamples(const Model& model, int n, uint64_t seed, int len) {
  const ModelConfig& c = model.config();
  std::mt19937_64 rng(seed);
  std::unique_ptr<Tokenizer> tok;
  if (!Tokenizer::Create(model.shared_vocab(), &tok).ok()) tok.reset();
  const int max_len = std::max(2, std::min(len, c.n_ctx_train > 0 ? c.n_ctx_train : len));
  std::vector<std::vector<int32_t>> out;
  size_t text_i = 0;
  for (int s = 0; s < n; ++s) {
    std::vector<int32_t> ids;
    if (tok && s % 4 == 1) {
      std::vector<TokenId> t;
      if (tok->Tokenize(kTexts[text_i++ % (sizeof(kTexts) / sizeof(kTexts[0]))], true, false, &t).ok()) {
        ids.assign(t.begin(), t.end());
      }
    }
    if (ids.size() < 2) {
      ids.clear();
      if (model.vocab().bos() >= 0) ids.push_back(model.vocab().bos());
      while (static_cast<int>(ids.size()) < max_len) ids.push_back(static_cast<int32_t>(rng() % static_cast<uint64_t>(c.n_vocab)));
    }
    if (static_cast<int>(ids.size()) > max_len) ids.resize(static_cast<size_t>(max_len));
    out.push_back(std::move(ids));
  }
  return out;
}

// The units the planner decides on: one per layer, then the head (every matrix outside blk.*).
std::vector<PlanUnit> BuildUnits(const Model& model) {
  const ModelConfig& c = model.config();
  std::vector<PlanUnit> units(static_cast<size_t>(c.n_layer) + 1);
  for (int l = 0; l < c.n_layer; ++l) {
    units[static_cast<size_t>(l)].unit = "blk." + std::to_string(l);
    units[static_cast<size_t>(l)].layer = l;
  }
  units.back().unit = "output";
  for (const std::string& name : model.MatrixNames()) {
    size_t u = units.size() - 1;
    if (name.rfind("blk.", 0) == 0) u = static_cast<size_t>(std::stoi(name.substr(4)));
    if (u < units.size()) units[u].tensors.push_back(name);
  }
  for (PlanUnit& u : units) {
    for (const std::string& t : u.tensors) {
      if (const GgufTensorInfo* ti = model.file().FindTensor(t)) u.weight_bytes += ti->n_bytes;
    }
  }
  return units;
}

// Bytes of the file's tensors outside the units' matrices (norms, embedding when untied, ...).
uint64_t OtherWeightBytes(const Model& model, const std::vector<PlanUnit>& units) {
  uint64_t all = 0, in_units = 0;
  for (const GgufTensorInfo& t : model.file().tensors()) all += t.n_bytes;
  for (const PlanUnit& u : units) in_units += u.weight_bytes;
  return all > in_units ? all - in_units : 0;
}

Status SetUnitPrecision(Model* model, const PlanUnit& u, bool int8) {
  for (const std::string& t : u.tensors) TRINE_RETURN_IF_ERROR(model->SetF32Activations(t, !int8));
  return Status::Ok();
}

Status SetAll(Model* model, const std::vector<PlanUnit>& units, bool int8) {
  for (const PlanUnit& u : units) TRINE_RETURN_IF_ERROR(SetUnitPrecision(model, u, int8));
  return Status::Ok();
}

// Restores the activation precisions a model had before profiling.
class PrecisionGuard {
 public:
  explicit PrecisionGuard(Model* m) : m_(m), head_(m->output_type()) {
    for (const KernelBinding& b : m->bindings()) saved_.emplace_back(b.tensor, EndsWith(b.kernel, kF32Suffix));
  }
  ~PrecisionGuard() {
    if (m_->output_type() != head_) (void)m_->SetOutputType(head_);
    for (const auto& [t, on] : saved_) (void)m_->SetF32Activations(t, on);
  }
  PrecisionGuard(const PrecisionGuard&) = delete;
  PrecisionGuard& operator=(const PrecisionGuard&) = delete;

 private:
  Model* m_;
  TypeId head_;
  std::vector<std::pair<std::string, bool>> saved_;
};

// Next-token logits at the scored rows of every sample (rows of V floats per sample).
using Dists = std::vector<std::vector<float>>;

// Distributions ready for KL: per row the log-sum-exp of the logits (double) and the
// probabilities (float). KL(p || q) = sum_v p_v (a_v - b_v) - lse_a + lse_b for logits a, b: one
// exp per element when preparing, none per comparison, and exactly 0 for identical logits.
struct Prepared {
  Dists logits;
  std::vector<std::vector<float>> prob;
  std::vector<std::vector<double>> lse;
};

// Fills *p from `logits` (swapped in: *logits gets p's old buffers back for reuse).
void Prepare(Dists* logits, int V, int n_threads, Prepared* dst) {
  Prepared& p = *dst;
  std::swap(p.logits, *logits);
  p.prob.resize(p.logits.size());
  p.lse.resize(p.logits.size());
  for (size_t s = 0; s < p.logits.size(); ++s) {
    const int rows = static_cast<int>(p.logits[s].size() / static_cast<size_t>(V));
    p.prob[s].resize(p.logits[s].size());
    p.lse[s].resize(static_cast<size_t>(rows));
    const float* x = p.logits[s].data();
    float* pr = p.prob[s].data();
    double* lse = p.lse[s].data();
#pragma omp parallel for num_threads(n_threads) schedule(static)
    for (int r = 0; r < rows; ++r) {
      const float* row = x + static_cast<size_t>(r) * static_cast<size_t>(V);
      float mx = -INFINITY;
      for (int v = 0; v < V; ++v) mx = std::max(mx, row[v]);
      double sum = 0;
      float* out = pr + static_cast<size_t>(r) * static_cast<size_t>(V);
      for (int v = 0; v < V; ++v) {
        out[v] = std::exp(row[v] - mx);
        sum += static_cast<double>(out[v]);
      }
      const float inv = static_cast<float>(1.0 / sum);
      for (int v = 0; v < V; ++v) out[v] *= inv;
      lse[r] = static_cast<double>(mx) + std::log(sum);
    }
  }
}

// Per sample, the mean over its rows of KL(p || q).
std::vector<double> Kl(const Prepared& p, const Prepared& q, int V, int n_threads) {
  std::vector<double> out(p.logits.size(), 0.0);
  for (size_t s = 0; s < p.logits.size(); ++s) {
    const int rows = static_cast<int>(p.lse[s].size());
    double total = 0;
#pragma omp parallel for num_threads(n_threads) schedule(static) reduction(+ : total)
    for (int r = 0; r < rows; ++r) {
      const size_t o = static_cast<size_t>(r) * static_cast<size_t>(V);
      const float* pr = p.prob[s].data() + o;
      const float* a = p.logits[s].data() + o;
      const float* b = q.logits[s].data() + o;
      double cross = 0;
      for (int v = 0; v < V; ++v) cross += static_cast<double>(pr[v]) * static_cast<double>(a[v] - b[v]);
      total += std::max(0.0, cross - p.lse[s][static_cast<size_t>(r)] + q.lse[s][static_cast<size_t>(r)]);
    }
    out[s] = rows > 0 ? total / rows : 0.0;
  }
  return out;
}

// Runs one sample's tokens through the layers, one layer at a time, over a KV cache of its own:
// for the sensitivity runs it starts at any layer from a recorded residual stream (the layers
// before it are unchanged, so they need not run again), and it times layers for the decode
// timings. The Context does not expose either.
struct LayerRunner {
  const Model* m = nullptr;
  KvCache kv;
  ForwardState st;
  std::vector<float> normed;
  std::unique_ptr<WeightStreamer> streamer;  // the model's streamed layers

  Status Init(const Model* model, int n_ctx, int n_threads, KvType type) {
    m = model;
    const ModelConfig& c = m->config();
    TRINE_RETURN_IF_ERROR(kv.Allocate(type, type, c.n_layer, n_ctx, c.n_head_kv, c.head_dim));
    st.model = m;
    st.kv = &kv;
    st.n_threads = n_threads;
    streamer.reset();
    if (m->has_streamed_layers()) TRINE_RETURN_IF_ERROR(WeightStreamer::Create(*m, 2, &streamer));
    st.streamer = streamer.get();
    return Status::Ok();
  }

  // Runs layers [from, n_layer) over `n` tokens at position n_past. The residual stream entering
  // layer `from` is `x_from` (n x E), or the tokens' embeddings when x_from is null. When `trace`
  // is given, (*trace)[l] receives the stream entering layer l (and [n_layer] the final one).
  // `secs` (n_layer + 1 entries) adds each layer's wall time. The final stream stays in st.x.
  Status Layers(const int32_t* toks, int n, int n_past, int from, const float* x_from,
                std::vector<std::vector<float>>* trace, std::vector<double>* secs) {
    const ModelConfig& c = m->config();
    const size_t E = static_cast<size_t>(c.n_embd);
    st.Resize(*m, n, n_past);
    if (x_from != nullptr) {
      std::copy(x_from, x_from + static_cast<size_t>(n) * E, st.x.begin());
    } else {
      for (int t = 0; t < n; ++t) m->EmbedToken(toks[t], st.x.data() + static_cast<size_t>(t) * E);
    }
    if (trace) trace->resize(static_cast<size_t>(c.n_layer) + 1);
    for (int l = from; l < c.n_layer; ++l) {
      if (trace) (*trace)[static_cast<size_t>(l)].assign(st.x.begin(), st.x.begin() + static_cast<ptrdiff_t>(n * E));
      const auto t0 = Clock::now();
      TRINE_RETURN_IF_ERROR(ForwardLayer(st, l));
      if (secs) (*secs)[static_cast<size_t>(l)] += std::chrono::duration<double>(Clock::now() - t0).count();
    }
    if (trace) (*trace)[static_cast<size_t>(c.n_layer)].assign(st.x.begin(), st.x.begin() + static_cast<ptrdiff_t>(n * E));
    return Status::Ok();
  }

  // Logits of the `rows` final-stream rows at `x` (rows x E) into *out (rows x V).
  void Head(const float* x, int rows, std::vector<float>* out) {
    const ModelConfig& c = m->config();
    normed.resize(static_cast<size_t>(rows) * static_cast<size_t>(c.n_embd));
    out->resize(static_cast<size_t>(rows) * static_cast<size_t>(c.n_vocab));
    ops::RmsNorm(x, m->output_norm().data(), normed.data(), rows, c.n_embd, c.rms_eps, st.n_threads);
    ops::MatMul(m->output(), normed.data(), out->data(), rows, &st.act, st.n_threads);
  }
};

// Per context (see SampleRuns), the residual stream entering every layer ([n_layer]: the final
// one) for all its tokens.
using Trace = std::vector<std::vector<std::vector<float>>>;

// The Monte Carlo samples with the model's current precisions, run as contexts of up to
// kContextTokens tokens: consecutive samples (each starting with BOS) are concatenated, so every
// matrix sees one batch of all their tokens (the integer and AMX kernels run several times faster
// on 96-128 tokens than on 12) at the price of later samples also attending to earlier ones.
// Per sample: the logits of its last `scored` positions.
struct SampleRuns {
  static constexpr int kContextTokens = 128;
  struct Group {
    std::vector<int32_t> tokens;  // its samples, concatenated
    std::vector<int> rows;        // the scored positions, sample by sample
    std::vector<size_t> n_rows;   // scored positions per sample
  };
  const Model* model = nullptr;
  std::vector<Group> groups;
  LayerRunner runner;
  std::vector<float> gathered, logits;

  Status Init(const Model* m, const std::vector<std::vector<int32_t>>& samples, int scored, int n_threads, KvType kv) {
    model = m;
    groups.clear();
    size_t longest = 1;
    for (const auto& ids : samples) {
      const int n = static_cast<int>(ids.size());
      if (groups.empty() || groups.back().tokens.size() + ids.size() > static_cast<size_t>(kContextTokens)) {
        groups.emplace_back();
      }
      Group& g = groups.back();
      const int first = std::max(0, n - scored);
      for (int i = first; i < n; ++i) g.rows.push_back(static_cast<int>(g.tokens.size()) + i);
      g.n_rows.push_back(static_cast<size_t>(n - first));
      g.tokens.insert(g.tokens.end(), ids.begin(), ids.end());
      longest = std::max(longest, g.tokens.size());
    }
    return runner.Init(m, static_cast<int>(longest), n_threads, kv);
  }

  // Whole forward passes: logits into (*out)[sample]; the layer inputs into *trace when given.
  Status Run(Dists* out, Trace* trace = nullptr) {
    if (trace) trace->resize(groups.size());
    size_t s = 0;
    for (size_t g = 0; g < groups.size(); ++g) {
      const Group& gr = groups[g];
      TRINE_RETURN_IF_ERROR(runner.Layers(gr.tokens.data(), static_cast<int>(gr.tokens.size()), 0, 0, nullptr,
                                          trace ? &(*trace)[g] : nullptr, nullptr));
      HeadOn(gr, runner.st.x.data(), out, &s);
    }
    return Status::Ok();
  }

  // As Run, resuming at layer `from` from the recorded streams trace[g][from].
  Status RunFrom(int from, const Trace& trace, Dists* out) {
    size_t s = 0;
    for (size_t g = 0; g < groups.size(); ++g) {
      const Group& gr = groups[g];
      TRINE_RETURN_IF_ERROR(runner.Layers(gr.tokens.data(), static_cast<int>(gr.tokens.size()), 0, from,
                                          trace[g][static_cast<size_t>(from)].data(), nullptr, nullptr));
      HeadOn(gr, runner.st.x.data(), out, &s);
    }
    return Status::Ok();
  }

  // Only the head, on the recorded final streams.
  void RunHead(const Trace& trace, Dists* out) {
    size_t s = 0;
    for (size_t g = 0; g < groups.size(); ++g) {
      HeadOn(groups[g], trace[g][static_cast<size_t>(model->config().n_layer)].data(), out, &s);
    }
  }

  // The head over the scored rows of group `g`'s final stream `x`, in one batch, split into
  // (*out)[*s], (*out)[*s + 1], ... (one per sample; *s advances).
  void HeadOn(const Group& g, const float* x, Dists* out, size_t* s) {
    const size_t E = static_cast<size_t>(model->config().n_embd), V = static_cast<size_t>(model->config().n_vocab);
    gathered.resize(g.rows.size() * E);
    for (size_t i = 0; i < g.rows.size(); ++i) {
      std::copy(x + static_cast<size_t>(g.rows[i]) * E, x + static_cast<size_t>(g.rows[i] + 1) * E,
                gathered.begin() + static_cast<ptrdiff_t>(i * E));
    }
    runner.Head(gathered.data(), static_cast<int>(g.rows.size()), &logits);
    // Reusing the vectors: fresh ones (~100 MB a pass on a big vocabulary) would be page faults.
    if (out->size() < *s + g.n_rows.size()) out->resize(*s + g.n_rows.size());
    size_t r = 0;
    for (size_t n : g.n_rows) {
      (*out)[(*s)++].assign(logits.begin() + static_cast<ptrdiff_t>(r * V), logits.begin() + static_cast<ptrdiff_t>((r + n) * V));
      r += n;
    }
  }

  Prepared Prep(Dists* d) const {
    Prepared p;
    Prepare(d, model->config().n_vocab, runner.st.n_threads, &p);
    return p;
  }
  void Prep(Dists* d, Prepared* p) const { Prepare(d, model->config().n_vocab, runner.st.n_threads, p); }
  std::vector<double> Kl(const Prepared& p, const Prepared& q) const {
    return profiler::Kl(p, q, model->config().n_vocab, runner.st.n_threads);
  }
};

double Mean(const std::vector<double>& v) {
  return v.empty() ? 0.0 : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

// Time per decoded token of the head as bound now (fastest of 2 runs of 4 single-row products, after one).
double TimeHead(const Model& m, int n_threads) {
  const ModelConfig& c = m.config();
  std::vector<float> x(static_cast<size_t>(c.n_embd)), y(static_cast<size_t>(c.n_vocab));
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(static_cast<float>(i) * 0.37f);
  std::vector<uint8_t> act;
  ops::MatMul(m.output(), x.data(), y.data(), 1, &act, n_threads);  // warm-up
  double best = INFINITY;
  for (int rep = 0; rep < 2; ++rep) {
    const auto t0 = Clock::now();
    for (int i = 0; i < 4; ++i) ops::MatMul(m.output(), x.data(), y.data(), 1, &act, n_threads);
    best = std::min(best, std::chrono::duration<double, std::milli>(Clock::now() - t0).count() / 4.0);
  }
  return best;
}

}  // namespace

double Spearman(const std::vector<double>& a, const std::vector<double>& b) {
  const size_t n = std::min(a.size(), b.size());
  if (n < 2) return 1.0;
  auto ranks = [n](const std::vector<double>& x) {
    std::vector<size_t> idx(n);
    std::iota(idx.begin(), idx.end(), 0);
    std::sort(idx.begin(), idx.end(), [&](size_t i, size_t j) { return x[i] < x[j]; });
    std::vector<double> r(n);
    for (size_t i = 0; i < n;) {
      size_t j = i;
      while (j + 1 < n && x[idx[j + 1]] == x[idx[i]]) ++j;
      for (size_t k = i; k <= j; ++k) r[idx[k]] = (static_cast<double>(i + j) / 2.0) + 1.0;
      i = j + 1;
    }
    return r;
  };
  const std::vector<double> ra = ranks(a), rb = ranks(b);
  const double ma = std::accumulate(ra.begin(), ra.end(), 0.0) / static_cast<double>(n);
  const double mb = std::accumulate(rb.begin(), rb.end(), 0.0) / static_cast<double>(n);
  double sab = 0, saa = 0, sbb = 0;
  for (size_t i = 0; i < n; ++i) {
    sab += (ra[i] - ma) * (rb[i] - mb);
    saa += (ra[i] - ma) * (ra[i] - ma);
    sbb += (rb[i] - mb) * (rb[i] - mb);
  }
  if (saa == 0 || sbb == 0) return (saa == sbb) ? 1.0 : 0.0;
  return sab / std::sqrt(saa * sbb);
}

double TopKOverlap(const std::vector<double>& a, const std::vector<double>& b, int k) {
  const size_t n = std::min(a.size(), b.size());
  if (n == 0 || k <= 0) return 1.0;
  const size_t kk = std::min(n, static_cast<size_t>(k));
  auto top = [&](const std::vector<double>& x) {
    std::vector<size_t> idx(n);
    std::iota(idx.begin(), idx.end(), 0);
    std::stable_sort(idx.begin(), idx.end(), [&](size_t i, size_t j) { return x[i] > x[j]; });
    idx.resize(kk);
    std::sort(idx.begin(), idx.end());
    return idx;
  };
  const auto ta = top(a), tb = top(b);
  std::vector<size_t> both;
  std::set_intersection(ta.begin(), ta.end(), tb.begin(), tb.end(), std::back_inserter(both));
  return static_cast<double>(both.size()) / static_cast<double>(kk);
}

namespace {
double ProcessCpuSeconds() {
  timespec ts{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}
}  // namespace

Status MeasureDecodeSpeed(const Model& model, int n_threads, KvType kv_type, int n, double* tok_s, double* cpu_tok_s) {
  ContextParams p;
  p.n_ctx = std::min(std::max(16, model.config().n_ctx_train), n + 8);
  p.n_threads = n_threads;
  p.kv_type = kv_type;
  std::unique_ptr<Context> ctx;
  TRINE_RETURN_IF_ERROR(Context::Create(model, p, &ctx));
  int32_t tok = model.vocab().bos() >= 0 ? model.vocab().bos() : 0;
  TRINE_RETURN_IF_ERROR(ctx->Decode(&tok, 1, false));  // warm-up
  const int steps = std::max(1, std::min(n, ctx->n_ctx() - 1));
  const auto t0 = Clock::now();
  const double c0 = ProcessCpuSeconds();
  for (int i = 0; i < steps; ++i) {
    tok = static_cast<int32_t>((tok * 31 + 7) % model.config().n_vocab);
    TRINE_RETURN_IF_ERROR(ctx->Decode(&tok, 1, false));
  }
  const double cpu = ProcessCpuSeconds() - c0;
  const double sec = std::chrono::duration<double>(Clock::now() - t0).count();
  *tok_s = sec > 0 ? steps / sec : 0;
  *cpu_tok_s = cpu > 0 ? steps / cpu : 0;
  return Status::Ok();
}

std::vector<std::vector<int32_t>> ProfileSamples(const Model& model, const ProfileOptions& o) {
  return BuildSamples(model, std::max(1, o.samples), o.seed, o.sample_tokens);
}

namespace {
int ResolveThreads(int n) { return n > 0 ? n : omp_get_num_procs(); }
}  // namespace

Status MeasurePlanKl(Model* model, const ProfileOptions& o, const Plan& plan, double* kl) {
  PrecisionGuard guard(model);
  const auto samples = BuildSamples(*model, std::max(1, o.samples), o.seed, o.sample_tokens);
  const int n_threads = ResolveThreads(o.n_threads);
  const int scored = std::max(1, o.scored_positions);
  const std::vector<PlanUnit> units = BuildUnits(*model);
  TRINE_RETURN_IF_ERROR(SetAll(model, units, false));
  TRINE_RETURN_IF_ERROR(model->SetOutputType(model->output_file_type()));  // the reference's head
  SampleRuns ref;
  TRINE_RETURN_IF_ERROR(ref.Init(model, samples, scored, n_threads, o.kv_type));
  Dists d;
  TRINE_RETURN_IF_ERROR(ref.Run(&d));
  const Prepared base = ref.Prep(&d);
  TRINE_RETURN_IF_ERROR(ApplyPlanPrecisions(plan, model));
  SampleRuns with_plan;
  TRINE_RETURN_IF_ERROR(with_plan.Init(model, samples, scored, n_threads, PlanKvType(plan)));
  TRINE_RETURN_IF_ERROR(with_plan.Run(&d));
  *kl = Mean(ref.Kl(base, ref.Prep(&d)));
  return Status::Ok();
}

Status ProfileModel(Model* model, const ProfileOptions& options, Plan* plan) {
  ProfileOptions o = options;
  // The KV candidates: the key's type, or with "auto" every type the head size allows (the
  // baseline then uses F16, llama.cpp's default).
  std::vector<KvType> kv_cands;
  if (plan->key.kv_type == "auto") {
    kv_cands.push_back(KvType::kF16);
    if (model->config().head_dim % 32 == 0) {
      kv_cands.push_back(KvType::kQ8_0);
      kv_cands.push_back(KvType::kQ4_0);
    }
    o.kv_type = KvType::kF16;
  } else {
    if (!ParseKvType(plan->key.kv_type, &o.kv_type)) {
      return InvalidArgument("unknown KV cache type '" + plan->key.kv_type + "' in the plan key");
    }
    kv_cands.push_back(o.kv_type);
  }
  if (o.samples < 2) return InvalidArgument("profiling needs at least 2 samples, got " + std::to_string(o.samples));
  if (o.sample_tokens < 2) {
    return InvalidArgument("profiling needs samples of at least 2 tokens, got " + std::to_string(o.sample_tokens));
  }
  const auto start = Clock::now();
  PrecisionGuard guard(model);
  const ModelConfig& c = model->config();
  const int n_threads = ResolveThreads(o.n_threads);
  const int scored = std::max(1, o.scored_positions);
  // Reports progress; a callback returning false stops the profile (kCancelled).
  auto progress = [&](float f, const std::string& stage) {
    if (o.progress && !o.progress(f, stage)) return Status(StatusCode::kCancelled, "profiling cancelled");
    return Status::Ok();
  };
  const auto samples = BuildSamples(*model, o.samples, o.seed, o.sample_tokens);
  std::vector<PlanUnit> units = BuildUnits(*model);
  const size_t U = units.size();
  const size_t L = static_cast<size_t>(c.n_layer);
  // Work per stage in forward-pass units: the sensitivity runs resume at their layer, so layer
  // l's costs (L - l) / L of a pass.
  const float total_steps = static_cast<float>(L + 1) / 2.0f + 6.0f;
  float step = 0;

  // Baseline: the runtime's default, every matrix with quantized (int8) activations, the file's
  // head and the base KV type. Its residual stream entering every layer is kept (for 8 samples of
  // 12 tokens on a 2560-wide, 30-layer model: 96 x 31 x 2560 floats, 30 MB).
  TRINE_RETURN_IF_ERROR(progress(0, "baseline (int8 activations)"));
  TRINE_RETURN_IF_ERROR(SetAll(model, units, true));
  TRINE_RETURN_IF_ERROR(model->SetOutputType(model->output_file_type()));
  SampleRuns runs;
  TRINE_RETURN_IF_ERROR(runs.Init(model, samples, scored, n_threads, o.kv_type));
  Dists cur;
  Trace trace;
  TRINE_RETURN_IF_ERROR(runs.Run(&cur, &trace));
  const Prepared base = runs.Prep(&cur);
  step += 1;
  plan->kl_all_fp32 = -1;  // not re-run here (the forward pass is deterministic); see MeasurePlanKl

  // MCAP's activation-norm score: mean |x| of each unit's input in the baseline run.
  for (size_t u = 0; u < U; ++u) {
    const size_t l = units[u].layer >= 0 ? static_cast<size_t>(units[u].layer) : L;
    double sum = 0;
    size_t n = 0;
    for (const auto& g : trace) {
      for (float v : g[l]) sum += std::fabs(static_cast<double>(v));
      n += g[l].size();
    }
    units[u].act_norm = sum / static_cast<double>(std::max<size_t>(1, n));
  }

  // Sensitivity: KL(unit u with fp32 activations || baseline), one unit at a time. The layers
  // before u are unchanged, so each run resumes at u from the recorded stream; the head needs
  // only the recorded final stream.
  std::vector<std::vector<double>> kl(U);
  Prepared up;        // the unit's run, buffers reused from unit to unit
  Prepared head_ref;  // the file's head with fp32 activations (the head candidates' reference)
  for (size_t u = 0; u < U; ++u) {
    TRINE_RETURN_IF_ERROR(progress(step / total_steps, "sensitivity of " + units[u].unit));
    TRINE_RETURN_IF_ERROR(SetUnitPrecision(model, units[u], false));
    if (units[u].layer >= 0) {
      TRINE_RETURN_IF_ERROR(runs.RunFrom(units[u].layer, trace, &cur));
      step += static_cast<float>(L - static_cast<size_t>(units[u].layer)) / static_cast<float>(L);
    } else {
      runs.RunHead(trace, &cur);
    }
    TRINE_RETURN_IF_ERROR(SetUnitPrecision(model, units[u], true));
    runs.Prep(&cur, &up);
    kl[u] = runs.Kl(up, base);
    if (units[u].layer < 0) head_ref = std::move(up);
  }

  // The fp32 reference (every matrix fp32): what int8 everywhere costs, and the plan's check.
  TRINE_RETURN_IF_ERROR(progress(step / total_steps, "fp32 reference"));
  TRINE_RETURN_IF_ERROR(SetAll(model, units, false));
  TRINE_RETURN_IF_ERROR(runs.Run(&cur));
  const Prepared ref = runs.Prep(&cur);
  plan->kl_all_int8 = Mean(runs.Kl(ref, base));
  TRINE_RETURN_IF_ERROR(SetAll(model, units, true));
  step += 1;

  std::vector<double> half_a(U), half_b(U);
  for (size_t u = 0; u < U; ++u) {
    double a = 0, b = 0;
    int na = 0, nb = 0;
    for (size_t s = 0; s < samples.size(); ++s) {
      if (s % 2 == 0) {
        a += kl[u][s];
        ++na;
      } else {
        b += kl[u][s];
        ++nb;
      }
    }
    units[u].kl_half[0] = half_a[u] = na ? a / na : 0;
    units[u].kl_half[1] = half_b[u] = nb ? b / nb : 0;
    units[u].kl_int8 = (a + b) / static_cast<double>(samples.size());
  }
  plan->spearman = Spearman(half_a, half_b);
  plan->topk_overlap = TopKOverlap(half_a, half_b, std::max(1, static_cast<int>(U) / 2));

  // KV cache candidates: only the cache type changes (the baseline's int8 activations).
  TRINE_RETURN_IF_ERROR(progress(step / total_steps, "KV cache candidates"));
  const int key_ctx = plan->key.n_ctx > 0 ? plan->key.n_ctx : std::min(c.n_ctx_train, 4096);
  plan->kv_candidates.clear();
  for (KvType t : kv_cands) {
    PlanCandidate pc;
    pc.type = KvTypeName(t);
    pc.bytes = static_cast<uint64_t>(KvCache::Bytes(t, t, c.n_layer, key_ctx, c.n_head_kv * c.head_dim));
    if (t != o.kv_type) {
      SampleRuns kv_runs;
      TRINE_RETURN_IF_ERROR(kv_runs.Init(model, samples, scored, n_threads, t));
      TRINE_RETURN_IF_ERROR(kv_runs.Run(&cur));
      pc.kl = Mean(runs.Kl(base, runs.Prep(&cur)));
    }
    plan->kv_candidates.push_back(pc);
  }
  step += 1;

  // Head candidates: the head requantized to each type with its quantized activations (the
  // kernel llama.cpp would run), on the baseline's final streams, against the file's head with
  // fp32 activations; and its time per token.
  TRINE_RETURN_IF_ERROR(progress(step / total_steps, "output head candidates"));
  const PlanUnit& head_unit = units.back();
  const TypeId file_head = model->output_file_type();
  plan->output_file_type = TypeName(file_head);
  plan->output_candidates.clear();
  std::vector<TypeId> head_types;
  if (plan->key.output_type == "auto") {
    // Only types no wider than the file's: a wider head costs memory and time and cannot recover
    // precision the file does not have (and requantizing a big head costs load time).
    for (TypeId t : {file_head, TypeId::kF16, TypeId::kQ8_0, TypeId::kQ6_K, TypeId::kQ4_0}) {
      if (t != file_head && BitsPerWeight(t) > BitsPerWeight(file_head)) continue;
      if (std::find(head_types.begin(), head_types.end(), t) == head_types.end()) head_types.push_back(t);
    }
  } else if (plan->key.output_type == "file" || plan->key.output_type.empty()) {
    head_types.push_back(file_head);
  } else {
    TypeId t;
    if (!ParseTypeName(plan->key.output_type, &t)) {
      return InvalidArgument("unknown output head type '" + plan->key.output_type + "'");
    }
    head_types.push_back(t);
  }
  const bool tied = c.tied_output;
  for (TypeId t : head_types) {
    const auto q0 = Clock::now();
    Status st = model->SetOutputType(t);
    const double load_s = std::chrono::duration<double>(Clock::now() - q0).count();
    if (!st.ok()) {
      if (head_types.size() == 1) return st;
      continue;  // e.g. rows not a whole number of Q6_K blocks
    }
    PlanCandidate pc;
    pc.type = TypeName(t);
    pc.load_s = t == file_head ? 0.0 : load_s;
    // Resident bytes of the head: the requantized copy (a tied head keeps the embedding too).
    pc.bytes = t == file_head ? head_unit.weight_bytes : model->output_bytes() + (tied ? head_unit.weight_bytes : 0);
    runs.RunHead(trace, &cur);
    pc.ms = TimeHead(*model, n_threads);
    pc.kl = Mean(runs.Kl(head_ref, runs.Prep(&cur)));
    plan->output_candidates.push_back(pc);
  }
  TRINE_RETURN_IF_ERROR(model->SetOutputType(file_head));
  step += 1;

  // Per-layer decode timings in both precisions after an 8-token prompt (run once, in int8: the
  // cache's contents do not change the time): int8, the fastest of 2 runs of 6 tokens (timing
  // noise is one-sided); fp32, one run of 2 (its decode is ~10x slower and bound by dequantizing
  // the weights, which varies little). Every run decodes at the positions after the prompt.
  TRINE_RETURN_IF_ERROR(progress(step / total_steps, "layer timings"));
  const int prompt = std::min(8, static_cast<int>(samples[0].size())), max_steps = 6;
  LayerRunner timer;
  TRINE_RETURN_IF_ERROR(timer.Init(model, prompt + max_steps + 1, n_threads, o.kv_type));
  std::vector<float> head_out;
  double token_ms_int8 = INFINITY;  // a whole decode step (embedding to logits) in int8
  for (int prec = 1; prec >= 0; --prec) {
    TRINE_RETURN_IF_ERROR(SetAll(model, units, prec == 1));
    if (prec == 1) TRINE_RETURN_IF_ERROR(timer.Layers(samples[0].data(), prompt, 0, 0, nullptr, nullptr, nullptr));
    const int steps = prec == 1 ? max_steps : 2, reps = prec == 1 ? 2 : 1;
    std::vector<double> best(U, INFINITY);
    for (int rep = 0; rep < reps; ++rep) {
      std::vector<double> secs(U, 0.0);
      const auto w0 = Clock::now();
      for (int i = 0; i < steps; ++i) {
        const int32_t t = samples[static_cast<size_t>(i) % samples.size()][0];
        TRINE_RETURN_IF_ERROR(timer.Layers(&t, 1, prompt + i, 0, nullptr, nullptr, &secs));
        const auto h0 = Clock::now();
        timer.Head(timer.st.x.data(), 1, &head_out);
        secs[L] += std::chrono::duration<double>(Clock::now() - h0).count();
      }
      const double whole_ms = std::chrono::duration<double, std::milli>(Clock::now() - w0).count() / steps;
      if (prec == 1) token_ms_int8 = std::min(token_ms_int8, whole_ms);
      for (size_t u = 0; u < U; ++u) best[u] = std::min(best[u], secs[u] * 1000.0 / steps);
    }
    for (size_t u = 0; u < U; ++u) (prec == 1 ? units[u].ms_int8 : units[u].ms_fp32) = best[u];
  }
  step += 1;
  // What the units' times leave out of a whole step (embedding, the loop) is the same in every
  // precision, so the all-fp32 prediction follows from the int8 step.
  double ms_int8 = 0, ms_fp32 = 0;
  for (const PlanUnit& u : units) {
    ms_int8 += u.ms_int8;
    ms_fp32 += u.ms_fp32;
  }
  const double overhead = std::isfinite(token_ms_int8) ? std::max(0.0, token_ms_int8 - ms_int8) : 0.0;
  plan->pred_tok_s_fp32 = overhead + ms_fp32 > 0 ? 1000.0 / (overhead + ms_fp32) : 0.0;

  plan->units = units;
  plan->samples = static_cast<int>(samples.size());
  size_t tok_total = 0;
  for (const auto& s : samples) tok_total += s.size();
  plan->tokens_per_sample = static_cast<int>(tok_total / samples.size());
  plan->n_threads = n_threads;

  // Plan, and its measured KL against the fp32 reference.
  TRINE_RETURN_IF_ERROR(progress(step / total_steps, "plan check"));
  PlanFromProfile(c, OtherWeightBytes(*model, units), plan);
  // When the layers run as in the baseline (every layer int8, the base KV type), only the head
  // can differ: it runs on the recorded final streams.
  bool layers_as_baseline = PlanKvType(*plan) == o.kv_type;
  for (const PlanUnit& u : plan->units) layers_as_baseline = layers_as_baseline && (u.layer < 0 || u.precision == "int8");
  TRINE_RETURN_IF_ERROR(ApplyPlanPrecisions(*plan, model));
  if (layers_as_baseline) {
    runs.RunHead(trace, &cur);
    plan->kl_plan = Mean(runs.Kl(ref, runs.Prep(&cur)));
  } else {
    SampleRuns plan_runs;
    TRINE_RETURN_IF_ERROR(plan_runs.Init(model, samples, scored, n_threads, PlanKvType(*plan)));
    TRINE_RETURN_IF_ERROR(plan_runs.Run(&cur));
    plan->kl_plan = Mean(runs.Kl(ref, runs.Prep(&cur)));
  }
  plan->profile_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  TRINE_RETURN_IF_ERROR(progress(1, "done"));
  return Status::Ok();
}

namespace {

// Memory estimates (what a context of key.n_ctx with batch 512 allocates) and per-layer
// placement under key.mem_budget, with the KV cache `kv` and, when set, the head requantized as
// `head` (its bytes replace the file head's). Most sensitive layers resident first; the head
// always resident; when some layers must be streamed, kStreamSlots x the largest layer is
// reserved for the ring first. plan->memory.runtime (measured by the caller) is kept and counts.
void PlaceUnits(const ModelConfig& c, uint64_t other_weight_bytes, const PlanCandidate& kv, const PlanCandidate* head,
                Plan* plan) {
  std::vector<PlanUnit>& units = plan->units;
  PlanMemory& m = plan->memory;
  const uint64_t runtime = m.runtime;
  m = PlanMemory();
  m.runtime = runtime;
  m.budget = plan->key.mem_budget != 0 ? plan->key.mem_budget : MachineAvailableBytes();
  const uint64_t n_ctx = static_cast<uint64_t>(plan->key.n_ctx > 0 ? plan->key.n_ctx : std::min(c.n_ctx_train, 4096));
  const uint64_t kv_dim = static_cast<uint64_t>(c.n_head_kv) * static_cast<uint64_t>(c.head_dim);
  if (kv.bytes > 0) {
    m.kv = kv.bytes;
  } else {
    KvType kvt = KvType::kF16;
    if (!ParseKvType(kv.type, &kvt)) kvt = KvType::kF16;
    m.kv = static_cast<uint64_t>(KvCache::Bytes(kvt, kvt, c.n_layer, static_cast<int>(n_ctx), static_cast<int>(kv_dim)));
  }
  const uint64_t nb = std::min<uint64_t>(512, n_ctx);
  const uint64_t E = static_cast<uint64_t>(c.n_embd), F = static_cast<uint64_t>(c.n_ff);
  const uint64_t qd = static_cast<uint64_t>(c.n_head) * static_cast<uint64_t>(c.head_dim);
  m.activations = nb * (3 * E + 2 * qd + 2 * kv_dim + 2 * F) * 4 + nb * std::max(E, F) * 4;
  m.buffers = static_cast<uint64_t>(c.n_vocab) * 4 + nb * E * 4;
  auto unit_bytes = [&](const PlanUnit& u) { return head != nullptr && u.layer < 0 ? head->bytes : u.weight_bytes; };
  m.weights = other_weight_bytes;
  for (const PlanUnit& u : units) m.weights += unit_bytes(u);
  uint64_t fixed = m.runtime + m.kv + m.activations + m.buffers + other_weight_bytes;
  for (const PlanUnit& u : units) {
    if (u.layer < 0) fixed += unit_bytes(u);  // the head always stays resident
  }
  uint64_t room = m.budget > fixed ? m.budget - fixed : 0;
  std::vector<size_t> layers;
  for (size_t u = 0; u < units.size(); ++u) {
    if (units[u].layer >= 0) layers.push_back(u);
  }
  // Most important (highest measured KL) first.
  std::stable_sort(layers.begin(), layers.end(), [&](size_t a, size_t b) { return units[a].kl_int8 > units[b].kl_int8; });
  uint64_t all_layers = 0, max_layer = 0;
  for (size_t u : layers) {
    all_layers += units[u].weight_bytes;
    max_layer = std::max(max_layer, units[u].weight_bytes);
  }
  const bool fits = all_layers <= room;
  if (!fits) {
    // Some layers will be streamed: the streamer's ring (kStreamSlots layer-sized buffers; TQ1_0
    // and I2_S files need about twice that for the repack) comes out of the room first.
    m.stream_ring = kStreamSlots * max_layer;
    room = room > m.stream_ring ? room - m.stream_ring : 0;
  }
  const uint64_t resident_cap = room / 5 * 4;
  uint64_t cum = 0;
  for (size_t u : layers) {
    cum += units[u].weight_bytes;
    if (fits || cum <= resident_cap) {
      units[u].placement = "resident";
      m.resident += units[u].weight_bytes;
    } else if (cum <= room) {
      units[u].placement = "page_cache";
      m.page_cache += units[u].weight_bytes;
    } else {
      units[u].placement = "streamed";
      m.streamed += units[u].weight_bytes;
    }
  }
  for (PlanUnit& u : units) {
    if (u.layer < 0) {
      u.placement = "resident";
      m.resident += unit_bytes(u);
    }
  }
  m.resident += other_weight_bytes;
}

// One planning pass with the KV cache type `kv` and, when `head` is set, the head fixed to that
// requantized type with quantized activations (otherwise the head is a unit like the layers).
// Returns false when the fixed choices alone exceed max_kl.
bool PlanOnce(const ModelConfig& c, uint64_t other_weight_bytes, const PlanCandidate& kv, const PlanCandidate* head,
              Plan* plan) {
  std::vector<PlanUnit>& units = plan->units;
  const double fixed_kl = std::max(0.0, kv.kl) + (head ? std::max(0.0, head->kl) : 0.0);
  if (fixed_kl > plan->key.max_kl) return false;
  // Precision: start all fp32, switch units to int8 cheapest-KL-per-ms-saved first.
  std::vector<size_t> order;
  for (size_t u = 0; u < units.size(); ++u) {
    const bool fixed_head = head != nullptr && units[u].layer < 0;
    units[u].precision = fixed_head ? "int8" : "fp32";
    if (!fixed_head && units[u].ms_fp32 - units[u].ms_int8 > 0) order.push_back(u);
  }
  auto ratio = [&](size_t u) { return std::max(0.0, units[u].kl_int8) / (units[u].ms_fp32 - units[u].ms_int8); };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return ratio(a) < ratio(b); });
  double kl = fixed_kl;
  for (size_t u : order) {
    const double k = std::max(0.0, units[u].kl_int8);
    if (kl + k <= plan->key.max_kl) {
      units[u].precision = "int8";
      kl += k;
    }
  }
  plan->pred_kl = kl;
  plan->kv_type = kv.type;
  plan->output_type = head ? head->type : plan->output_file_type;
  plan->tensors.clear();
  // Predicted ms/token = the measured all-fp32 decode time not spent in the profiled units
  // (embedding, sampling overhead; clamped at 0 when timing noise makes it negative) + each unit's
  // measured time in its chosen precision (the head's in its chosen type). Always > 0.
  double units_fp32 = 0;
  for (const PlanUnit& u : units) units_fp32 += u.ms_fp32;
  const double anchor = plan->pred_tok_s_fp32 > 0 ? 1000.0 / plan->pred_tok_s_fp32 : units_fp32;
  const double overhead = std::max(0.0, anchor - units_fp32);
  double ms_plan = overhead, ms_i8 = overhead;
  for (const PlanUnit& u : units) {
    for (const std::string& t : u.tensors) plan->tensors[t] = u.precision;
    if (head != nullptr && u.layer < 0) {
      ms_plan += head->ms;
    } else {
      ms_plan += u.precision == "int8" ? u.ms_int8 : u.ms_fp32;
    }
    ms_i8 += u.ms_int8;
  }
  plan->pred_tok_s = ms_plan > 0 ? 1000.0 / ms_plan : 0;
  plan->pred_tok_s_int8 = ms_i8 > 0 ? 1000.0 / ms_i8 : 0;
  PlaceUnits(c, other_weight_bytes, kv, head, plan);
  return true;
}

uint64_t Overflow(const Plan& p) {
  const PlanMemory& m = p.memory;
  const uint64_t need = m.runtime + m.kv + m.activations + m.buffers + m.weights;
  return need > m.budget ? need - m.budget : 0;
}

}  // namespace

void PlacePlan(const ModelConfig& c, uint64_t other_weight_bytes, Plan* plan) {
  PlanCandidate kv;
  kv.type = plan->key.kv_type != "auto" ? plan->key.kv_type : plan->kv_type;
  plan->kv_type = kv.type;
  PlaceUnits(c, other_weight_bytes, kv, nullptr, plan);
}

Status UniformPlan(Model* model, bool int8, TypeId head, KvType kv, Plan* plan) {
  const ModelConfig& c = model->config();
  plan->units = BuildUnits(*model);
  const uint64_t other = OtherWeightBytes(*model, plan->units);
  const TypeId file_head = model->output_file_type();
  if (head == TypeId::kCount) head = file_head;
  plan->output_file_type = TypeName(file_head);
  PlanCandidate hc;
  hc.type = TypeName(head);
  if (head != file_head) {
    const TypeId was = model->output_type();
    TRINE_RETURN_IF_ERROR(model->SetOutputType(head));
    hc.bytes = model->output_bytes() + (c.tied_output ? plan->units.back().weight_bytes : 0);
    TRINE_RETURN_IF_ERROR(model->SetOutputType(was));
  }
  PlanCandidate kc;
  kc.type = KvTypeName(kv);
  const int n_ctx = plan->key.n_ctx > 0 ? plan->key.n_ctx : std::min(c.n_ctx_train, 4096);
  TRINE_RETURN_IF_ERROR(KvCache().Allocate(kv, kv, 0, n_ctx, c.n_head_kv, c.head_dim));  // validates the type
  kc.bytes = static_cast<uint64_t>(KvCache::Bytes(kv, kv, c.n_layer, n_ctx, c.n_head_kv * c.head_dim));
  plan->kv_candidates = {kc};
  plan->output_candidates = head != file_head ? std::vector<PlanCandidate>{hc} : std::vector<PlanCandidate>{};
  const double max_kl = plan->key.max_kl;
  plan->key.max_kl = INFINITY;
  PlanOnce(c, other, kc, head != file_head ? &hc : nullptr, plan);
  plan->key.max_kl = max_kl;
  plan->tensors.clear();
  for (PlanUnit& u : plan->units) {
    u.precision = int8 ? "int8" : "fp32";
    for (const std::string& t : u.tensors) plan->tensors[t] = u.precision;
  }
  plan->pred_kl = -1;  // not profiled
  plan->pred_tok_s = plan->pred_tok_s_int8 = plan->pred_tok_s_fp32 = 0;
  return Status::Ok();
}

void PlanFromProfile(const ModelConfig& c, uint64_t other_weight_bytes, Plan* plan) {
  std::vector<PlanCandidate> kvs = plan->kv_candidates;
  if (plan->key.kv_type != "auto") {
    // A cache type fixed by the caller (e.g. the context of a plan at load): only that one.
    std::vector<PlanCandidate> fixed;
    for (const PlanCandidate& k : kvs) {
      if (k.type == plan->key.kv_type) fixed.push_back(k);
    }
    kvs = fixed;
  }
  if (kvs.empty()) {
    PlanCandidate pc;
    pc.type = plan->key.kv_type == "auto" ? "f16" : plan->key.kv_type;
    kvs.push_back(pc);  // bytes computed by PlanOnce
  }
  // Head options: nullptr = the file's type (a unit of the activation greedy), else a candidate.
  std::vector<const PlanCandidate*> heads = {nullptr};
  for (const PlanCandidate& h : plan->output_candidates) {
    if (h.type != plan->output_file_type) heads.push_back(&h);
  }
  const Plan input = *plan;
  bool have = false;
  Plan best;
  double best_ms = 0;
  for (const PlanCandidate& kv : kvs) {
    for (const PlanCandidate* head : heads) {
      Plan p = input;
      if (!PlanOnce(c, other_weight_bytes, kv, head, &p)) continue;
      // Least memory over the budget, then fastest, then lowest KL.
      const double ms = p.pred_tok_s > 0 ? 1000.0 / p.pred_tok_s : INFINITY;
      bool better = !have;
      if (have) {
        const uint64_t o = Overflow(p), bo = Overflow(best);
        if (o != bo) {
          better = o < bo;
        } else if (std::fabs(ms - best_ms) > 1e-9 * std::max(ms, best_ms)) {
          better = ms < best_ms;
        } else {
          better = p.pred_kl < best.pred_kl;
        }
      }
      if (better) {
        best = std::move(p);
        best_ms = ms;
        have = true;
      }
    }
  }
  if (!have) {
    // Even the most precise KV cache alone exceeds max_kl: take the lowest-KL cache, file head.
    const PlanCandidate* lowest = &kvs[0];
    for (const PlanCandidate& kv : kvs) {
      if (kv.kl < lowest->kl) lowest = &kv;
    }
    PlanCandidate kv = *lowest;
    best = input;
    best.key.max_kl = std::max(input.key.max_kl, kv.kl);
    PlanOnce(c, other_weight_bytes, kv, nullptr, &best);
    best.key.max_kl = input.key.max_kl;
  }
  *plan = std::move(best);
}

}  // namespace trine::profiler
