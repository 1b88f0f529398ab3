// `trine generate`: text generation from a prompt, streaming tokens as they are made, with
// llama.cpp-style timings at the end (or one JSON object with --json). Runs the model through the
// C API (include/trine/trine.h), as an embedding application would.
#include <cxxopts.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>

#include "api_helpers.h"
#include "core/page_memory.h"
#include "cli_args.h"
#include "cli_common.h"
#include "commands.h"
#include "model_options.h"
#include "trine/trine.h"

namespace trine::cli {
namespace {

using Clock = std::chrono::steady_clock;

void PrintTopLogits(nlohmann::json* out, const float* logits, int n_vocab, int k) {
  nlohmann::json step = nlohmann::json::array();
  for (int id : TopKLowestId(logits, n_vocab, k)) step.push_back({id, logits[id]});
  out->push_back(step);
}

}  // namespace

int RunGenerate(int argc, char** argv) {
  cxxopts::Options opts("trine generate", "Generate text from a prompt.");
  AddModelOptions(opts);
  AddPlanOptions(opts);
  AddSamplingOptions(opts);
  opts.add_options("generation")("p,prompt", "prompt text", cxxopts::value<std::string>())(
      "f,file", "read the prompt from a file", cxxopts::value<std::string>())(
      "n,n-predict", "tokens to generate (-1 = until end of text or context full)",
      cxxopts::value<int>()->default_value("128"))(
      "no-bos", "do not add the BOS token")("ignore-eos", "keep generating after end-of-text tokens")(
      "e,escape", "process escapes (\\n \\t \\\\ ...) in -p, as llama.cpp does (the default)")(
      "no-escape", "take -p literally")(
      "r,reverse-prompt", "stop once the output contains TEXT (llama.cpp's -r)", cxxopts::value<std::vector<std::string>>())(
      "json", "print one JSON object (ids, text, timings) instead of streaming")(
      "top-logits", "with --json: the K best (id, logit) pairs of each step", cxxopts::value<int>()->default_value("0"))(
      "h,help", "show this help");
  cxxopts::ParseResult a;
  if (const int rc = ParseCommand("generate", opts, argc, argv, &a); rc >= 0) return rc;
  if (a.count("prompt") && a.count("file")) return UsageError("generate", "give either -p or -f, not both");

  const int n_predict = a["n-predict"].as<int>();
  if (n_predict < -1) return Fail("-n must be -1 (unlimited) or >= 0, got " + std::to_string(n_predict));
  const int top_logits = a["top-logits"].as<int>();
  if (top_logits < 0) return Fail("--top-logits must be >= 0");
  SamplerParams sp;
  Status st = ParseSamplerParams(a, &sp);
  if (!st.ok()) return Fail(st);

  std::string prompt;
  if (a.count("prompt")) {
    prompt = a["prompt"].as<std::string>();
    if (!a.count("no-escape")) prompt = ProcessEscapes(prompt);
  }
  std::vector<std::string> reverse;
  if (a.count("reverse-prompt")) reverse = a["reverse-prompt"].as<std::vector<std::string>>();
  for (const std::string& r : reverse) {
    if (r.empty()) return UsageError("generate", "-r needs a non-empty TEXT");
  }
  if (a.count("file")) {
    st = ReadTextFile(a["file"].as<std::string>(), &prompt);
    if (!st.ok()) return Fail(st);
  }

  InstallCliLogSink();
  const auto t_load0 = Clock::now();
  ApiModel model;
  ApiContext ctx;
  std::string path;
  double load_ms = 0.0;
  std::string plan_summary;
  st = LoadModelAndContextApi(a, &model, &ctx, &path, &load_ms, true, &plan_summary);
  if (!st.ok()) return Fail(st);
  const bool json = a.count("json") > 0;
  if (!json && !plan_summary.empty()) std::fprintf(stderr, "%s\n", plan_summary.c_str());
  const int n_ctx = trine_context_n_ctx(ctx.get());
  const int n_vocab = trine_model_n_vocab(model.get());

  std::vector<trine_token> ids;
  st = TokenizeApi(model.get(), prompt, !a.count("no-bos"), false, &ids);
  if (!st.ok()) return Fail(st);
  if (ids.empty()) return Fail("the prompt is empty (give -p TEXT, or drop --no-bos)");
  if (static_cast<int>(ids.size()) > n_ctx) {
    return Fail("the prompt is " + std::to_string(ids.size()) + " tokens, longer than the context of " +
                std::to_string(n_ctx) + " (use -c)");
  }
  const bool ignore_eos = a.count("ignore-eos") > 0;
  ApiSampler sampler;
  st = CreateSamplerApi(sp, &sampler);
  if (!st.ok()) return Fail(st);
  for (trine_token id : ids) trine_sampler_accept(sampler.get(), id);

  if (!json) {
    std::fputs(prompt.c_str(), stdout);
    std::fflush(stdout);
  }
  const auto t_prompt0 = Clock::now();
  if (trine_context_decode(ctx.get(), ids.data(), static_cast<int32_t>(ids.size()), false) != TRINE_OK) {
    return Fail(LastApiError());
  }
  const double prompt_ms = MsSince(t_prompt0);

  nlohmann::json top = nlohmann::json::array();
  std::vector<trine_token> out;
  std::string text;
  const auto t_gen0 = Clock::now();
  const int budget = n_predict < 0 ? n_ctx - trine_context_n_past(ctx.get()) : n_predict;
  for (int i = 0; i < budget; ++i) {
    if (top_logits > 0) PrintTopLogits(&top, trine_context_get_logits(ctx.get(), 0), n_vocab, top_logits);
    const trine_token next = trine_sampler_sample(sampler.get(), ctx.get(), 0);
    if (next < 0) return Fail(LastApiError());
    if (!ignore_eos && trine_model_token_is_eog(model.get(), next)) break;
    out.push_back(next);
    trine_sampler_accept(sampler.get(), next);
    const std::string piece = TokenPieceApi(model.get(), next);
    text += piece;
    if (!json) {
      std::fputs(piece.c_str(), stdout);
      std::fflush(stdout);
    }
    if (i + 1 == budget) break;
    if (trine_context_n_past(ctx.get()) >= n_ctx) break;  // context full
    // Only an occurrence that ends in this piece is new (the text before it was searched already).
    bool reversed = false;
    for (const std::string& r : reverse) {
      const size_t from = text.size() > piece.size() + r.size() ? text.size() - piece.size() - r.size() : 0;
      reversed = reversed || text.find(r, from) != std::string::npos;
    }
    if (reversed) break;
    if (trine_context_decode(ctx.get(), &next, 1, false) != TRINE_OK) return Fail(LastApiError());
  }
  const double gen_ms = MsSince(t_gen0);
  const double n_prompt = static_cast<double>(ids.size());
  const double n_gen = static_cast<double>(out.size());

  if (json) {
    nlohmann::json j;
    j["model"] = path;
    j["prompt"] = prompt;
    j["prompt_ids"] = ids;
    j["generated_ids"] = out;
    j["text"] = text;
    j["seed"] = sp.seed;
    j["timings"] = {{"load_ms", load_ms},
                    {"prompt_tokens", ids.size()},
                    {"prompt_ms", prompt_ms},
                    {"prompt_tok_per_s", prompt_ms > 0 ? n_prompt * 1000.0 / prompt_ms : 0.0},
                    {"generated_tokens", out.size()},
                    {"generation_ms", gen_ms},
                    {"generation_tok_per_s", gen_ms > 0 ? n_gen * 1000.0 / gen_ms : 0.0},
                    {"peak_rss_bytes", ProcessPeakRssBytes()}};  // VmHWM
    if (top_logits > 0) j["top_logits"] = top;
    if (!plan_summary.empty()) j["plan"] = plan_summary;
    std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return kExitOk;
  }
  std::printf("\n");
  PrintTimings(load_ms, prompt_ms, static_cast<int>(ids.size()), gen_ms, static_cast<int>(out.size()), MsSince(t_load0),
               trine_context_n_threads(ctx.get()));
  return kExitOk;
}

}  // namespace trine::cli
