// `trine perplexity -m FILE -f TEXT -c N -b N`: llama.cpp's protocol. The text is tokenized once
// (with BOS), cut into non-overlapping windows of N tokens (each starting with BOS when the
// vocabulary adds one), and only the second half of each window is scored, so every scored token
// has at least N/2 tokens of context. Prints the running value per window and the final
// estimate with its standard error.
#include <cxxopts.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>

#include "cli_args.h"
#include "cli_common.h"
#include "commands.h"
#include "model_options.h"
#include "tokenizer/tokenizer.h"

namespace trine::cli {
namespace {

// log p(token) under softmax(logits), in double.
double LogProb(const float* logits, int n_vocab, int token) {
  float max_l = logits[0];
  for (int i = 1; i < n_vocab; ++i) max_l = std::max(max_l, logits[i]);
  double sum = 0.0;
  for (int i = 0; i < n_vocab; ++i) sum += std::exp(static_cast<double>(logits[i] - max_l));
  return static_cast<double>(logits[token] - max_l) - std::log(sum);
}

}  // namespace

int RunPerplexity(int argc, char** argv) {
  cxxopts::Options opts("trine perplexity", "Perplexity of a model on a text file (llama.cpp's protocol).");
  AddModelOptions(opts, 512, 512);
  opts.add_options()("f,file", "text file to score", cxxopts::value<std::string>())(
      "chunks", "score at most this many windows (-1 = all)", cxxopts::value<int>()->default_value("-1"))(
      "h,help", "show this help");
  cxxopts::ParseResult a;
  if (const int rc = ParseCommand("perplexity", opts, argc, argv, &a); rc >= 0) return rc;
  if (!a.count("file")) return UsageError("perplexity", "missing -f TEXT");
  std::string text;
  Status st = ReadTextFile(a["file"].as<std::string>(), &text);
  if (!st.ok()) return Fail(st);

  std::unique_ptr<Model> model;
  std::unique_ptr<Context> ctx;
  std::string path;
  double load_ms = 0.0;
  st = LoadModelAndContext(a, &model, &ctx, &path, &load_ms);
  if (!st.ok()) return Fail(st);
  std::unique_ptr<Tokenizer> tokenizer;
  st = Tokenizer::Create(model->shared_vocab(), &tokenizer);
  if (!st.ok()) return Fail(st);
  const Tokenizer& tok = *tokenizer;
  std::vector<TokenId> tokens;
  st = tok.Tokenize(text, true, false, &tokens);
  if (!st.ok()) return Fail(st);

  const int n_ctx = ctx->n_ctx();
  if (static_cast<int>(tokens.size()) < 2 * n_ctx) {
    return Fail("the text has " + std::to_string(tokens.size()) + " tokens; a context of " + std::to_string(n_ctx) +
                " needs at least " + std::to_string(2 * n_ctx));
  }
  int n_chunks = static_cast<int>(tokens.size()) / n_ctx;
  const int max_chunks = a["chunks"].as<int>();
  if (max_chunks >= 0) n_chunks = std::min(n_chunks, max_chunks);
  if (n_chunks <= 0) return Fail("--chunks must be -1 or positive");
  const int first = n_ctx / 2;
  const bool add_bos = model->vocab().add_bos();
  std::fprintf(stderr, "perplexity: %zu tokens, %d windows of %d, scoring the last %d of each, %d threads\n",
               tokens.size(), n_chunks, n_ctx, n_ctx - first - 1, ctx->n_threads());

  const auto t0 = std::chrono::steady_clock::now();
  double nll = 0.0, nll2 = 0.0;
  int64_t count = 0;
  std::vector<TokenId> window(static_cast<size_t>(n_ctx));
  for (int c = 0; c < n_chunks; ++c) {
    const size_t start = static_cast<size_t>(c) * static_cast<size_t>(n_ctx);
    std::copy(tokens.begin() + static_cast<long>(start), tokens.begin() + static_cast<long>(start + n_ctx),
              window.begin());
    if (add_bos) window[0] = model->vocab().bos();
    ctx->Truncate(0);
    st = ctx->Decode(window.data(), n_ctx, true);
    if (!st.ok()) return Fail(st);
    for (int i = first; i < n_ctx - 1; ++i) {
      const double lp = LogProb(ctx->logits(i), ctx->n_vocab(), tokens[start + static_cast<size_t>(i) + 1]);
      nll -= lp;
      nll2 += lp * lp;
      ++count;
    }
    std::printf("[%d]%.4f,", c + 1, std::exp(nll / static_cast<double>(count)));
    std::fflush(stdout);
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double mean = nll / static_cast<double>(count);
  const double ppl = std::exp(mean);
  double var = nll2 / static_cast<double>(count) - mean * mean;
  const double err = var > 0 ? std::sqrt(var / static_cast<double>(count - 1)) * ppl : 0.0;
  std::printf("\nFinal estimate: PPL = %.4f +/- %.5f\n", ppl, err);
  std::fprintf(stderr, "perplexity: %.2f s, %.1f tokens per second\n", secs,
               static_cast<double>(n_chunks) * n_ctx / secs);
  return kExitOk;
}

}  // namespace trine::cli
