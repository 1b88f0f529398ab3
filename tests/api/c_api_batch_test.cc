// The C API's several-sequence calls: a batch of three sequences gives each the logits of its own
// context; forked prompts; tail removal and the pool's free positions; "KV pool full" changes no
// sequence; every bad argument is an error with a message; the older trine_context_params layout.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "trine/trine.h"

namespace {

const std::string kModel = trine::testing::ModelPath("bitnet-tiny-stories-TQ2_0-f16emb.gguf");

struct Handles {
  trine_model* model = nullptr;
  trine_context* ctx = nullptr;
  trine_batch* batch = nullptr;
  ~Handles() {
    trine_batch_free(batch);
    trine_context_free(ctx);
    trine_model_free(model);
  }
};

trine_context* NewContext(trine_model* m, int n_seq_max, int pool, int n_ctx = 128) {
  trine_context_params cp = trine_context_default_params();
  cp.n_ctx = n_ctx;
  cp.n_threads = 2;
  cp.n_seq_max = n_seq_max;
  cp.kv_pool_size = pool;
  return trine_context_create(m, &cp);
}

std::vector<float> AloneLogits(trine_model* m, const std::vector<trine_token>& tokens) {
  trine_context* c = NewContext(m, 1, 0);
  EXPECT_NE(c, nullptr) << trine_last_error();
  EXPECT_EQ(trine_context_decode(c, tokens.data(), static_cast<int32_t>(tokens.size()), false), TRINE_OK);
  const float* l = trine_context_get_logits(c, -1);
  std::vector<float> out(l, l + trine_model_n_vocab(m));
  trine_context_free(c);
  return out;
}

TEST(CApiBatch, EachSequenceOfABatchGetsItsOwnContextsLogits) {
  Handles h;
  trine_model_params mp = trine_model_default_params();
  h.model = trine_model_load(kModel.c_str(), &mp);
  ASSERT_NE(h.model, nullptr) << trine_last_error();
  h.ctx = NewContext(h.model, 3, 0);
  ASSERT_NE(h.ctx, nullptr) << trine_last_error();
  EXPECT_EQ(trine_context_n_seq_max(h.ctx), 3);
  EXPECT_EQ(trine_context_kv_pool_size(h.ctx), 128);
  EXPECT_EQ(trine_context_kv_pool_free(h.ctx), 128);
  h.batch = trine_batch_init(64);
  ASSERT_NE(h.batch, nullptr);
  const std::vector<std::vector<trine_token>> prompts = {{1, 400, 401, 402}, {1, 500}, {1, 600, 601, 602, 603, 604}};
  for (int s = 0; s < 3; ++s) {
    const auto& p = prompts[static_cast<size_t>(s)];
    for (size_t i = 0; i < p.size(); ++i) {
      ASSERT_EQ(trine_batch_add(h.batch, p[i], static_cast<int32_t>(i), s, i + 1 == p.size()), TRINE_OK);
    }
  }
  EXPECT_EQ(trine_batch_n_tokens(h.batch), 12);
  ASSERT_EQ(trine_context_decode_batch(h.ctx, h.batch), TRINE_OK) << trine_last_error();
  const int32_t last_of[3] = {3, 5, 11};  // batch index of each sequence's last token
  for (int s = 0; s < 3; ++s) {
    EXPECT_EQ(trine_context_seq_pos(h.ctx, s), static_cast<int32_t>(prompts[static_cast<size_t>(s)].size()));
    const float* got = trine_context_get_logits_ith(h.ctx, last_of[s]);
    ASSERT_NE(got, nullptr) << trine_last_error();
    const std::vector<float> want = AloneLogits(h.model, prompts[static_cast<size_t>(s)]);
    for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(got[i], want[i]) << "sequence " << s << " logit " << i;
  }
  EXPECT_EQ(trine_context_get_logits_ith(h.ctx, 0), nullptr) << "token 0 asked for no logits";
  EXPECT_EQ(trine_last_status(), TRINE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(trine_context_get_logits_ith(h.ctx, -1), trine_context_get_logits_ith(h.ctx, 11));
  EXPECT_EQ(trine_context_kv_pool_free(h.ctx), 128 - 3 * 16);

  // Fork sequence 2's prompt onto 0 (dropping 0's own), then both continue with the same token.
  ASSERT_EQ(trine_context_seq_fork(h.ctx, 2, 0, -1), TRINE_OK) << trine_last_error();
  EXPECT_EQ(trine_context_kv_pool_free(h.ctx), 128 - 2 * 16) << "0's block returned, 2's shared";
  trine_batch_clear(h.batch);
  trine_batch_add(h.batch, 700, -1, 0, true);
  trine_batch_add(h.batch, 700, -1, 2, true);
  ASSERT_EQ(trine_context_decode_batch(h.ctx, h.batch), TRINE_OK) << trine_last_error();
  std::vector<trine_token> whole = prompts[2];
  whole.push_back(700);
  const std::vector<float> want = AloneLogits(h.model, whole);
  for (int i : {0, 1}) {
    const float* got = trine_context_get_logits_ith(h.ctx, i);
    ASSERT_NE(got, nullptr);
    for (size_t k = 0; k < want.size(); ++k) ASSERT_EQ(got[k], want[k]) << "batch token " << i;
  }
  EXPECT_EQ(trine_context_kv_pool_free(h.ctx), 128 - 3 * 16) << "the shared block was copied on write";

  // Tails only; the whole sequence frees its blocks.
  EXPECT_EQ(trine_context_seq_rm(h.ctx, 1, 0, 1), TRINE_ERROR_UNSUPPORTED);
  EXPECT_NE(std::string(trine_last_error()).find("only a tail"), std::string::npos) << trine_last_error();
  EXPECT_EQ(trine_context_seq_rm(h.ctx, 1, 0, -1), TRINE_OK);
  EXPECT_EQ(trine_context_seq_pos(h.ctx, 1), 0);
  EXPECT_EQ(trine_context_kv_pool_free(h.ctx), 128 - 2 * 16);
  EXPECT_EQ(trine_context_seq_rm(h.ctx, 0, 2, -1), TRINE_OK);
  EXPECT_EQ(trine_context_seq_pos(h.ctx, 0), 2);
}

TEST(CApiBatch, PoolFullFailsTheCallAndChangesNoSequence) {
  Handles h;
  trine_model_params mp = trine_model_default_params();
  h.model = trine_model_load(kModel.c_str(), &mp);
  ASSERT_NE(h.model, nullptr);
  h.ctx = NewContext(h.model, 2, 32);  // two blocks
  ASSERT_NE(h.ctx, nullptr) << trine_last_error();
  h.batch = trine_batch_init(40);
  for (int i = 0; i < 20; ++i) trine_batch_add(h.batch, 300 + i, -1, 0, i == 19);
  ASSERT_EQ(trine_context_decode_batch(h.ctx, h.batch), TRINE_OK);
  trine_batch_clear(h.batch);
  for (int i = 0; i < 5; ++i) trine_batch_add(h.batch, 300 + i, -1, 1, i == 4);
  trine_batch_add(h.batch, 7, -1, 0, true);
  EXPECT_EQ(trine_context_decode_batch(h.ctx, h.batch), TRINE_ERROR_OUT_OF_MEMORY);
  EXPECT_NE(std::string(trine_last_error()).find("KV pool full"), std::string::npos) << trine_last_error();
  EXPECT_EQ(trine_context_seq_pos(h.ctx, 0), 20);
  EXPECT_EQ(trine_context_seq_pos(h.ctx, 1), 0);
  EXPECT_EQ(trine_context_kv_pool_free(h.ctx), 0);
}

TEST(CApiBatch, BadArgumentsAreErrorsWithMessages) {
  Handles h;
  trine_model_params mp = trine_model_default_params();
  h.model = trine_model_load(kModel.c_str(), &mp);
  ASSERT_NE(h.model, nullptr);
  h.ctx = NewContext(h.model, 2, 0);
  ASSERT_NE(h.ctx, nullptr);
  EXPECT_EQ(trine_batch_init(0), nullptr);
  EXPECT_EQ(trine_last_status(), TRINE_ERROR_INVALID_ARGUMENT);
  h.batch = trine_batch_init(2);
  EXPECT_EQ(trine_batch_add(nullptr, 1, 0, 0, true), TRINE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(trine_batch_add(h.batch, 1, -2, 0, true), TRINE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(trine_batch_add(h.batch, 1, 0, -1, true), TRINE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(trine_context_decode_batch(h.ctx, h.batch), TRINE_ERROR_INVALID_ARGUMENT) << "empty batch";
  EXPECT_EQ(trine_batch_add(h.batch, 1, 0, 5, true), TRINE_OK);
  EXPECT_EQ(trine_batch_add(h.batch, 1, 1, 5, true), TRINE_OK);
  EXPECT_EQ(trine_batch_add(h.batch, 1, 2, 5, true), TRINE_ERROR_INVALID_ARGUMENT) << "full";
  EXPECT_NE(std::string(trine_last_error()).find("full"), std::string::npos);
  EXPECT_EQ(trine_context_decode_batch(h.ctx, h.batch), TRINE_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(trine_last_error()).find("sequence id 5"), std::string::npos) << trine_last_error();
  EXPECT_EQ(trine_context_decode_batch(nullptr, h.batch), TRINE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(trine_context_decode_batch(h.ctx, nullptr), TRINE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(trine_context_seq_pos(h.ctx, 2), TRINE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(trine_context_seq_pos(nullptr, 0), TRINE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(trine_context_seq_fork(h.ctx, 0, 0, -1), TRINE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(trine_context_seq_fork(h.ctx, 0, 1, 3), TRINE_ERROR_INVALID_ARGUMENT) << "beyond src";
  EXPECT_EQ(trine_context_seq_fork(h.ctx, 0, 9, -1), TRINE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(trine_context_seq_rm(h.ctx, -1, 0, -1), TRINE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(trine_context_n_seq_max(nullptr), TRINE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(trine_context_kv_pool_size(nullptr), TRINE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(trine_context_get_logits_ith(h.ctx, 0), nullptr) << "nothing decoded";
  EXPECT_EQ(trine_batch_n_tokens(nullptr), TRINE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(trine_batch_clear(nullptr), TRINE_ERROR_INVALID_ARGUMENT);
  trine_context_params cp = trine_context_default_params();
  cp.n_seq_max = 0;
  EXPECT_EQ(trine_context_create(h.model, &cp), nullptr);
  EXPECT_NE(std::string(trine_last_error()).find("n_seq_max"), std::string::npos) << trine_last_error();
  cp = trine_context_default_params();
  cp.kv_pool_size = -16;
  EXPECT_EQ(trine_context_create(h.model, &cp), nullptr);
  // A freed batch freed again is reported, not a crash.
  trine_batch* b = trine_batch_init(1);
  trine_batch_free(b);
  trine_batch_free(b);
  EXPECT_EQ(trine_last_status(), TRINE_ERROR_INVALID_ARGUMENT);
}

// The layout before n_seq_max and kv_pool_size (struct_size 32 on LP64) still creates a context:
// one sequence, the pool n_ctx positions.
TEST(CApiBatch, TheEarlierParamsLayoutStillWorks) {
  struct ParamsBeforeSeqs {
    size_t struct_size;
    int32_t n_ctx, n_batch, n_threads, kv_type, kv_type_v;
  };
  trine_model_params mp = trine_model_default_params();
  trine_model* m = trine_model_load(kModel.c_str(), &mp);
  ASSERT_NE(m, nullptr);
  trine_context_params cp = trine_context_default_params();
  cp.n_ctx = 64;
  cp.n_seq_max = 7;  // beyond the old struct: must be ignored
  cp.struct_size = sizeof(ParamsBeforeSeqs);
  trine_context* c = trine_context_create(m, &cp);
  ASSERT_NE(c, nullptr) << trine_last_error();
  EXPECT_EQ(trine_context_n_seq_max(c), 1);
  EXPECT_EQ(trine_context_kv_pool_size(c), 64);
  trine_context_free(c);
  trine_model_free(m);
}

}  // namespace
