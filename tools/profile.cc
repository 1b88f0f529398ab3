// `trine profile -m FILE`: measures per-layer sensitivity to int8 activations (KL vs an all-fp32
// baseline, beside MCAP's activation-norm score) and per-layer time, plans precisions and placements
// under --max-kl and --mem-budget, and caches the plan by the model's content hash.
#include <cxxopts.hpp>

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "cli_args.h"
#include "cli_common.h"
#include "core/page_memory.h"
#include "commands.h"
#include "model_options.h"
#include "profiler/plan.h"
#include "profiler/plan_load.h"
#include "profiler/profiler.h"
#include "profiler/report.h"
#include "tokenizer/tokenizer.h"

namespace trine::cli {
namespace {

using Clock = std::chrono::steady_clock;
using profiler::Plan;

double Since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

uint64_t ParseBytes(const std::string& s) { return profiler::ParseMemBudget(s); }

// Perplexity of the model as it is now over the first `windows` windows of n_ctx tokens
// (llama.cpp's protocol: second half of each window scored).
Status WindowPerplexity(const Model& model, const std::vector<TokenId>& tokens, int n_ctx, int windows, int n_threads,
                        KvType kv_type, double* ppl) {
  ContextParams p;
  p.kv_type = kv_type;
  p.n_ctx = n_ctx;
  p.n_batch = n_ctx;
  p.n_threads = n_threads;
  std::unique_ptr<Context> ctx;
  TRINE_RETURN_IF_ERROR(Context::Create(model, p, &ctx));
  const int V = model.config().n_vocab;
  double nll = 0;
  long count = 0;
  for (int w = 0; (windows <= 0 || w < windows) && static_cast<size_t>((w + 1) * n_ctx) <= tokens.size(); ++w) {
    std::vector<int32_t> ids(tokens.begin() + w * n_ctx, tokens.begin() + (w + 1) * n_ctx);
    if (model.vocab().add_bos() && model.vocab().bos() >= 0) ids[0] = model.vocab().bos();
    ctx->Truncate(0);
    TRINE_RETURN_IF_ERROR(ctx->Decode(ids.data(), n_ctx, true));
    for (int i = n_ctx / 2; i < n_ctx - 1; ++i) {
      const float* lg = ctx->logits(i);
      double mx = lg[0];
      for (int v = 1; v < V; ++v) mx = std::max(mx, static_cast<double>(lg[v]));
      double sum = 0;
      for (int v = 0; v < V; ++v) sum += std::exp(static_cast<double>(lg[v]) - mx);
      nll -= static_cast<double>(lg[ids[static_cast<size_t>(i) + 1]]) - mx - std::log(sum);
      ++count;
    }
  }
  if (count == 0) return InvalidArgument("the --ppl-text is too short for one window of " + std::to_string(n_ctx) + " tokens");
  *ppl = std::exp(nll / static_cast<double>(count));
  return Status::Ok();
}

}  // namespace

int RunProfile(int argc, char** argv) {
  cxxopts::Options opts("trine profile",
                        "Profile per-layer sensitivity and speed, plan activation precision and memory placement.");
  AddModelOptions(opts, 0, 512);
  opts.add_options()("n,samples", "Monte Carlo samples", cxxopts::value<int>()->default_value("8"))(
      "seed", "sample seed", cxxopts::value<uint64_t>()->default_value("1"))(
      "max-kl", "quality budget: total predicted KL of the plan", cxxopts::value<double>()->default_value("0.01"))(
      "mem-budget", "memory budget: bytes (K/M/G suffixes) or N% of RAM (default: available RAM)",
      cxxopts::value<std::string>()->default_value(""))("report", "write report.json and report.html to DIR",
                                                        cxxopts::value<std::string>())(
      "plan-out", "also write the plan to FILE", cxxopts::value<std::string>())(
      "plan", "use this plan file instead of profiling (checked against the model)", cxxopts::value<std::string>())(
      "no-cache", "profile even when a cached plan matches (and refresh the cache)")(
      "ppl-text", "with --report: perplexity of the plan and of all-fp32 on the first windows of this text",
      cxxopts::value<std::string>())("mlock", "try to mlock resident layers when applying the plan")(
      "uniform", "no profiling: a uniform plan, a8 (quantized activations everywhere) or a16 (fp32 activations), "
      "with the head of --head-type and the cache of --kv-type", cxxopts::value<std::string>())(
      "no-baseline", "with --report: skip the all-fp32 reference measurements (speed, perplexity)")(
      "ppl-ctx", "with --ppl-text: window size in tokens", cxxopts::value<int>()->default_value("128"))(
      "ppl-windows", "with --ppl-text: windows scored (0 = the whole text)", cxxopts::value<int>()->default_value("4"))(
      "head-type", "output head weight type: auto (the planner picks among the file's, f16, q8_0, q6_k, q4_0), "
      "file, or one type", cxxopts::value<std::string>()->default_value("auto"))(
      "json", "print the plan as JSON on stdout (no progress)")("q,quiet", "no progress")("h,help", "show this help");
  cxxopts::ParseResult a;
  if (const int rc = ParseCommand("profile", opts, argc, argv, &a); rc >= 0) return rc;
  const int samples = a["samples"].as<int>();
  if (samples < 2 || samples > 256) return Fail("-n must be in [2, 256]");
  const double max_kl = a["max-kl"].as<double>();
  if (!(max_kl >= 0) || !std::isfinite(max_kl)) return Fail("--max-kl must be >= 0");
  uint64_t budget = 0;  // default: available RAM (keyed as 0 so the cache survives its drift)
  if (!a["mem-budget"].as<std::string>().empty()) {
    budget = ParseBytes(a["mem-budget"].as<std::string>());
    if (budget == 0) {
      return Fail("--mem-budget must be bytes (optionally K/M/G) or a percentage, got '" +
                                       a["mem-budget"].as<std::string>() + "'");
    }
  }
  const bool json_out = a.count("json") > 0;
  const bool show_progress = !json_out && !a.count("quiet");
  ContextParams cp;
  Status st = ParseContextParams(a, &cp);
  if (!st.ok()) return Fail(st);

  const auto t_start = Clock::now();
  const std::string path = ResolveModelPath(a["model"].as<std::string>());
  ModelLoadOptions lo;
  lo.use_mmap = !a.count("no-mmap");
  uint64_t runtime = 0;  // the process's memory before any weight, planned in (memory.runtime)
  lo.placement_hook = [&runtime](const GgufFile&, const ModelConfig&, std::vector<Placement>*) {
    runtime = ProcessRssBytes();
    return Status::Ok();
  };
  std::unique_ptr<Model> model;
  st = Model::Load(path, lo, &model);
  if (!st.ok()) return Fail(st);
  const double load_s = Since(t_start);
  const auto t_hash = Clock::now();
  const std::string hash = profiler::ModelContentHash(model->file(), /*release_pages=*/true);
  const double hash_s = Since(t_hash);
  profiler::PlanKey key;
  key.mem_budget = budget;
  key.max_kl = max_kl;
  key.samples = samples;
  key.seed = a["seed"].as<uint64_t>();
  key.n_ctx = cp.n_ctx > 0 ? cp.n_ctx : std::min(model->config().n_ctx_train, 4096);
  // KV cache: a type given with --kv-type / -ctk / -ctv is kept; otherwise the planner picks.
  if (cp.kv_type_v) return UsageError("profile", "plans use one KV cache type for K and V (-ctk and -ctv differ)");
  const bool kv_given = a.count("kv-type") || a.count("cache-type-k") || a.count("cache-type-v");
  key.kv_type = kv_given ? KvTypeName(cp.kv_type) : "auto";
  key.output_type = a["head-type"].as<std::string>();
  {
    TypeId t;
    if (key.output_type != "auto" && key.output_type != "file" && !ParseTypeName(key.output_type, &t)) {
      return Fail("--head-type must be auto, file or a type name, got '" + key.output_type + "'");
    }
  }
  const std::string isa = profiler::MachineIsa();
  const uint64_t ram = profiler::MachineRamBytes();

  profiler::ProfileOptions po;
  po.samples = samples;
  po.seed = key.seed;
  po.n_threads = cp.n_threads;
  po.kv_type = cp.kv_type;
  if (show_progress) {
    // One updating line on a terminal; one line per stage otherwise (logs, pipes).
    const bool tty = isatty(STDERR_FILENO) != 0;
    po.progress = [tty](float f, const std::string& stage) {
      const int pct = static_cast<int>(f * 100.0f + 0.5f);
      if (tty) {
        std::fprintf(stderr, "\rprofile: %3d%% %-48s", pct, stage.c_str());
        if (f >= 1.0f) std::fprintf(stderr, "\n");
      } else {
        std::fprintf(stderr, "profile: %3d%% %s\n", pct, stage.c_str());
      }
      std::fflush(stderr);
      return true;
    };
  }

  Plan plan;
  std::string source;
  const std::string cache_path = profiler::PlanCachePath(hash);
  if (a.count("uniform")) {
    const std::string u = a["uniform"].as<std::string>();
    if (u != "a8" && u != "a16") return Fail("--uniform must be a8 or a16, got '" + u + "'");
    TypeId head = TypeId::kCount;
    if (key.output_type != "auto" && key.output_type != "file") (void)ParseTypeName(key.output_type, &head);
    profiler::SetPlanIdentity(path, hash, model->file().file_size(), isa, ram, key, &plan);
    plan.key.kv_type = KvTypeName(cp.kv_type);
    st = profiler::UniformPlan(model.get(), u == "a8", head, cp.kv_type, &plan);
    if (!st.ok()) return Fail(st);
    profiler::ProfileOptions mo = po;
    mo.kv_type = KvType::kF16;  // against the profile's baseline: fp32 activations, file head, F16 cache
    st = profiler::MeasurePlanKl(model.get(), mo, plan, &plan.kl_plan);
    if (!st.ok()) return Fail(st);
    source = "uniform plan " + u + " (not profiled, not cached)";
  } else if (a.count("plan")) {
    const std::string plan_path = a["plan"].as<std::string>();
    st = profiler::ReadPlanFile(plan_path, &plan);
    if (!st.ok()) return Fail(st);
    if (plan.model_hash != hash) {
      return Fail(plan_path + ": the plan is for another model (hash " + plan.model_hash + "), this model's hash is " +
                  hash);
    }
    source = "plan file " + plan_path;
  } else {
    bool hit = false;
    const auto t_lookup = Clock::now();
    if (!a.count("no-cache") && access(cache_path.c_str(), F_OK) == 0) {
      Plan cached;
      st = profiler::ReadPlanFile(cache_path, &cached);
      if (st.ok() && profiler::PlanKeyMatches(cached, hash, isa, ram, key)) {
        plan = cached;
        hit = true;
      } else if (!st.ok() && show_progress) {
        std::fprintf(stderr, "warning: ignoring the cached plan: %s\n", st.message().c_str());
      }
    }
    if (hit) {
      char took[32];
      std::snprintf(took, sizeof(took), "%.4f", Since(t_lookup));
      source = "plan cache " + cache_path + " (looked up in " + took + " s)";
    } else {
      profiler::SetPlanIdentity(path, hash, model->file().file_size(), isa, ram, key, &plan);
      plan.memory.runtime = runtime;
      st = profiler::ProfileModel(model.get(), po, &plan);
      if (!st.ok()) return Fail(st);
      st = profiler::WritePlanFile(plan, cache_path);
      if (!st.ok() && show_progress) std::fprintf(stderr, "warning: plan not cached: %s\n", st.message().c_str());
      source = "profiled in " + std::to_string(plan.profile_seconds).substr(0, 5) + " s, cached at " + cache_path;
    }
  }
  std::string summary;
  const auto t_apply = Clock::now();
  st = profiler::ApplyPlan(plan, model.get(), a.count("mlock") > 0, &summary);
  if (!st.ok()) return Fail(st);
  const double apply_s = Since(t_apply);
  const double plan_s = Since(t_start);
  if (a.count("plan-out")) {
    st = profiler::WritePlanFile(plan, a["plan-out"].as<std::string>());
    if (!st.ok()) return Fail(st);
  }
  if (a.count("report")) {
    // Measured speed of the plan as applied, and of all fp32, with short decodes.
    const KvType plan_kv = profiler::PlanKvType(plan);
    // The best of 3 runs of 64 single-token decodes (noise from other processes is one-sided), a
    // progress line per run (a run of a large model takes seconds).
    auto best_tok_s = [&](const char* what, KvType kv, double* out, double* cpu_out) {
      *out = 0;
      if (cpu_out != nullptr) *cpu_out = 0;
      for (int rep = 0; rep < 3; ++rep) {
        double t = 0, c = 0;
        TRINE_RETURN_IF_ERROR(profiler::MeasureDecodeSpeed(*model, cp.n_threads, kv, 64, &t, &c));
        *out = std::max(*out, t);
        if (cpu_out != nullptr) *cpu_out = std::max(*cpu_out, c);
        if (show_progress) std::fprintf(stderr, "report: decode speed of %s, run %d/3: %.1f tok/s\n", what, rep + 1, t);
      }
      return Status::Ok();
    };
    st = best_tok_s("the plan", plan_kv, &plan.measured_tok_s, &plan.measured_tok_s_cpu);
    if (!st.ok()) return Fail(st);
    // All int8, then all fp32 (the profile's baseline): the file's head and the profile's KV type
    // for both, every unit's activations in one precision.
    const KvType base_kv = plan.key.kv_type == "f32" ? KvType::kF32 : KvType::kF16;
    st = model->SetOutputType(model->output_file_type());
    if (!st.ok()) return Fail(st);
    const auto all_units_f32 = [&](bool f32) {
      for (const auto& u : plan.units) {
        for (const auto& t : u.tensors) (void)model->SetF32Activations(t, f32);
      }
    };
    all_units_f32(false);
    st = best_tok_s("all int8", base_kv, &plan.measured_tok_s_int8, nullptr);
    if (!st.ok()) return Fail(st);
    all_units_f32(true);
    const bool baseline = a.count("no-baseline") == 0;
    plan.measured_tok_s_fp32 = -1;
    if (baseline) {
      st = best_tok_s("all fp32", base_kv, &plan.measured_tok_s_fp32, nullptr);
      if (!st.ok()) return Fail(st);
    }
    if (a.count("ppl-text")) {
      std::string text;
      st = ReadTextFile(a["ppl-text"].as<std::string>(), &text);
      if (!st.ok()) return Fail(st);
      std::unique_ptr<Tokenizer> tok;
      st = Tokenizer::Create(model->shared_vocab(), &tok);
      if (!st.ok()) return Fail(st);
      std::vector<TokenId> ids;
      st = tok->Tokenize(text, true, false, &ids);
      if (!st.ok()) return Fail(st);
      const int n_ctx = std::min(a["ppl-ctx"].as<int>(), model->config().n_ctx_train);
      const int windows = a["ppl-windows"].as<int>();
      if (n_ctx < 4) return Fail("--ppl-ctx must be >= 4");
      if (baseline) {
        if (show_progress) std::fprintf(stderr, "report: perplexity of all fp32 (%d windows of %d)\n", windows, n_ctx);
        st = WindowPerplexity(*model, ids, n_ctx, windows, cp.n_threads, base_kv, &plan.ppl_fp32);
        if (!st.ok()) return Fail(st);
      }
      st = profiler::ApplyPlan(plan, model.get(), false, nullptr);
      if (!st.ok()) return Fail(st);
      if (show_progress) std::fprintf(stderr, "report: perplexity of the plan (%d windows of %d)\n", windows, n_ctx);
      st = WindowPerplexity(*model, ids, n_ctx, windows, cp.n_threads, plan_kv, &plan.ppl_plan);
      if (!st.ok()) return Fail(st);
    }
    st = profiler::ApplyPlan(plan, model.get(), false, nullptr);
    if (!st.ok()) return Fail(st);
    st = profiler::WriteReport(plan, a["report"].as<std::string>());
    if (!st.ok()) return Fail(st);
  }
  if (json_out) {
    std::printf("%s\n", profiler::PlanToJson(plan).dump(2).c_str());
    return kExitOk;
  }
  std::printf("%s", profiler::TerminalTable(plan).c_str());
  std::printf("plan: %s; model hash %s; %s; ready in %.3f s (model load %.3f s, content hash %.3f s, plan applied in %.3f s)\n",
              source.c_str(), hash.c_str(), summary.c_str(), plan_s, load_s, hash_s, apply_s);
  if (a.count("report")) std::printf("report: %s/report.html\n", a["report"].as<std::string>().c_str());
  return kExitOk;
}

}  // namespace trine::cli
