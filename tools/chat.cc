// `trine chat`: interactive multi-turn chat with the model's template. The conversation lives in
// the KV cache; each turn appends only its own tokens. Input has line editing and history on a
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

// Tokenizes `text` (special tokens recognised) and evaluates it; an error when the context is full.
Status Feed(trine_context* ctx, const trine_model* model, const std::string& text, bool add_bos,
            trine_sampler* sampler, Timings* timings) {
  const auto t0 = Clock::now();
  std::vector<trine_token> ids;
  TRINE_RETURN_IF_ERROR(TokenizeApi(model, text, add_bos, true, &ids));
  if (ids.empty()) return Status::Ok();
  const int n_ctx = trine_context_n_ctx(ctx);
  if (trine_context_n_past(ctx) + static_cast<int>(ids.size()) > n_ctx) {
    return InvalidArgument("the conversation no longer fits in the context of " + std::to_string(n_ctx) +
                           " tokens (start again with a larger -c)");
  }
  for (trine_token id : ids) trine_sampler_accept(sampler, id);
  if (trine_context_decode(ctx, ids.data(), static_cast<int32_t>(ids.size()), false) != TRINE_OK) {
    return LastApiError();
  }
  timings->prompt_ms += MsSince(t0);
  timings->n_prompt += static_cast<int>(ids.size());
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

// The text of messages[from..] as it continues a conversation of which messages[0..from) were
// rendered already: the whole rendering minus the rendering of the part already in the cache.
Status RenderTail(const trine_model* model, const char* tmpl, const std::vector<trine_chat_message>& msgs, size_t from,
                  bool add_assistant, std::string* out) {
  std::string all, before;
  TRINE_RETURN_IF_ERROR(Render(model, tmpl, msgs, add_assistant, &all));
  if (from > 0) {
    TRINE_RETURN_IF_ERROR(
        Render(model, tmpl, std::vector<trine_chat_message>(msgs.begin(), msgs.begin() + static_cast<long>(from)),
               false, &before));
  }
  if (all.compare(0, before.size(), before) != 0) {
    return Status(StatusCode::kInternal, "the chat template does not render the conversation incrementally");
  }
  *out = all.substr(before.size());
  return Status::Ok();
}

}  // namespace

int RunChat(int argc, char** argv) {
  cxxopts::Options opts("trine chat", "Interactive chat using the model's chat template.");
  AddModelOptions(opts);
  AddPlanOptions(opts);
  AddSamplingOptions(opts);
  opts.add_options("chat")("sys,system-prompt", "system prompt (-sys as in llama.cpp)",
                           cxxopts::value<std::string>()->default_value(""))(
      "chat-template", "force a template: chatml, llama3, llama2, bitnet", cxxopts::value<std::string>())(
      "n,n-predict", "maximum tokens per reply", cxxopts::value<int>()->default_value("512"))(
      "h,help", "show this help");
  cxxopts::ParseResult a;
  if (const int rc = ParseCommand("chat", opts, argc, argv, &a); rc >= 0) return rc;
  const int n_predict = a["n-predict"].as<int>();
  if (n_predict <= 0) return Fail("-n must be positive, got " + std::to_string(n_predict));
  SamplerParams sp;
  Status st = ParseSamplerParams(a, &sp);
  if (!st.ok()) return Fail(st);
  // The canonical template name ("chatml", ...): forced by the flag, else the model's.
  const char* tmpl = nullptr;
  const bool forced = a.count("chat-template") > 0;
  if (forced) {
    tmpl = trine_chat_template_name(nullptr, a["chat-template"].as<std::string>().c_str());
    if (tmpl == nullptr) return Fail(LastApiError());
  }

  InstallCliLogSink();
  ApiModel model;
  ApiContext ctx;
  std::string path;
  double load_ms = 0.0;
  std::string plan_summary;
  st = LoadModelAndContextApi(a, &model, &ctx, &path, &load_ms, true, &plan_summary);
  if (!st.ok()) return Fail(st);
  if (!plan_summary.empty()) std::fprintf(stderr, "%s\n", plan_summary.c_str());
  if (!forced) {
    tmpl = trine_chat_template_name(model.get(), nullptr);
    if (tmpl == nullptr) return Fail(LastApiError());
  }
  std::vector<trine_token> probe;  // the tokenizer must exist before the first turn
  st = TokenizeApi(model.get(), "", false, false, &probe);
  if (!st.ok()) return Fail(st);
  std::string end_of_turn(64, '\0');
  const int32_t n_eot = trine_chat_end_of_turn(model.get(), tmpl, end_of_turn.data(),
                                               static_cast<int32_t>(end_of_turn.size()));
  if (n_eot < 0) return Fail(LastApiError());
  end_of_turn.resize(static_cast<size_t>(n_eot));
  // Templates that write BOS into their text get it from there; chatml relies on add_bos.
  const bool bos_in_text = std::string(tmpl) != "chatml";
  const bool add_bos = trine_model_add_bos(model.get());
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
               path.c_str(), tmpl, n_ctx);
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
  size_t rendered = 0;
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
      rendered = 0;
      std::printf("[conversation cleared]\n");
      continue;
    }
    messages.push_back({"user", texts.emplace_back(line).c_str()});
    std::string text;
    st = RenderTail(model.get(), tmpl, messages, rendered, true, &text);
    if (!st.ok()) return Fail(st);
    st = Feed(ctx.get(), model.get(), text, rendered == 0 && !bos_in_text && add_bos, sampler.get(), &timings);
    if (!st.ok()) return Fail(st);
    rendered = messages.size();

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
      ++timings.n_gen;
    }
    timings.gen_ms += MsSince(t_gen);
    if (g_interrupted.load()) std::fprintf(stderr, " [stopped]");
    std::printf("\n");
    // Close the assistant turn in the cache so the next turn follows the template.
    st = Feed(ctx.get(), model.get(), end_of_turn, false, sampler.get(), &timings);
    if (!st.ok()) return Fail(st);
    messages.push_back({"assistant", texts.emplace_back(reply).c_str()});
    rendered = messages.size();
  }
  std::printf("\n");
  PrintTimings(load_ms, timings.prompt_ms, timings.n_prompt, timings.gen_ms, timings.n_gen, MsSince(t_start) + load_ms,
               trine_context_n_threads(ctx.get()));
  return kExitOk;
}

}  // namespace trine::cli
