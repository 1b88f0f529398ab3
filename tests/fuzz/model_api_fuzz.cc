// libFuzzer target for the C API on hostile model files: any bytes loaded with trine_model_load
// (read() path, so the data sits on the ASan-checked heap: validation, repacking, tokenizer set-up)
// and, when the file is accepted, a context, a short prompt and a few greedy decode steps.
// Invariants: a rejected file sets a non-OK status and an error naming the file; an accepted
// model decodes without crashing and gives logits for every vocabulary entry; handles free cleanly.
#include <cmath>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "trine/trine.h"

using trine::fuzz::Check;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = trine::fuzz::ScratchPath(".gguf");
  if (!trine::fuzz::WriteFile(path, data, size)) return 0;
  trine_model_params mp = trine_model_default_params();
  mp.use_mmap = false;
  trine_model* model = trine_model_load(path.c_str(), &mp);
  if (model == nullptr) {
    Check(trine_last_status() != TRINE_OK, "failed load sets a status");
    Check(std::string(trine_last_error()).find(path) != std::string::npos, "load error names the file");
    return 0;
  }
  trine_context_params cp = trine_context_default_params();
  cp.n_ctx = 16;
  cp.n_threads = 1;
  trine_context* ctx = trine_context_create(model, &cp);
  if (ctx != nullptr) {
    trine_token toks[8];
    const int32_t n = trine_tokenize(model, "Once upon", -1, toks, 8, true, false);
    if (n > 0 && trine_context_decode(ctx, toks, n, false) == TRINE_OK) {
      const int32_t n_vocab = trine_model_n_vocab(model);
      for (int step = 0; step < 3; ++step) {
        const float* logits = trine_context_get_logits(ctx, -1);
        Check(logits != nullptr, "logits after a successful decode");
        trine_token best = 0;
        for (int32_t i = 1; i < n_vocab; ++i) {
          if (logits[i] > logits[best]) best = i;
        }
        if (trine_context_decode(ctx, &best, 1, false) != TRINE_OK) break;
      }
    }
    trine_context_free(ctx);
  }
  trine_model_free(model);
  return 0;
}
