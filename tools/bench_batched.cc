// llama-batched-bench's contract for trine: one context of pl sequences in a shared KV pool, the
// prompts of all of them in one batch, then one batch per generated token holding one token of each
// sequence, so every weight matrix is read once per step for all of them.
#include "bench_batched.h"

#include <nlohmann/json.hpp>

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <random>

#include "cli_common.h"
#include "kernels.h"
#include "runtime/context.h"

namespace trine::cli {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

struct Result {
  int pp = 0, tg = 0, pl = 0, n_kv = 0;
  double t_pp = 0, t_tg = 0;
  double speed_pp() const { return t_pp > 0 ? static_cast<double>(pl) * pp / t_pp : 0.0; }
  double speed_tg() const { return t_tg > 0 ? static_cast<double>(pl) * tg / t_tg : 0.0; }
  double t() const { return t_pp + t_tg; }
  double speed() const { return t() > 0 ? n_kv / t() : 0.0; }
};

// One (pp, tg, pl) measurement on an empty context.
Status Measure(Context& ctx, const Model& m, int pp, int tg, int pl, bool shared, std::mt19937& rng, Result* r) {
  for (int s = 0; s < ctx.n_seq_max(); ++s) ctx.SeqTruncate(s, 0);
  r->pp = pp;
  r->tg = tg;
  r->pl = pl;
  r->n_kv = shared ? pp + pl * tg : pl * (pp + tg);
  Batch b;
  auto t0 = Clock::now();
  if (pp > 0) {
    // The prompts: pl of them in one batch, or (shared) one in sequence 0 forked to the others.
    for (int s = 0; s < (shared ? 1 : pl); ++s) {
      const auto p = RandomTokens(m, pp, 0, rng);
      for (int i = 0; i < pp; ++i) b.Add(p[static_cast<size_t>(i)], -1, s, i == pp - 1);
    }
    TRINE_RETURN_IF_ERROR(ctx.Decode(b));
    if (shared) {
      for (int s = 1; s < pl; ++s) TRINE_RETURN_IF_ERROR(ctx.SeqFork(0, s, pp));
    }
  }
  r->t_pp = Seconds(t0);
  t0 = Clock::now();
  for (int i = 0; i < tg; ++i) {
    b.Clear();
    for (int s = 0; s < pl; ++s) b.Add(static_cast<int32_t>(rng() % static_cast<uint32_t>(m.config().n_vocab)), -1, s, true);
    TRINE_RETURN_IF_ERROR(ctx.Decode(b));
  }
  r->t_tg = Seconds(t0);
  return Status::Ok();
}

}  // namespace

int RunBatchedBench(const Model& model, const std::string& path, const BatchedBenchArgs& args) {
  const int max_pl = *std::max_element(args.npl.begin(), args.npl.end());
  int max_seq = 1, max_kv = 1;
  for (int pp : args.npp) {
    for (int tg : args.ntg) {
      max_seq = std::max(max_seq, pp + tg);
      for (int pl : args.npl) max_kv = std::max(max_kv, args.pp_shared ? pp + pl * tg : pl * (pp + tg));
    }
  }
  nlohmann::json rows = nlohmann::json::array();
  std::mt19937 rng(1234);
  for (int t : args.threads) {
    ContextParams cp;
    cp.n_ctx = max_seq;
    cp.n_seq_max = max_pl;
    // Room for every sequence's partly filled last block on top of the positions themselves.
    cp.kv_pool = max_kv + max_pl * kKvBlockPositions;
    cp.n_batch = args.n_batch;
    cp.n_threads = t;
    cp.fixed_threads = args.fixed_threads;
    std::unique_ptr<Context> ctx;
    Status st = Context::Create(model, cp, &ctx);
    if (!st.ok()) return Fail(st);
    if (args.warmup) {
      Result w;
      st = Measure(*ctx, model, std::min(16, max_seq - 1), 1, 1, false, rng, &w);
      if (!st.ok()) return Fail(st);
    }
    if (!args.json) {
      std::printf("\n%s: n_kv_max = %d, n_batch = %d, is_pp_shared = %d, n_threads = %d, isa = %s\n\n", path.c_str(),
                  cp.kv_pool, args.n_batch, args.pp_shared ? 1 : 0, t, kernels::IsaName(model.isa()));
      std::printf("|%6s | %6s | %4s | %6s | %8s | %8s | %8s | %8s | %8s | %8s |\n", "PP", "TG", "B", "N_KV", "T_PP s",
                  "S_PP t/s", "T_TG s", "S_TG t/s", "T s", "S t/s");
      std::printf("|%6s-|-%6s-|-%4s-|-%6s-|-%8s-|-%8s-|-%8s-|-%8s-|-%8s-|-%8s-|\n", "------", "------", "----",
                  "------", "--------", "--------", "--------", "--------", "--------", "--------");
      std::fflush(stdout);
    }
    for (int pp : args.npp) {
      for (int tg : args.ntg) {
        for (int pl : args.npl) {
          std::fprintf(stderr, "bench: %d thread%s, pp %d, tg %d, %d sequence%s\n", t, t == 1 ? "" : "s", pp, tg, pl,
                       pl == 1 ? "" : "s");
          Result r;
          st = Measure(*ctx, model, pp, tg, pl, args.pp_shared, rng, &r);
          if (!st.ok()) return Fail(st);
          if (args.json) {
            rows.push_back({{"model_filename", path}, {"n_kv_max", cp.kv_pool}, {"n_batch", args.n_batch},
                            {"is_pp_shared", args.pp_shared ? 1 : 0}, {"n_threads", t}, {"pp", r.pp}, {"tg", r.tg},
                            {"pl", r.pl}, {"n_kv", r.n_kv}, {"t_pp", r.t_pp}, {"speed_pp", r.speed_pp()},
                            {"t_tg", r.t_tg}, {"speed_tg", r.speed_tg()}, {"t", r.t()}, {"speed", r.speed()},
                            {"isa", kernels::IsaName(model.isa())}});
          } else {
            std::printf("|%6d | %6d | %4d | %6d | %8.3f | %8.2f | %8.3f | %8.2f | %8.3f | %8.2f |\n", r.pp, r.tg, r.pl,
                        r.n_kv, r.t_pp, r.speed_pp(), r.t_tg, r.speed_tg(), r.t(), r.speed());
            std::fflush(stdout);
          }
        }
      }
    }
  }
  if (args.json) std::printf("%s\n", rows.dump(2).c_str());
  return kExitOk;
}

}  // namespace trine::cli
