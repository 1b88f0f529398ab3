// `trine bench`: llama-bench's contract for trine. For each model x thread count x depth x test,
// a pp row (a prompt of -p tokens evaluated as one batch) and a tg row (-n single-token decodes)
// after -d tokens already in the context (0: an empty one; "pp128 @ d1024" as llama-bench names
// it), each repeated -r times after a warm-up, reported as tok/s mean +- sample standard
// deviation. Beyond llama-bench: the bytes of weights a decoded token reads, the read
// rate that implies (GB/s) and, with --membw, the machine's streaming read bandwidth measured here
// at the same thread count and the share of it the decode reaches.
#include <cxxopts.hpp>
#include <nlohmann/json.hpp>

#include <omp.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bench_batched.h"
#include "cli_args.h"
#include "cli_common.h"
#include "commands.h"
#include "kernels.h"
#include "membw.h"
#include "model/model.h"
#include "model_options.h"
#include "runtime/context.h"

namespace trine::cli {

std::vector<int32_t> RandomTokens(const Model& m, int n, int n_past, std::mt19937& rng) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  const int n_vocab = m.config().n_vocab;
  for (auto& id : t) id = static_cast<int32_t>(rng() % static_cast<uint32_t>(n_vocab));
  if (n > 0 && n_past == 0 && m.vocab().add_bos() && m.vocab().bos() >= 0) t[0] = m.vocab().bos();
  return t;
}

namespace {

using Clock = std::chrono::steady_clock;

struct ModelInfo {
  std::string path;
  std::string desc;       // "bitnet 2.41B TQ2_0"
  uint64_t size = 0;      // bytes of all tensors
  uint64_t n_params = 0;  // elements of all tensors
  uint64_t bytes_per_token = 0;  // weight bytes one decoded token reads, as stored in the file
  uint64_t resident_bytes_per_token = 0;  // the same in memory, after any load-time repacking
  std::string isa;                // kernel level the model was bound to ("avx512", "ref", ...)
};

struct Row {
  const ModelInfo* model = nullptr;
  int n_threads = 0;
  int n_prompt = 0, n_gen = 0, n_batch = 0;
  int n_depth = 0;                 // tokens in the context before the timed ones (not timed)
  std::vector<double> samples_ns;  // wall time of each repetition
  double membw_gbps = 0;           // 0 when not measured; for tg rows the mean of membw_samples
  std::vector<double> membw_samples;  // tg with --membw: the probe run just before each repetition
  double rss_mib = 0;              // resident set after the test
  std::string time;                // ISO 8601 UTC, when the row started

  std::string test() const {
    const std::string t = n_prompt > 0 ? "pp" + std::to_string(n_prompt) : "tg" + std::to_string(n_gen);
    return n_depth > 0 ? t + " @ d" + std::to_string(n_depth) : t;
  }
  int n_tokens() const { return n_prompt > 0 ? n_prompt : n_gen; }
  std::vector<double> samples_ts() const {
    std::vector<double> ts;
    for (double ns : samples_ns) ts.push_back(1e9 * n_tokens() / ns);
    return ts;
  }
  static double Mean(const std::vector<double>& v) {
    double s = 0;
    for (double x : v) s += x;
    return v.empty() ? 0.0 : s / static_cast<double>(v.size());
  }
  // Sample standard deviation (n - 1), 0 for fewer than 2 samples, as llama-bench.
  static double Stdev(const std::vector<double>& v) {
    if (v.size() < 2) return 0.0;
    const double m = Mean(v);
    double s = 0;
    for (double x : v) s += (x - m) * (x - m);
    return std::sqrt(s / static_cast<double>(v.size() - 1));
  }
  bool is_tg() const { return n_prompt == 0; }
  double gbps() const { return is_tg() ? Mean(samples_ts()) * static_cast<double>(model->bytes_per_token) / 1e9 : 0.0; }
  // Share of the read bandwidth the decode reached, %: each repetition's GB/s over the probe run
  // just before it, averaged (0 when not measured).
  double membw_pct() const {
    if (!is_tg() || membw_samples.size() != samples_ns.size() || samples_ns.empty()) return 0.0;
    const auto ts = samples_ts();
    std::vector<double> pct;
    for (size_t i = 0; i < ts.size(); ++i) {
      pct.push_back(100.0 * ts[i] * static_cast<double>(model->bytes_per_token) / 1e9 / membw_samples[i]);
    }
    return Mean(pct);
  }
};

std::string NowIso() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

double RssMib() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atof(line.c_str() + 6) / 1024.0;
  }
  return 0.0;
}

std::string Upper(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

std::string HumanCount(uint64_t n) {
  char buf[32];
  if (n >= 1000000000ull) {
    std::snprintf(buf, sizeof(buf), "%.2fB", static_cast<double>(n) / 1e9);
  } else if (n >= 1000000ull) {
    std::snprintf(buf, sizeof(buf), "%.1fM", static_cast<double>(n) / 1e6);
  } else {
    std::snprintf(buf, sizeof(buf), "%.1fK", static_cast<double>(n) / 1e3);
  }
  return buf;
}

std::string HumanBytes(uint64_t n) {
  char buf[32];
  if (n >= (1ull << 30)) {
    std::snprintf(buf, sizeof(buf), "%.2f GiB", static_cast<double>(n) / (1ull << 30));
  } else {
    std::snprintf(buf, sizeof(buf), "%.2f MiB", static_cast<double>(n) / (1ull << 20));
  }
  return buf;
}

ModelInfo Describe(const Model& m, const std::string& path) {
  ModelInfo info;
  info.path = path;
  std::map<TypeId, uint64_t> layer_bytes;
  for (const auto& t : m.file().tensors()) {
    info.size += t.n_bytes;
    info.n_params += static_cast<uint64_t>(t.n_elems);
    // A decoded token reads every tensor once, the embedding as the (tied) output matrix; an
    // untied embedding is only read one row per token; an output.weight the architecture ignores
    // (bitnet ties its output) is not read at all.
    const bool tied = m.config().tied_output;
    if (!(t.name == "token_embd.weight" && !tied) && !(t.name == "output.weight" && tied)) {
      info.bytes_per_token += t.n_bytes;
    }
    if (t.name.rfind("blk.", 0) == 0 && t.n_dims >= 2) layer_bytes[t.type] += t.n_bytes;
  }
  TypeId main_type = TypeId::kF32;
  uint64_t best = 0;
  for (const auto& [type, bytes] : layer_bytes) {
    if (bytes > best) best = bytes, main_type = type;
  }
  info.desc = m.config().arch_name + " " + HumanCount(info.n_params) + " " + Upper(TypeName(main_type));
  info.isa = kernels::IsaName(m.isa());
  // What the forward pass reads: the bound weight views (repacked copies where the loader made
  // them) and the fp32 norm vectors.
  // (The x16 interleave adds only alignment padding, not counted.)
  auto view_bytes = [](const kernels::WeightView& w) { return static_cast<uint64_t>(w.rows) * w.row_bytes; };
  uint64_t resident = view_bytes(m.output()) + (m.output_norm().size() + m.rope_freqs().size()) * sizeof(float);
  for (const auto& l : m.layers()) {
    for (const auto* w : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) resident += view_bytes(*w);
    resident += (l.attn_norm.size() + l.attn_sub_norm.size() + l.ffn_norm.size() + l.ffn_sub_norm.size()) * sizeof(float);
  }
  info.resident_bytes_per_token = resident;
  return info;
}

// Parses "1,2", "1-4" and repeated flags into positive integers (llama-bench's list syntax).
Status ParseIntList(const std::vector<std::string>& items, const char* flag, int min_value, std::vector<int>* out) {
  for (const std::string& item : items) {
    int lo = 0, hi = 0;
    char extra = 0;
    if (std::sscanf(item.c_str(), "%d-%d%c", &lo, &hi, &extra) == 2 && lo <= hi) {
      // range
    } else if (std::sscanf(item.c_str(), "%d%c", &lo, &extra) == 1) {
      hi = lo;
    } else {
      return InvalidArgument(std::string(flag) + ": '" + item + "' is not a number, list or range");
    }
    if (lo < min_value || hi > 1 << 20) {
      return InvalidArgument(std::string(flag) + ": " + item + " is out of range (at least " +
                             std::to_string(min_value) + ")");
    }
    for (int v = lo; v <= hi; ++v) out->push_back(v);
  }
  return Status::Ok();
}

std::vector<std::string> ListArg(const cxxopts::ParseResult& a, const char* name, const std::string& def) {
  if (!a.count(name)) return {def};
  return a[name].as<std::vector<std::string>>();
}

// The tests run after the first n_past tokens of the context (the depth, decoded once per test):
// each truncates back to them first.
Status RunPrompt(Context& ctx, int n_past, const std::vector<int32_t>& tokens) {
  ctx.Truncate(n_past);
  return ctx.Decode(tokens.data(), static_cast<int>(tokens.size()), false);
}

Status RunGen(Context& ctx, int n_past, const std::vector<int32_t>& tokens) {
  ctx.Truncate(n_past);
  for (int32_t t : tokens) TRINE_RETURN_IF_ERROR(ctx.Decode(&t, 1, false));
  return Status::Ok();
}

std::string Cell(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), fmt, v);
  return buf;
}

void PrintMarkdownHeader(bool membw) {
  std::printf("| model | size | params | isa | threads | test | t/s | MiB/token | GB/s |%s\n", membw ? " % of membw |" : "");
  std::printf("| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: |%s\n", membw ? " ---: |" : "");
  std::fflush(stdout);
}

void PrintMarkdownRow(const Row& r, bool membw) {
  const auto ts = r.samples_ts();
  std::string cells = "| " + r.model->desc + " | " + HumanBytes(r.model->size) + " | " + HumanCount(r.model->n_params) +
                      " | " + r.model->isa + " | " + std::to_string(r.n_threads) + " | " + r.test() + " | " + Cell("%.2f", Row::Mean(ts)) +
                      " ± " + Cell("%.2f", Row::Stdev(ts)) + " | ";
  if (r.is_tg()) {
    cells += Cell("%.1f", static_cast<double>(r.model->bytes_per_token) / (1 << 20)) + " | " + Cell("%.2f", r.gbps()) + " |";
    const double pct = r.membw_pct();
    if (membw) cells += pct > 0 ? " " + Cell("%.0f", pct) + "% |" : " |";
  } else {
    cells += " |  |";
    if (membw) cells += "  |";
  }
  std::printf("%s\n", cells.c_str());
  std::fflush(stdout);
}

// The --membw probe's buffer of `mib` MiB; the error names the size when it cannot be allocated.
Status NewProbe(int mib, std::unique_ptr<MemoryBandwidth>* out) {
  *out = std::make_unique<MemoryBandwidth>(static_cast<size_t>(mib) << 20);
  if (!(*out)->ok()) return Status(StatusCode::kOutOfMemory, "--membw: cannot allocate " + std::to_string(mib) + " MiB");
  return Status::Ok();
}

nlohmann::json RowJson(const Row& r) {
  const auto ts = r.samples_ts();
  nlohmann::json j;
  j["model_filename"] = r.model->path;
  j["model_type"] = r.model->desc;
  j["model_size"] = r.model->size;
  j["model_n_params"] = r.model->n_params;
  j["n_threads"] = r.n_threads;
  j["n_batch"] = r.n_batch;
  j["n_prompt"] = r.n_prompt;
  j["n_gen"] = r.n_gen;
  j["n_depth"] = r.n_depth;
  j["test"] = r.test();
  j["test_time"] = r.time;
  j["avg_ns"] = Row::Mean(r.samples_ns);
  j["stddev_ns"] = Row::Stdev(r.samples_ns);
  j["avg_ts"] = Row::Mean(ts);
  j["stddev_ts"] = Row::Stdev(ts);
  j["samples_ns"] = r.samples_ns;
  j["samples_ts"] = ts;
  j["isa"] = r.model->isa;
  j["bytes_per_token"] = r.model->bytes_per_token;
  j["resident_bytes_per_token"] = r.model->resident_bytes_per_token;
  j["gbps"] = r.is_tg() ? nlohmann::json(r.gbps()) : nlohmann::json(nullptr);
  j["membw_gbps"] = r.membw_gbps > 0 ? nlohmann::json(r.membw_gbps) : nlohmann::json(nullptr);
  const double pct = r.membw_pct();
  j["membw_pct"] = pct > 0 ? nlohmann::json(pct) : nlohmann::json(nullptr);
  j["membw_samples_gbps"] = r.membw_samples;
  j["rss_mib"] = r.rss_mib;
  return j;
}

}  // namespace

int RunBench(int argc, char** argv) {
  cxxopts::Options opts("trine bench", "Prompt processing and generation speed, llama-bench style.");
  opts.add_options()("m,model", "GGUF model file; repeat or comma-separate for several (default: the bundled model)",
                     cxxopts::value<std::vector<std::string>>())(
      "t,threads", "thread counts, e.g. 1,2 or 1-4 (default: all cores)", cxxopts::value<std::vector<std::string>>())(
      "p,n-prompt", "prompt lengths of the pp tests (0 = none)", cxxopts::value<std::vector<std::string>>())(
      "n,n-gen", "token counts of the tg tests (0 = none)", cxxopts::value<std::vector<std::string>>())(
      "d,n-depth", "tokens already in the context before each test, e.g. 0,1024 (not timed)",
      cxxopts::value<std::vector<std::string>>())(
      "b,batch-size", "tokens per forward pass in pp (a longer prompt is split)",
      cxxopts::value<int>()->default_value("512"))("r,repetitions", "repetitions of each test",
                                                    cxxopts::value<int>()->default_value("5"))(
      "o,output", "md or json", cxxopts::value<std::string>()->default_value("md"))(
      "membw", "measure the memory read bandwidth at each thread count, and before each tg run to compare")(
      "membw-mib", "size of the --membw buffer in MiB", cxxopts::value<int>()->default_value("1024"))(
      "no-warmup", "skip the warm-up run")(
      "fixed-threads", "always run -t threads (by default a pass may run fewer when that measures faster)")(
      "npp", "llama-batched-bench mode: prompt lengths, e.g. 128 (with -ntg and -npl)",
      cxxopts::value<std::vector<std::string>>())("ntg", "llama-batched-bench mode: generated tokens per sequence",
                                                  cxxopts::value<std::vector<std::string>>())(
      "npl", "llama-batched-bench mode: parallel sequences, e.g. 1,4,8,16", cxxopts::value<std::vector<std::string>>())(
      "pps", "llama-batched-bench mode: one prompt shared by the sequences (computed once, forked)")(
      "h,help", "show this help");
  cxxopts::ParseResult a;
  if (const int rc = ParseCommand("bench", opts, argc, argv, &a); rc >= 0) return rc;
  const std::string format = a["output"].as<std::string>();
  if (format != "md" && format != "json") return Fail("-o must be md or json, got '" + format + "'");

  std::vector<int> threads, prompts, gens, depths;
  Status st = ParseIntList(ListArg(a, "threads", std::to_string(omp_get_num_procs())), "-t", 1, &threads);
  if (st.ok()) st = ParseIntList(ListArg(a, "n-prompt", "512"), "-p", 0, &prompts);
  if (st.ok()) st = ParseIntList(ListArg(a, "n-gen", "128"), "-n", 0, &gens);
  if (st.ok()) st = ParseIntList(ListArg(a, "n-depth", "0"), "-d", 0, &depths);
  if (!st.ok()) return Fail(st);
  const int reps = a["repetitions"].as<int>();
  if (reps < 1) return Fail("-r must be >= 1, got " + std::to_string(reps));
  const int n_batch = a["batch-size"].as<int>();
  if (n_batch < 1) return Fail("-b must be >= 1, got " + std::to_string(n_batch));
  const int membw_mib = a["membw-mib"].as<int>();
  if (membw_mib < 1) return Fail("--membw-mib must be >= 1, got " + std::to_string(membw_mib));
  const bool membw = a.count("membw") > 0;
  const bool warmup = !a.count("no-warmup");
  std::vector<std::string> paths;
  if (a.count("model")) paths = a["model"].as<std::vector<std::string>>();
  if (paths.empty()) paths.push_back(ResolveModelPath(""));
  if (a.count("npp") || a.count("ntg") || a.count("npl") || a.count("pps")) {
    BatchedBenchArgs ba;
    st = ParseIntList(ListArg(a, "npp", "128"), "-npp", 0, &ba.npp);
    if (st.ok()) st = ParseIntList(ListArg(a, "ntg", "128"), "-ntg", 0, &ba.ntg);
    if (st.ok()) st = ParseIntList(ListArg(a, "npl", "1,2,4,8,16"), "-npl", 1, &ba.npl);
    if (!st.ok()) return Fail(st);
    ba.threads = threads;
    ba.n_batch = a.count("batch-size") ? n_batch : 2048;  // llama-batched-bench's default
    ba.pp_shared = a.count("pps") > 0;
    ba.json = format == "json";
    ba.warmup = warmup;
    ba.fixed_threads = a.count("fixed-threads") > 0;
    for (const std::string& path : paths) {
      std::unique_ptr<Model> model;
      st = Model::Load(path, ModelLoadOptions(), &model);
      if (!st.ok()) return Fail(st);
      model->WaitForHugePages();
      const int rc = RunBatchedBench(*model, path, ba);
      if (rc != kExitOk) return rc;
    }
    return kExitOk;
  }
  int max_tokens = 1;
  for (int v : prompts) max_tokens = std::max(max_tokens, v);
  for (int v : gens) max_tokens = std::max(max_tokens, v);
  const int max_depth = *std::max_element(depths.begin(), depths.end());

  // Bandwidth first, so its buffer is gone before any model is mapped.
  std::map<int, double> bw;
  if (membw) {
    std::unique_ptr<MemoryBandwidth> mem;
    st = NewProbe(membw_mib, &mem);
    if (!st.ok()) return Fail(st);
    for (int t : threads) {
      bw[t] = mem->Measure(t, 5);
      std::fprintf(stderr, "bench: memory read bandwidth, %d thread%s: %.1f GB/s (best of 5 over %d MiB, %s loads)\n", t,
                   t == 1 ? "" : "s", bw[t], membw_mib, mem->loop().c_str());
    }
  }

  const bool md = format == "md";
  if (md) PrintMarkdownHeader(membw);
  std::vector<std::unique_ptr<ModelInfo>> infos;
  std::vector<Row> rows;
  std::mt19937 rng(1234);
  for (const std::string& path : paths) {
    std::unique_ptr<Model> model;
    st = Model::Load(path, ModelLoadOptions(), &model);
    if (!st.ok()) return Fail(st);
    // Steady state: the weights' background move to huge pages (Model::WaitForHugePages) is done
    // before the first run, as it is a few seconds into any longer session.
    model->WaitForHugePages();
    infos.push_back(std::make_unique<ModelInfo>(Describe(*model, path)));
    const ModelInfo* info = infos.back().get();
    for (int t : threads) {
      ContextParams cp;
      cp.n_ctx = max_depth + max_tokens;
      cp.n_batch = n_batch;
      cp.n_threads = t;
      cp.fixed_threads = a.count("fixed-threads") > 0;
      std::unique_ptr<Context> ctx;
      st = Context::Create(*model, cp, &ctx);
      if (!st.ok()) return Fail(st);
      struct Test {
        int np, ng, depth;
      };
      std::vector<Test> tests;
      for (int d : depths) {
        for (int p : prompts) {
          if (p > 0) tests.push_back({p, 0, d});
        }
        for (int n : gens) {
          if (n > 0) tests.push_back({0, n, d});
        }
      }
      for (const auto& [np, ng, depth] : tests) {
        Row r;
        r.model = info;
        r.n_threads = t;
        r.n_prompt = np;
        r.n_gen = ng;
        r.n_depth = depth;
        r.n_batch = std::min(n_batch, max_tokens);
        r.membw_gbps = membw ? bw[t] : 0.0;
        r.time = NowIso();
        std::fprintf(stderr, "bench: %s, %d thread%s, %s x %d\n", info->desc.c_str(), t, t == 1 ? "" : "s",
                     r.test().c_str(), reps);
        // The depth's tokens, once: every run truncates back to them.
        if (depth > 0) {
          st = RunPrompt(*ctx, 0, RandomTokens(*model, depth, 0, rng));
          if (!st.ok()) return Fail(st);
        }
        // Warm-up as llama-bench: one batch of the prompt, or one generated token.
        if (warmup) {
          const auto w = RandomTokens(*model, np > 0 ? std::min(np, n_batch) : 1, depth, rng);
          st = np > 0 ? RunPrompt(*ctx, depth, w) : RunGen(*ctx, depth, w);
          if (!st.ok()) return Fail(st);
        }
        for (int i = 0; i < reps; ++i) {
          const auto tokens = RandomTokens(*model, np > 0 ? np : ng, depth, rng);
          if (membw && ng > 0) {
            // The probe again just before each decode run: this host's bandwidth drifts by tens of
            // percent between seconds, so the start-of-run figure alone can be far from the one
            // the test ran under. The buffer is freed before the run.
            std::unique_ptr<MemoryBandwidth> mem;
            st = NewProbe(membw_mib, &mem);
            if (!st.ok()) return Fail(st);
            r.membw_samples.push_back(mem->Measure(t, 2));
          }
          const auto t0 = Clock::now();
          st = np > 0 ? RunPrompt(*ctx, depth, tokens) : RunGen(*ctx, depth, tokens);
          if (!st.ok()) return Fail(st);
          r.samples_ns.push_back(std::chrono::duration<double, std::nano>(Clock::now() - t0).count());
        }
        if (!r.membw_samples.empty()) r.membw_gbps = Row::Mean(r.membw_samples);
        r.rss_mib = RssMib();
        if (md) PrintMarkdownRow(r, membw);
        rows.push_back(std::move(r));
      }
    }
  }
  if (md) {
    std::string footer = "\ntrine bench, " + NowIso() + ", " + std::to_string(omp_get_num_procs()) + " cores";
    if (membw) {
      footer += "; memory read bandwidth (" + std::to_string(membw_mib) + " MiB, best of 5, at the start):";
      for (const auto& [t, g] : bw) footer += " " + std::to_string(t) + (t == 1 ? " thread " : " threads ") + Cell("%.1f", g) + " GB/s";
      footer += "; % of membw: each tg run against a probe (best of 2) just before it";
    }
    std::printf("%s\n", footer.c_str());
    for (const auto& info : infos) {
      if (info->resident_bytes_per_token == info->bytes_per_token) continue;
      std::printf("%s: MiB/token counts the file's bytes (%.2f MiB); in memory a token reads %.2f MiB (weights repacked at load)\n",
                  info->path.c_str(), static_cast<double>(info->bytes_per_token) / (1 << 20),
                  static_cast<double>(info->resident_bytes_per_token) / (1 << 20));
    }
  } else {
    nlohmann::json out = nlohmann::json::array();
    for (const Row& r : rows) out.push_back(RowJson(r));
    std::printf("%s\n", out.dump(2).c_str());
  }
  return kExitOk;
}

}  // namespace trine::cli
