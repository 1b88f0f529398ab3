// The tokenize -> decode -> sample loop of one stream on sequence 0 of a context (what
// trine_generate runs): the prompt's tokens are evaluated, then tokens are sampled and evaluated
// one at a time until an end-of-generation token, n_predict tokens, a full context, or a callback
// that asks to stop. Several streams at once go through the Scheduler (runtime/scheduler.h).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "core/status.h"
#include "runtime/context.h"
#include "sampler/sampler.h"

namespace trine {

struct GenerateState {
  // The logits row of sequence 0's last evaluated token (-1: none): an empty prompt continues from
  // it. Generate updates it; a caller that evaluates tokens itself sets it too.
  int logits_row = -1;
};

// Continues sequence 0 of `ctx` with `prompt` (may be empty when state->logits_row >= 0) and samples up
// to n_predict tokens (< 0: no limit). on_token (may be empty) receives each token after it is
// sampled and before it is evaluated; false stops. *generated counts the tokens passed on.
// Errors: a prompt longer than the free positions (INVALID_ARGUMENT), an empty prompt without
// logits to continue from, and the forward pass's.
Status Generate(Context& ctx, const std::vector<int32_t>& prompt, int n_predict, Sampler& sampler,
                const std::function<bool(int32_t)>& on_token, GenerateState* state, int32_t* generated);

}  // namespace trine
