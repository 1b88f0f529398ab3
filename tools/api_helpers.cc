// C API helpers of the generate and chat subcommands.
#include "api_helpers.h"

#include <chrono>
#include <cstdio>

#include <unistd.h>

#include "model_options.h"

namespace trine::cli {

Status LastApiError() { return Status(StatusCode::kInvalidArgument, trine_last_error()); }

void InstallCliLogSink() {
  trine_log_set(
      [](trine_log_level level, const char* message, void*) {
        if (level == TRINE_LOG_WARN) std::fprintf(stderr, "warning: %s\n", message);
        if (level == TRINE_LOG_ERROR) std::fprintf(stderr, "error: %s\n", message);
      },
      nullptr);
}

Status LoadModelAndContextApi(const cxxopts::ParseResult& a, ApiModel* model, ApiContext* ctx, std::string* path,
                              double* load_ms, bool with_plan, std::string* plan_summary) {
  ContextParams cp;
  TRINE_RETURN_IF_ERROR(ParseContextParams(a, &cp));
  const auto t0 = std::chrono::steady_clock::now();
  *path = ResolveModelPath(a["model"].as<std::string>());
  auto to_c = [](KvType t) {
    switch (t) {
      case KvType::kF32:
        return TRINE_KV_F32;
      case KvType::kQ8_0:
        return TRINE_KV_Q8_0;
      case KvType::kQ4_0:
        return TRINE_KV_Q4_0;
      case KvType::kF16:
        break;
    }
    return TRINE_KV_F16;
  };
  trine_model_params mp = trine_model_default_params();
  mp.use_mmap = !a.count("no-mmap");
  PlanFlags pf;
  if (with_plan) {
    TRINE_RETURN_IF_ERROR(ParsePlanFlags(a, &pf));
    mp.mem_budget_bytes = pf.mem_budget;
    mp.plan_path = pf.plan_path.empty() ? nullptr : pf.plan_path.c_str();
    mp.auto_plan = pf.auto_plan;
    mp.no_plan_cache = pf.no_cache;
    mp.mlock = pf.mlock;
    mp.plan_n_ctx = cp.n_ctx;
    mp.plan_n_threads = cp.n_threads;
    // Plans budget one cache type: with -ctk and -ctv different, the wider of the two.
    KvType plan_kv = cp.kv_type;
    if (cp.kv_type_v && KvRowBytes(*cp.kv_type_v, 32) > KvRowBytes(plan_kv, 32)) {
      plan_kv = *cp.kv_type_v;
    }
    mp.plan_kv_type = to_c(plan_kv);
    if (pf.auto_plan && isatty(STDERR_FILENO) != 0) {
      // A profile at load takes seconds on big models: one updating line (load, then profile).
      mp.progress_callback = [](float f, void*) {
        std::fprintf(stderr, "\rload/profile: %3d%%", static_cast<int>(f * 100.0f + 0.5f));
        std::fflush(stderr);
        return true;
      };
    }
  }
  model->reset(trine_model_load(path->c_str(), &mp));
  if (mp.progress_callback != nullptr) std::fprintf(stderr, "\r%-24s\r", "");
  if (!*model) return LastApiError();
  if (plan_summary != nullptr) *plan_summary = trine_model_plan_summary(model->get());
  trine_context_params tcp = trine_context_default_params();
  tcp.n_ctx = cp.n_ctx;
  tcp.n_batch = cp.n_batch;
  tcp.n_threads = cp.n_threads;
  tcp.kv_type = to_c(cp.kv_type);
  tcp.kv_type_v = cp.kv_type_v ? to_c(*cp.kv_type_v) : TRINE_KV_SAME;
  ctx->reset(trine_context_create(model->get(), &tcp));  // warns when -c exceeds the training context
  if (!*ctx) return LastApiError();
  *load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return Status::Ok();
}

Status CreateSamplerApi(const SamplerParams& p, ApiSampler* out) {
  trine_sampler_params sp = trine_sampler_default_params();
  sp.temp = p.temp;
  sp.top_k = p.top_k;
  sp.top_p = p.top_p;
  sp.min_p = p.min_p;
  sp.repeat_penalty = p.repeat_penalty;
  sp.repeat_last_n = p.repeat_last_n;
  sp.seed = p.seed;
  sp.presence_penalty = p.presence_penalty;
  sp.frequency_penalty = p.frequency_penalty;
  out->reset(trine_sampler_create(&sp));
  return *out ? Status::Ok() : LastApiError();
}

Status TokenizeApi(const trine_model* model, const std::string& text, bool add_special, bool parse_special,
                   std::vector<trine_token>* out) {
  if (text.size() > static_cast<size_t>(INT32_MAX)) return InvalidArgument("the text is too long");
  const int32_t len = static_cast<int32_t>(text.size());
  out->assign(text.size() + 2, 0);  // enough in practice; the size query below covers the rest
  int32_t n = trine_tokenize(model, text.data(), len, out->data(), static_cast<int32_t>(out->size()), add_special,
                             parse_special);
  if (n < 0 && n != TRINE_SIZE_ERROR) {
    out->assign(static_cast<size_t>(-n), 0);
    n = trine_tokenize(model, text.data(), len, out->data(), -n, add_special, parse_special);
  }
  if (n < 0) return LastApiError();
  out->resize(static_cast<size_t>(n));
  return Status::Ok();
}

std::string TokenPieceApi(const trine_model* model, trine_token token) {
  char buf[64];
  const int32_t n = trine_token_to_piece(model, token, buf, sizeof(buf), false);
  if (n >= 0) return std::string(buf, static_cast<size_t>(n));
  if (n == TRINE_SIZE_ERROR) return "";
  std::string piece(static_cast<size_t>(-n), '\0');
  const int32_t m = trine_token_to_piece(model, token, piece.data(), -n, false);
  return m >= 0 ? piece : "";
}

double MsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

void PrintTimings(double load_ms, double prompt_ms, int n_prompt, double gen_ms, int n_gen, double total_ms,
                  int n_threads) {
  std::fprintf(stderr, "\ntrine: load time        = %10.2f ms\n", load_ms);
  if (n_prompt > 0) {
    std::fprintf(stderr,
                 "trine: prompt eval time = %10.2f ms / %5d tokens (%8.2f ms per token, %9.2f tokens per second)\n",
                 prompt_ms, n_prompt, prompt_ms / n_prompt, n_prompt * 1000.0 / prompt_ms);
  }
  if (n_gen > 0) {
    std::fprintf(stderr,
                 "trine:        eval time = %10.2f ms / %5d tokens (%8.2f ms per token, %9.2f tokens per second)\n",
                 gen_ms, n_gen, gen_ms / n_gen, n_gen * 1000.0 / gen_ms);
  }
  std::fprintf(stderr, "trine:       total time = %10.2f ms / %5d tokens, %d threads\n", total_ms, n_prompt + n_gen,
               n_threads);
}

}  // namespace trine::cli
