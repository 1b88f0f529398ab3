// Helpers of the subcommands that run a model through the C API (generate, chat): owning handles,
// loading a model and context from the shared model flags, params conversion, token text, and a
// log sink that prints the library's warnings the way the CLI always has ("warning: ...").
#pragma once

#include <cxxopts.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "sampler/sampler.h"
#include "trine/trine.h"

namespace trine::cli {

struct ApiDeleter {
  void operator()(trine_model* m) const { trine_model_free(m); }
  void operator()(trine_context* c) const { trine_context_free(c); }
  void operator()(trine_sampler* s) const { trine_sampler_free(s); }
};
using ApiModel = std::unique_ptr<trine_model, ApiDeleter>;
using ApiContext = std::unique_ptr<trine_context, ApiDeleter>;
using ApiSampler = std::unique_ptr<trine_sampler, ApiDeleter>;

// The calling thread's last C API error as a Status (for Fail()).
Status LastApiError();

// Routes library log messages to stderr as "warning: ..." / "error: ..."; info and debug dropped.
void InstallCliLogSink();

// As LoadModelAndContext (model_options.h), through the C API: reads -m, -c, -b, -t, --kv-type,
// --no-mmap, loads the model and creates a context; *load_ms receives the wall time.
// With `with_plan` the plan flags (AddPlanOptions) are read too; *plan_summary (may be null)
// receives trine_model_plan_summary ("" without a plan).
Status LoadModelAndContextApi(const cxxopts::ParseResult& args, ApiModel* model, ApiContext* ctx, std::string* path,
                              double* load_ms, bool with_plan = false, std::string* plan_summary = nullptr);

// A sampler with the parsed --temp/--top-k/... settings.
Status CreateSamplerApi(const SamplerParams& params, ApiSampler* out);

// trine_tokenize into a vector (sized by the library's "needed" answer).
Status TokenizeApi(const trine_model* model, const std::string& text, bool add_special, bool parse_special,
                   std::vector<trine_token>* out);
// trine_token_to_piece of a generated token (control tokens give "").
std::string TokenPieceApi(const trine_model* model, trine_token token);

// Milliseconds since t0 (steady clock): the timings of generate and chat.
double MsSince(std::chrono::steady_clock::time_point t0);

// llama.cpp's closing timings on stderr: load, prompt eval and eval (ms, tokens, ms per token,
// tokens per second; a line is left out when it has no tokens), total.
void PrintTimings(double load_ms, double prompt_ms, int n_prompt, double gen_ms, int n_gen, double total_ms,
                  int n_threads);

}  // namespace trine::cli
