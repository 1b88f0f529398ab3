/* simple.c: the smallest trine program. Loads a GGUF model, generates tokens greedily from a
 * prompt and prints them, using only the C API (include/trine/trine.h).
 *
 *   simple MODEL.gguf [PROMPT] [N_PREDICT]     (defaults: "Once upon a time", 32)
 */
#include <stdio.h>
#include <stdlib.h>

#include <trine/trine.h>

static bool print_piece(const char* piece, size_t len, trine_token token, void* user_data) {
  (void)token;
  (void)user_data;
  fwrite(piece, 1, len, stdout);
  fflush(stdout);
  return true; /* false would stop the generation here */
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s MODEL.gguf [PROMPT] [N_PREDICT]\n", argv[0]);
    return 2;
  }
  const char* prompt = argc > 2 ? argv[2] : "Once upon a time";
  const int n_predict = argc > 3 ? atoi(argv[3]) : 32;

  trine_model_params mparams = trine_model_default_params();
  trine_model* model = trine_model_load(argv[1], &mparams);
  if (model == NULL) {
    fprintf(stderr, "error: %s\n", trine_last_error());
    return 1;
  }
  fprintf(stderr, "trine %s: %s\n", trine_version(), trine_model_desc(model));

  trine_context_params cparams = trine_context_default_params();
  cparams.n_ctx = 256;
  trine_context* ctx = trine_context_create(model, &cparams);

  trine_sampler_params sparams = trine_sampler_default_params();
  sparams.temp = 0.0f; /* greedy */
  trine_sampler* sampler = trine_sampler_create(&sparams);

  int rc = 0;
  if (ctx == NULL || sampler == NULL) {
    fprintf(stderr, "error: %s\n", trine_last_error());
    rc = 1;
  } else {
    fputs(prompt, stdout);
    const int32_t n = trine_generate(ctx, sampler, prompt, n_predict, print_piece, NULL);
    fputs("\n", stdout);
    if (n < 0) {
      fprintf(stderr, "error: %s\n", trine_last_error());
      rc = 1;
    } else {
      fprintf(stderr, "generated %d tokens\n", (int)n);
    }
  }
  trine_sampler_free(sampler);
  trine_context_free(ctx);
  trine_model_free(model);
  return rc;
}
