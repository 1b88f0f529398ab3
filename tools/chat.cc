// `trine chat`: interactive multi-turn chat with the model's template (its Jinja
// tokenizer.chat_template, or --chat-template / --chat-template-file). The conversation lives in
// the KV cache; each turn evaluates only what the cache does not already hold. Input has line editing and history on a
// terminal (line_reader.h); a turn may span lines ('\' at a line's end, or a """ block); /clear
// starts over, /exit quits. Ctrl-C stops the current reply (or quits at the prompt), Ctrl-D quits;
// the timings print on the way out. Runs the model through the C API (include/trine/trine.h).
#include <cxxopts.hpp>

#include <signal.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <cstdio>
#include <iostream>
#include <optional>

#include "api_helpers.h"
#include "cli_args.h"
#include "cli_common.h"
#include "commands.h"
#include "line_reader.h"
#include "model_options.h"
#include "trine/trine.h"

namespace trine::cli {
namespace {

std::atomic<bool> g_interrupted{false};

void OnSigint(int) { g_interrupted.store(true); }

using Clock = std::chrono::steady_clock;

// Tokens evaluated and the time they took, for the timings at exit.
struct Timings {
  double prompt_ms = 0, gen_ms = 0;
  int n_prompt = 0, n_gen = 0;
};

// The conversation in the KV cache as tokens. Each turn renders the whole conversation, keeps the
// longest prefix the cache already holds and evaluates the rest: a template may render earlier
// turns differently once the conversation grows (some drop a reply's reasoning), and a reply
// tokenized from its text may differ from the tokens that were sampled.
Status Sync(trine_context* ctx, const trine_model* model, const std::string& text, std::vector<trine_token>* cached,
            trine_sampler* sampler, Timings* timings) {
  const auto t0 = Clock::now();
  std::vector<trine_token> ids;
  TRINE_RETURN_IF_ERROR(TokenizeApi(model, text, false, true, &ids));
  // Templates that write the BOS text themselves get no second one.
  const trine_token bos = trine_model_token_bos(model);
  if (trine_model_add_bos(model) && bos >= 0 && (ids.empty() || ids[0] != bos)) ids.insert(ids.begin(), bos);
  if (ids.empty()) return Status::Ok();
  const int n_ctx = trine_context_n_ctx(ctx);
  if (static_cast<int>(ids.size()) > n_ctx) {
    return InvalidArgument("the conversation no longer fits in the context of " + std::to_string(n_ctx) +
                           " tokens (start again with a larger -c)");
  }
  size_t keep = 0;
  while (keep < cached->size() && keep < ids.size() && (*cached)[keep] == ids[keep]) ++keep;
  if (keep == ids.size()) --keep;  // evaluate at least the last token: its logits start the reply
  if (keep < cached->size()) {
    if (trine_context_kv_trim(ctx, static_cast<int32_t>(keep)) != TRINE_OK) return LastApiError();
  }
  for (size_t k = keep; k < ids.size(); ++k) trine_sampler_accept(sampler, ids[k]);
  if (trine_context_decode(ctx, ids.data() + keep, static_cast<int32_t>(ids.size() - keep), false) != TRINE_OK) {
    return LastApiError();
  }
  timings->prompt_ms += MsSince(t0);
  timings->n_prompt += static_cast<int>(ids.size() - keep);
  *cached = std::move(ids);
  return Status::Ok();
}

// The conversation rendered by the template; with `add_assistant` the assistant's turn is opened.
Status Render(const trine_model* model, const char* tmpl, const std::vector<trine_chat_message>& msgs,
              bool add_assistant, std::string* out) {
  out->assign(256, '\0');
  int32_t n = trine_chat_apply_template(model, tmpl, msgs.data(), msgs.size(), add_assistant, out->data(),
                                        static_cast<int32_t>(out->size()));
  if (n < 0 && n != TRINE_SIZE_ERROR) {
    out->assign(static_cast<size_t>(-n), '\0');
    n = trine_chat_apply_template(model, tmpl, msgs.data(), msgs.size(), add_assistant, out->data(), -n);
  }
  if (n < 0) return LastApiError();
  out->resize(static_cast<size_t>(n));
  return Status::Ok();
}

}  // namespace

int RunChat(int argc, char** argv) {
  cxxopts::Options opts("trine chat", "Interactive chat using the model's chat template.");
  AddModelOptions(opts);
  AddPlanOptions(opts);
  AddSamplingOptions(opts);
  AddChatTemplateOptions(opts);
  opts.add_options("chat")("sys,system-prompt", "system prompt (-sys as in llama.cpp)",
                           cxxopts::value<std::string>()->default_value(""))(
      "n,n-predict", "maximum tokens per reply", cxxopts::value<int>()->default_value("512"))(
      "h,help", "show this help");
  cxxopts::ParseResult a;
  if (const int rc = ParseCommand("chat", opts, argc, argv, &a); rc >= 0) return rc;
  const int n_predict = a["n-predict"].as<int>();
  if (n_predict <= 0) return Fail("-n must be positive, got " + std::to_string(n_predict));
  SamplerParams sp;
  Status st = ParseSamplerParams(a, &sp);
  if (!st.ok()) return Fail(st);
  // A forced template (a built-in's name or a Jinja template's text), else the model's own.
  std::optional<std::string> forced;
  st = ParseChatTemplateOption(a, &forced);
  if (!st.ok()) return Fail(st);
  const char* tmpl = forced ? forced->c_str() : nullptr;

  InstallCliLogSink();
  ApiModel model;
  ApiContext ctx;
  std::string path;
  double load_ms = 0.0;
  std::string plan_summary;
  st = LoadModelAndContextApi(a, &model, &ctx, &path, &load_ms, true, &plan_summary);
  if (!st.ok()) return Fail(st);
  if (!plan_summary.empty()) std::fprintf(stderr, "%s\n", plan_summary.c_str());
  const char* tmpl_name = trine_chat_template_name(model.get(), tmpl);
  if (tmpl_name == nullptr) return Fail(LastApiError());
  std::vector<trine_token> probe;  // the tokenizer must exist before the first turn
  st = TokenizeApi(model.get(), "", false, false, &probe);
  if (!st.ok()) return Fail(st);
  const int n_ctx = trine_context_n_ctx(ctx.get());
  ApiSampler sampler;
  st = CreateSamplerApi(sp, &sampler);
  if (!st.ok()) return Fail(st);

  struct sigaction sa = {};
  sa.sa_handler = OnSigint;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);  // no SA_RESTART: a blocked read returns on Ctrl-C

  std::fprintf(stderr,
               "trine chat: %s, template %s, context %d. End a line with \\ or wrap lines in \"\"\" for more "
               "than one line; /clear starts over, /exit quits. Ctrl-C stops a reply, Ctrl-D quits.\n",
               path.c_str(), tmpl_name, n_ctx);
  // Message texts live in `texts` (a deque keeps them in place); `messages` points into it.
  std::deque<std::string> texts;
  std::vector<trine_chat_message> messages;
  const std::string system = a["system-prompt"].as<std::string>();
  const auto start_over = [&] {
    texts.clear();
    messages.clear();
    if (!system.empty()) messages.push_back({"system", texts.emplace_back(system).c_str()});
  };
  start_over();
  std::vector<trine_token> cached;  // what the KV cache holds
  Timings timings;
  const auto t_start = Clock::now();
  LineReader reader;
  std::string line;
  while (true) {
    if (!reader.interactive()) std::printf("\n");
    g_interrupted.store(false);
    if (!reader.ReadTurn(reader.interactive() ? "\n> " : "> ", &line)) break;  // Ctrl-D, end of input, Ctrl-C
    if (line.empty()) continue;
    if (line == "/exit" || line == "/quit") break;
    if (line == "/clear") {
      if (trine_context_kv_clear(ctx.get()) != TRINE_OK) return Fail(LastApiError());
      trine_sampler_reset(sampler.get());
      start_over();
      cached.clear();
      std::printf("[conversation cleared]\n");
      continue;
    }
    messages.push_back({"user", texts.emplace_back(line).c_str()});
    std::string text;
    st = Render(model.get(), tmpl, messages, true, &text);
    if (!st.ok()) {
      // The template refused the conversation (e.g. roles that must alternate): say why, drop the turn.
      std::fprintf(stderr, "error: %s\n", st.message().c_str());
      messages.pop_back();
      texts.pop_back();
      continue;
    }
    st = Sync(ctx.get(), model.get(), text, &cached, sampler.get(), &timings);
    if (!st.ok()) return Fail(st);

    std::string reply;
    const auto t_gen = Clock::now();
    for (int i = 0; i < n_predict && !g_interrupted.load(); ++i) {
      const trine_token next = trine_sampler_sample(sampler.get(), ctx.get(), 0);
      if (next < 0) return Fail(LastApiError());
      if (trine_model_token_is_eog(model.get(), next)) break;
      trine_sampler_accept(sampler.get(), next);
      const std::string piece = TokenPieceApi(model.get(), next);
      reply += piece;
      std::fputs(piece.c_str(), stdout);
      std::fflush(stdout);
      if (trine_context_n_past(ctx.get()) >= n_ctx) return Fail("the context is full (start again with a larger -c)");
      if (trine_context_decode(ctx.get(), &next, 1, false) != TRINE_OK) return Fail(LastApiError());
      cached.push_back(next);
      ++timings.n_gen;
    }
    timings.gen_ms += MsSince(t_gen);
    if (g_interrupted.load()) std::fprintf(stderr, " [stopped]");
    std::printf("\n");
    messages.push_back({"assistant", texts.emplace_back(reply).c_str()});
  }
  std::printf("\n");
  PrintTimings(load_ms, timings.prompt_ms, timings.n_prompt, timings.gen_ms, timings.n_gen, MsSince(t_start) + load_ms,
               trine_context_n_threads(ctx.get()));
  return kExitOk;
}

}  // namespace trine::cli
