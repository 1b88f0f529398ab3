#include "runtime/generate.h"

#include <string>

namespace trine {

Status Generate(Context& ctx, const std::vector<int32_t>& prompt, int n_predict, Sampler& sampler,
                const std::function<bool(int32_t)>& on_token, GenerateState* state, int32_t* generated) {
  *generated = 0;
  if (!prompt.empty()) {
    if (static_cast<int64_t>(prompt.size()) > ctx.n_ctx() - ctx.n_past()) {
      return InvalidArgument("the prompt is " + std::to_string(prompt.size()) + " tokens, but only " +
                             std::to_string(ctx.n_ctx() - ctx.n_past()) + " of the context's " +
                             std::to_string(ctx.n_ctx()) + " positions are free");
    }
    for (int32_t id : prompt) sampler.Accept(id);
    state->logits_row = -1;
    Status st = ctx.Decode(prompt.data(), static_cast<int>(prompt.size()), false);
    if (!st.ok()) return st;
    state->logits_row = 0;
  } else if (state->logits_row < 0) {
    return InvalidArgument("the prompt is empty and the context has no logits to continue from");
  }
  const Vocab& vocab = ctx.model().vocab();
  while (n_predict < 0 || *generated < n_predict) {
    const int next = sampler.Sample(ctx.logits(state->logits_row), ctx.n_vocab());
    if (vocab.IsEog(next)) break;
    sampler.Accept(next);
    ++*generated;
    bool evaluated = false;
    if (ctx.n_past() < ctx.n_ctx()) {
      state->logits_row = -1;
      Status st = ctx.Decode(&next, 1, false);
      if (!st.ok()) return st;
      state->logits_row = 0;
      evaluated = true;
    }
    if (on_token && !on_token(next)) break;
    if (!evaluated) break;
  }
  return Status::Ok();
}

}  // namespace trine
