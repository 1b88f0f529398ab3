/* trine.h must compile as C99 with -Wall -Wextra -pedantic -Werror (this file is compiled so by
 * tests/api/CMakeLists.txt), and the library must be usable from C: error paths with NULL
 * arguments, then (with a model path argument) load, tokenize, generate and free.
 * Exits 0 when every check passes; prints the failed check otherwise. */
#include <stdio.h>
#include <string.h>

#include "trine/trine.h"

static int g_failures = 0;

#define CHECK(cond)                                                       \
  do {                                                                    \
    if (!(cond)) {                                                        \
      fprintf(stderr, "%s:%d: check failed: %s (last error: %s)\n", __FILE__, __LINE__, #cond, \
              trine_last_error());                                        \
      ++g_failures;                                                       \
    }                                                                     \
  } while (0)

static int g_warnings = 0;

static void on_log(trine_log_level level, const char* message, void* user_data) {
  (void)message;
  if (level == TRINE_LOG_WARN) ++*(int*)user_data;
}

static bool count_tokens(const char* piece, size_t len, trine_token token, void* user_data) {
  (void)piece;
  (void)len;
  (void)token;
  ++*(int*)user_data;
  return true;
}

int main(int argc, char** argv) {
  trine_model_params mp = trine_model_default_params();
  trine_context_params cp = trine_context_default_params();
  trine_sampler_params sp = trine_sampler_default_params();
  CHECK(strcmp(trine_version(), "0.1.0") == 0);
  CHECK(mp.struct_size == sizeof(trine_model_params));
  CHECK(cp.struct_size == sizeof(trine_context_params));
  CHECK(sp.struct_size == sizeof(trine_sampler_params));

  /* NULL arguments are errors with a message, never crashes. */
  CHECK(trine_model_load(NULL, &mp) == NULL);
  CHECK(trine_last_status() == TRINE_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(trine_last_error(), "trine_model_load") != NULL);
  CHECK(trine_model_n_vocab(NULL) == TRINE_ERROR_INVALID_ARGUMENT);
  CHECK(trine_context_create(NULL, &cp) == NULL);
  CHECK(trine_context_decode(NULL, NULL, 0, false) == TRINE_ERROR_INVALID_ARGUMENT);
  CHECK(trine_tokenize(NULL, "x", 1, NULL, 0, true, false) == TRINE_SIZE_ERROR);
  sp.struct_size = 1;
  CHECK(trine_sampler_create(&sp) == NULL);
  CHECK(strstr(trine_last_error(), "struct_size") != NULL);
  sp = trine_sampler_default_params();
  trine_model_free(NULL);
  trine_context_free(NULL);
  trine_sampler_free(NULL);

  if (argc > 1) {
    trine_model* model;
    trine_context* ctx;
    trine_sampler* smpl;
    trine_token ids[64];
    int32_t n;
    int n_generated = 0;

    model = trine_model_load(argv[1], &mp);
    CHECK(model != NULL);
    if (model == NULL) return 1;
    CHECK(trine_model_n_vocab(model) > 0);
    CHECK(strlen(trine_model_desc(model)) > 0);
    n = trine_tokenize(model, "Once upon a time", -1, ids, 64, true, false);
    CHECK(n == 5);
    CHECK(ids[0] == trine_model_token_bos(model));

    trine_log_set(on_log, &g_warnings);
    cp.n_ctx = trine_model_n_ctx_train(model) + 1; /* longer than trained: one warning */
    ctx = trine_context_create(model, &cp);
    trine_log_set(NULL, NULL);
    CHECK(ctx != NULL);
    CHECK(g_warnings == 1);
    sp.temp = 0.0f;
    smpl = trine_sampler_create(&sp);
    CHECK(smpl != NULL);
    if (ctx != NULL && smpl != NULL) {
      CHECK(trine_generate(ctx, smpl, "Once upon a time", 8, count_tokens, &n_generated) == 8);
      CHECK(n_generated == 8);
      CHECK(trine_context_n_past(ctx) == 5 + 8);
    }
    trine_sampler_free(smpl);
    trine_context_free(ctx);
    trine_model_free(model);
  }
  if (g_failures == 0) printf("ok\n");
  return g_failures == 0 ? 0 : 1;
}
