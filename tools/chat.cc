// `trine chat`: interactive multi-turn chat with the model's template. The conversation lives in
// the KV cache; each turn appends only its own tokens. Ctrl-C stops the current reply (or quits
// at the prompt), Ctrl-D quits.
#include <cxxopts.hpp>

#include <signal.h>

#include <atomic>
#include <cstdio>
#include <iostream>

#include "cli_common.h"
#include "commands.h"
#include "model_options.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace trine::cli {
namespace {

std::atomic<bool> g_interrupted{false};

void OnSigint(int) { g_interrupted.store(true); }

// Tokenizes `text` (special tokens recognised) and evaluates it; false when the context is full.
Status Feed(Context& ctx, const Tokenizer& tok, const std::string& text, bool add_bos, Sampler* sampler) {
  std::vector<TokenId> ids;
  TRINE_RETURN_IF_ERROR(tok.Tokenize(text, add_bos, true, &ids));
  if (ids.empty()) return Status::Ok();
  if (ctx.n_past() + static_cast<int>(ids.size()) > ctx.n_ctx()) {
    return InvalidArgument("the conversation no longer fits in the context of " + std::to_string(ctx.n_ctx()) +
                           " tokens (start again with a larger -c)");
  }
  for (TokenId id : ids) sampler->Accept(id);
  return ctx.Decode(ids.data(), static_cast<int>(ids.size()), false);
}

}  // namespace

int RunChat(int argc, char** argv) {
  cxxopts::Options opts("trine chat", "Interactive chat using the model's chat template.");
  AddModelOptions(opts);
  AddSamplingOptions(opts);
  opts.add_options("chat")("sys,system-prompt", "system prompt (-sys as in llama.cpp)",
                           cxxopts::value<std::string>()->default_value(""))(
      "chat-template", "force a template: chatml, llama3, llama2, bitnet", cxxopts::value<std::string>())(
      "n,n-predict", "maximum tokens per reply", cxxopts::value<int>()->default_value("512"))(
      "h,help", "show this help");
  // cxxopts reads "-sys" as "-s ys"; map llama.cpp's spelling to the long flag first.
  std::vector<std::string> mapped = MapShortFlags(argc, argv, {{"-sys", "--system-prompt"}});
  std::vector<char*> av;
  for (auto& s : mapped) av.push_back(s.data());
  cxxopts::ParseResult a;
  try {
    a = opts.parse(static_cast<int>(av.size()), av.data());
  } catch (const cxxopts::exceptions::exception& e) {
    return UsageError("chat", e.what());
  }
  if (a.count("help")) {
    std::printf("%s\n", opts.help().c_str());
    return kExitOk;
  }
  if (!a.unmatched().empty()) return UsageError("chat", "unexpected argument '" + a.unmatched()[0] + "'");
  const int n_predict = a["n-predict"].as<int>();
  if (n_predict <= 0) return Fail("-n must be positive, got " + std::to_string(n_predict));
  SamplerParams sp;
  Status st = ParseSamplerParams(a, &sp);
  if (!st.ok()) return Fail(st);
  ChatTemplate tmpl = ChatTemplate::kChatml;
  const bool forced = a.count("chat-template") > 0;
  if (forced) {
    st = ParseChatTemplateName(a["chat-template"].as<std::string>(), &tmpl);
    if (!st.ok()) return Fail(st);
  }

  std::unique_ptr<Model> model;
  std::unique_ptr<Context> ctx;
  std::string path;
  double load_ms = 0.0;
  st = LoadModelAndContext(a, &model, &ctx, &path, &load_ms);
  if (!st.ok()) return Fail(st);
  const Vocab& vocab = model->vocab();
  if (!forced) {
    st = DetectChatTemplate(vocab.chat_template(), &tmpl);
    if (!st.ok()) return Fail(st);
  }
  std::unique_ptr<Tokenizer> tokenizer;
  st = Tokenizer::Create(vocab, &tokenizer);
  if (!st.ok()) return Fail(st);
  const Tokenizer& tok = *tokenizer;
  const std::string bos = vocab.bos() >= 0 ? vocab.token(vocab.bos()) : "";
  // Templates that write BOS into their text get it from there; chatml relies on add_bos.
  const bool bos_in_text = tmpl != ChatTemplate::kChatml;

  struct sigaction sa = {};
  sa.sa_handler = OnSigint;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);  // no SA_RESTART: a blocked read returns on Ctrl-C

  std::fprintf(stderr, "trine chat: %s, template %s, context %d. Ctrl-C stops a reply, Ctrl-D quits.\n",
               path.c_str(), ChatTemplateName(tmpl), ctx->n_ctx());
  std::vector<ChatMessage> messages;
  const std::string system = a["system-prompt"].as<std::string>();
  if (!system.empty()) messages.push_back({"system", system});
  size_t rendered = 0;
  Sampler sampler(sp);
  std::string line;
  while (true) {
    std::printf("\n> ");
    std::fflush(stdout);
    g_interrupted.store(false);
    if (!std::getline(std::cin, line)) break;  // Ctrl-D, end of input, or Ctrl-C at the prompt
    if (line.empty()) continue;
    messages.push_back({"user", line});
    const std::string text = RenderChat(tmpl, messages, rendered, true, bos);
    st = Feed(*ctx, tok, text, rendered == 0 && !bos_in_text && vocab.add_bos(), &sampler);
    if (!st.ok()) return Fail(st);
    rendered = messages.size();

    std::string reply;
    for (int i = 0; i < n_predict && !g_interrupted.load(); ++i) {
      const int next = sampler.Sample(ctx->logits(), ctx->n_vocab());
      if (vocab.IsEog(next)) break;
      sampler.Accept(next);
      const std::string piece = tok.TokenToPiece(next, false);
      reply += piece;
      std::fputs(piece.c_str(), stdout);
      std::fflush(stdout);
      if (ctx->n_past() >= ctx->n_ctx()) return Fail("the context is full (start again with a larger -c)");
      st = ctx->Decode(&next, 1, false);
      if (!st.ok()) return Fail(st);
    }
    if (g_interrupted.load()) std::fprintf(stderr, " [stopped]");
    // Close the assistant turn in the cache so the next turn follows the template.
    st = Feed(*ctx, tok, EndOfAssistantTurn(tmpl), false, &sampler);
    if (!st.ok()) return Fail(st);
    messages.push_back({"assistant", reply});
    rendered = messages.size();
  }
  std::printf("\n");
  return kExitOk;
}

}  // namespace trine::cli
