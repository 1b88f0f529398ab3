/* batched.c: several continuations of one prompt decoded together, llama.cpp's `batched` example
 * for trine. The prompt is evaluated once in sequence 0 and forked to the others (its KV blocks
 * are shared); then every step decodes one token of every sequence in one batch, so the weights
 * are read once per step for all of them. Each sequence samples with its own seed.
 *
 *   batched MODEL.gguf [PROMPT] [N_PARALLEL] [N_PREDICT]   (defaults: "Once upon a time", 4, 32)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <trine/trine.h>

#define MAX_PARALLEL 64
#define MAX_TEXT 8192

static int fail(const char* what) {
  fprintf(stderr, "error: %s: %s\n", what, trine_last_error());
  return 1;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s MODEL.gguf [PROMPT] [N_PARALLEL] [N_PREDICT]\n", argv[0]);
    return 2;
  }
  const char* prompt = argc > 2 ? argv[2] : "Once upon a time";
  const int n_parallel = argc > 3 ? atoi(argv[3]) : 4;
  const int n_predict = argc > 4 ? atoi(argv[4]) : 32;
  if (n_parallel < 1 || n_parallel > MAX_PARALLEL || n_predict < 1) {
    fprintf(stderr, "error: N_PARALLEL must be in [1, %d] and N_PREDICT >= 1\n", MAX_PARALLEL);
    return 2;
  }

  trine_model_params mparams = trine_model_default_params();
  trine_model* model = trine_model_load(argv[1], &mparams);
  if (model == NULL) return fail("load");

  trine_token tokens[512];
  const int32_t n_prompt = trine_tokenize(model, prompt, -1, tokens, 512, true, false);
  if (n_prompt <= 0) {
    trine_model_free(model);
    return fail("tokenize");
  }

  trine_context_params cparams = trine_context_default_params();
  cparams.n_ctx = n_prompt + n_predict;
  cparams.n_seq_max = n_parallel;
  cparams.kv_pool_size = n_prompt + n_parallel * (n_predict + 16); /* the prompt once, then each its own */
  trine_context* ctx = trine_context_create(model, &cparams);
  trine_batch* batch = trine_batch_init(n_prompt > n_parallel ? n_prompt : n_parallel);
  trine_sampler* samplers[MAX_PARALLEL] = {0};
  static char text[MAX_PARALLEL][MAX_TEXT];
  size_t text_len[MAX_PARALLEL] = {0};
  int done[MAX_PARALLEL] = {0};
  int rc = 0;
  if (ctx == NULL || batch == NULL) {
    rc = fail("context");
    goto out;
  }
  for (int s = 0; s < n_parallel; ++s) {
    trine_sampler_params sp = trine_sampler_default_params();
    sp.seed = 1234 + (uint64_t)s; /* a different continuation per sequence */
    samplers[s] = trine_sampler_create(&sp);
    if (samplers[s] == NULL) {
      rc = fail("sampler");
      goto out;
    }
  }

  /* The prompt once, in sequence 0, then shared with the others. */
  for (int i = 0; i < n_prompt; ++i) trine_batch_add(batch, tokens[i], i, 0, i == n_prompt - 1);
  if (trine_context_decode_batch(ctx, batch) != TRINE_OK) {
    rc = fail("prompt");
    goto out;
  }
  for (int s = 1; s < n_parallel; ++s) trine_context_seq_fork(ctx, 0, s, -1);

  /* Row of each sequence's logits: the prompt's last token (-1, the last row) for all of them at
   * first; then its token's index in the step's batch (every token of a step keeps its logits, so
   * rows and batch indices agree). */
  int logits_index[MAX_PARALLEL];
  for (int s = 0; s < n_parallel; ++s) logits_index[s] = -1;
  int n_decoded = 0;
  for (int step = 0; step < n_predict; ++step) {
    trine_batch_clear(batch);
    for (int s = 0; s < n_parallel; ++s) {
      if (done[s]) continue;
      const trine_token t = trine_sampler_sample(samplers[s], ctx, logits_index[s]);
      if (t < 0 || trine_model_token_is_eog(model, t)) {
        done[s] = 1;
        continue;
      }
      trine_sampler_accept(samplers[s], t);
      char piece[64];
      const int32_t n = trine_token_to_piece(model, t, piece, sizeof(piece), false);
      if (n > 0 && text_len[s] + (size_t)n < MAX_TEXT) {
        memcpy(text[s] + text_len[s], piece, (size_t)n);
        text_len[s] += (size_t)n;
      }
      logits_index[s] = trine_batch_n_tokens(batch);
      trine_batch_add(batch, t, -1, s, true);
    }
    if (trine_batch_n_tokens(batch) == 0) break; /* every sequence ended */
    if (trine_context_decode_batch(ctx, batch) != TRINE_OK) {
      rc = fail("decode");
      goto out;
    }
    n_decoded += trine_batch_n_tokens(batch);
  }
  for (int s = 0; s < n_parallel; ++s) printf("sequence %d: %s%.*s\n\n", s, prompt, (int)text_len[s], text[s]);
  fprintf(stderr, "decoded %d tokens in %d sequences; KV pool %d of %d positions free\n", n_decoded, n_parallel,
          trine_context_kv_pool_free(ctx), trine_context_kv_pool_size(ctx));
out:
  for (int s = 0; s < n_parallel; ++s) trine_sampler_free(samplers[s]);
  trine_batch_free(batch);
  trine_context_free(ctx);
  trine_model_free(model);
  return rc;
}
