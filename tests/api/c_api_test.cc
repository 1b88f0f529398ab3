// The C API (trine.h through libtrine.so): lifecycle in every allowed order, an error with a
// message (never a crash) for each NULL / invalid argument and wrong struct_size, the "buffer too
// small -> -needed" convention, load cancellation, logging, chat templates, and generation
// invariants (stop from the callback, continuation, kv_trim / kv_clear rewinds).
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "trine/trine.h"

namespace {

using trine::testing::ModelPath;

const std::string kModel = ModelPath("bitnet-tiny-stories-TQ2_0-f16emb.gguf");

trine_model* LoadModel(const std::string& path = kModel) {
  trine_model_params mp = trine_model_default_params();
  return trine_model_load(path.c_str(), &mp);
}

trine_context* NewContext(trine_model* model, int n_ctx = 128, int n_threads = 1) {
  trine_context_params cp = trine_context_default_params();
  cp.n_ctx = n_ctx;
  cp.n_threads = n_threads;
  return trine_context_create(model, &cp);
}

trine_sampler* NewGreedySampler() {
  trine_sampler_params sp = trine_sampler_default_params();
  sp.temp = 0.0f;
  return trine_sampler_create(&sp);
}

std::vector<trine_token> Tokenize(const trine_model* m, const std::string& text, bool add_special = true) {
  const int32_t needed = -trine_tokenize(m, text.data(), static_cast<int32_t>(text.size()), nullptr, 0, add_special,
                                         false);
  std::vector<trine_token> ids(static_cast<size_t>(std::max(needed, 0)));
  const int32_t n = trine_tokenize(m, text.data(), static_cast<int32_t>(text.size()), ids.data(),
                                   static_cast<int32_t>(ids.size()), add_special, false);
  EXPECT_EQ(n, static_cast<int32_t>(ids.size())) << trine_last_error();
  return ids;
}

struct Generated {
  std::vector<trine_token> ids;
  std::string text;
  int stop_after = -1;  // callback returns false after this many tokens
};

bool Collect(const char* piece, size_t len, trine_token token, void* user) {
  auto* g = static_cast<Generated*>(user);
  EXPECT_EQ(std::strlen(piece), len);
  g->ids.push_back(token);
  g->text.append(piece, len);
  return g->stop_after < 0 || static_cast<int>(g->ids.size()) < g->stop_after;
}

// Puts a known error in the thread's slot, so a check can see that the call under test replaced it.
void PlantSentinelError() {
  ASSERT_EQ(trine_sampler_accept(nullptr, 0), TRINE_ERROR_INVALID_ARGUMENT);
  ASSERT_STREQ(trine_last_error(), "trine_sampler_accept: sampler is NULL");
}

// Expects that the call just made set `status` and a message of its own.
#define EXPECT_ERROR_SET(status)                                                     \
  do {                                                                               \
    EXPECT_EQ(trine_last_status(), (status)) << trine_last_error();                  \
    EXPECT_STRNE(trine_last_error(), "trine_sampler_accept: sampler is NULL");       \
    EXPECT_GT(std::strlen(trine_last_error()), 10u);                                 \
  } while (0)

TEST(CApi, VersionAndStatusStrings) {
  EXPECT_STREQ(trine_version(), "0.1.0");
  EXPECT_STREQ(trine_status_string(TRINE_ERROR_CANCELLED), "TRINE_ERROR_CANCELLED");
  EXPECT_STREQ(trine_status_string(static_cast<trine_status>(-100)), "unknown status");
}

TEST(CApi, ModelInfo) {
  trine_model* m = LoadModel();
  ASSERT_NE(m, nullptr) << trine_last_error();
  EXPECT_EQ(trine_model_n_vocab(m), 2048);
  EXPECT_GT(trine_model_n_ctx_train(m), 0);
  EXPECT_GT(trine_model_n_embd(m), 0);
  EXPECT_GT(trine_model_n_layer(m), 0);
  EXPECT_GT(trine_model_size(m), 1000000u);
  EXPECT_GT(trine_model_n_params(m), 1000000u);
  EXPECT_STREQ(trine_model_arch(m), "llama");  // a llama-architecture model with ternary weights
  EXPECT_STREQ(trine_model_desc(m), "llama 4.5M params, 4 layers, n_embd 256, mostly TQ2_0");
  EXPECT_EQ(trine_model_token_bos(m), 1);
  const trine_token eos = trine_model_token_eos(m);
  ASSERT_GE(eos, 0);
  EXPECT_TRUE(trine_model_token_is_eog(m, eos));
  EXPECT_FALSE(trine_model_token_is_eog(m, 436));
  EXPECT_FALSE(trine_model_token_is_eog(m, -5));
  EXPECT_TRUE(trine_model_add_bos(m));
  trine_model_free(m);
}

TEST(CApi, LifecycleUsualOrder) {
  trine_model* m = LoadModel();
  ASSERT_NE(m, nullptr) << trine_last_error();
  trine_context* c = NewContext(m);
  ASSERT_NE(c, nullptr) << trine_last_error();
  trine_sampler* s = NewGreedySampler();
  ASSERT_NE(s, nullptr) << trine_last_error();
  EXPECT_EQ(trine_generate(c, s, "Once upon a time", 4, nullptr, nullptr), 4);
  trine_sampler_free(s);
  trine_context_free(c);
  trine_model_free(m);
}

TEST(CApi, LifecycleModelFreedBeforeItsContexts) {
  trine_model* m = LoadModel();
  ASSERT_NE(m, nullptr);
  trine_context* c1 = NewContext(m);
  trine_context* c2 = NewContext(m);
  ASSERT_NE(c1, nullptr);
  ASSERT_NE(c2, nullptr);
  trine_model_free(m);  // the contexts keep the weights alive
  trine_sampler* s = NewGreedySampler();
  Generated g1, g2;
  EXPECT_EQ(trine_generate(c1, s, "Once upon a time", 5, Collect, &g1), 5);
  trine_context_free(c1);
  trine_sampler_reset(s);
  EXPECT_EQ(trine_generate(c2, s, "Once upon a time", 5, Collect, &g2), 5);
  EXPECT_EQ(g1.ids, g2.ids);
  EXPECT_EQ(g1.ids, (std::vector<trine_token>{2004, 408, 283, 261, 396}));
  trine_context_free(c2);
  trine_sampler_free(s);
}

TEST(CApi, LifecycleSamplerOutlivesEverythingAndNullFrees) {
  trine_sampler* s = NewGreedySampler();  // a sampler needs no model
  ASSERT_NE(s, nullptr);
  for (int round = 0; round < 2; ++round) {
    trine_model* m = LoadModel();
    ASSERT_NE(m, nullptr);
    trine_context* c = NewContext(m);
    ASSERT_NE(c, nullptr);
    trine_sampler_reset(s);
    EXPECT_EQ(trine_generate(c, s, "Once upon a time", 2, nullptr, nullptr), 2);
    trine_context_free(c);
    trine_model_free(m);
  }
  trine_sampler_free(s);
  trine_sampler_free(nullptr);
  trine_context_free(nullptr);
  trine_model_free(nullptr);
}

// Freeing twice, or freeing a handle through another type's free function, is detected and ignored
// (and the heap stays intact: the sanitizer build runs this test too).
TEST(CApi, DoubleFreeAndWrongTypeFreeAreDetected) {
  trine_model* m = LoadModel();
  ASSERT_NE(m, nullptr);
  trine_context* c = NewContext(m);
  ASSERT_NE(c, nullptr);
  trine_sampler* s = NewGreedySampler();
  ASSERT_NE(s, nullptr);

  PlantSentinelError();
  trine_context_free(reinterpret_cast<trine_context*>(m));  // a model is not a context
  EXPECT_ERROR_SET(TRINE_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(trine_last_error()).find("not a live trine_context"), std::string::npos);
  PlantSentinelError();
  trine_sampler_free(reinterpret_cast<trine_sampler*>(c));
  EXPECT_ERROR_SET(TRINE_ERROR_INVALID_ARGUMENT);
  // All three still work after the wrong frees.
  trine_token tok[4];
  const int32_t n = trine_tokenize(m, "Once", -1, tok, 4, true, false);
  ASSERT_GT(n, 0);
  EXPECT_EQ(trine_context_decode(c, tok, n, false), TRINE_OK);
  EXPECT_GE(trine_sampler_sample(s, c, -1), 0);

  trine_sampler_free(s);
  trine_context_free(c);
  trine_model_free(m);
  for (int i = 0; i < 2; ++i) {
    PlantSentinelError();
    trine_model_free(m);
    EXPECT_ERROR_SET(TRINE_ERROR_INVALID_ARGUMENT);
    PlantSentinelError();
    trine_context_free(c);
    EXPECT_ERROR_SET(TRINE_ERROR_INVALID_ARGUMENT);
    PlantSentinelError();
    trine_sampler_free(s);
    EXPECT_ERROR_SET(TRINE_ERROR_INVALID_ARGUMENT);
  }
}

TEST(CApi, TwoLoadsOfOneFileAreIndependent) {
  trine_model* a = LoadModel();
  trine_model_params mp = trine_model_default_params();
  mp.use_mmap = false;
  trine_model* b = trine_model_load(kModel.c_str(), &mp);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr) << trine_last_error();
  trine_context* ca = NewContext(a);
  trine_context* cb = NewContext(b);
  trine_model_free(a);
  const std::vector<trine_token> ids = Tokenize(b, "The capital of France is");
  ASSERT_EQ(trine_context_decode(ca, ids.data(), static_cast<int32_t>(ids.size()), false), TRINE_OK);
  ASSERT_EQ(trine_context_decode(cb, ids.data(), static_cast<int32_t>(ids.size()), false), TRINE_OK);
  const float* la = trine_context_get_logits(ca, 0);
  const float* lb = trine_context_get_logits(cb, -1);
  ASSERT_NE(la, nullptr);
  ASSERT_NE(lb, nullptr);
  EXPECT_EQ(std::memcmp(la, lb, sizeof(float) * 2048), 0);
  trine_context_free(ca);
  trine_context_free(cb);
  trine_model_free(b);
}

TEST(CApi, DecodeAllLogitsAndKvRewinds) {
  trine_model* m = LoadModel();
  trine_context* c = NewContext(m, 64);
  ASSERT_NE(c, nullptr);
  const std::vector<trine_token> ids = Tokenize(m, "Once upon a time");
  const int32_t n = static_cast<int32_t>(ids.size());
  ASSERT_EQ(trine_context_decode(c, ids.data(), n, true), TRINE_OK);
  EXPECT_EQ(trine_context_n_past(c), n);
  std::vector<std::vector<float>> rows;
  for (int32_t i = 0; i < n; ++i) {
    const float* l = trine_context_get_logits(c, i);
    ASSERT_NE(l, nullptr) << i;
    rows.emplace_back(l, l + 2048);
  }
  EXPECT_EQ(trine_context_get_logits(c, n), nullptr);
  EXPECT_EQ(trine_context_get_logits(c, -1), trine_context_get_logits(c, n - 1));

  // Trim to the first two positions and evaluate the rest one by one: the same logits.
  ASSERT_EQ(trine_context_kv_trim(c, 2), TRINE_OK);
  EXPECT_EQ(trine_context_n_past(c), 2);
  EXPECT_EQ(trine_context_get_logits(c, -1), nullptr);  // trimming drops the logits
  for (int32_t i = 2; i < n; ++i) {
    ASSERT_EQ(trine_context_decode(c, &ids[static_cast<size_t>(i)], 1, false), TRINE_OK);
    const float* l = trine_context_get_logits(c, 0);
    for (int v = 0; v < 2048; ++v) ASSERT_NEAR(l[v], rows[static_cast<size_t>(i)][static_cast<size_t>(v)], 1e-3f);
  }
  // Clear and run the whole prompt again: bit-identical last logits.
  ASSERT_EQ(trine_context_kv_clear(c), TRINE_OK);
  EXPECT_EQ(trine_context_n_past(c), 0);
  ASSERT_EQ(trine_context_decode(c, ids.data(), n, true), TRINE_OK);
  EXPECT_EQ(std::memcmp(trine_context_get_logits(c, -1), rows.back().data(), sizeof(float) * 2048), 0);
  trine_context_free(c);
  trine_model_free(m);
}

// Quantized KV caches through the C API: close to the F16 cache's logits; the struct layout from
// before kv_type_v was appended is still accepted (V then follows kv_type).
TEST(CApi, QuantizedKvCacheTypes) {
  trine_model* m = LoadModel();
  ASSERT_NE(m, nullptr);
  const std::vector<trine_token> ids = Tokenize(m, "Once upon a time, there was a little dog named Max.");
  const int32_t n = static_cast<int32_t>(ids.size());
  // v is an int so the test can store a value outside the enum (loading such an enum is UB in C++).
  auto last_logits = [&](trine_kv_type k, int32_t v, size_t struct_size) {
    trine_context_params cp = trine_context_default_params();
    cp.struct_size = struct_size;
    cp.n_ctx = 64;
    cp.n_threads = 1;
    cp.kv_type = k;
    std::memcpy(&cp.kv_type_v, &v, sizeof(v));
    trine_context* c = trine_context_create(m, &cp);
    EXPECT_NE(c, nullptr) << trine_last_error();
    std::vector<float> out;
    if (c == nullptr) return out;
    EXPECT_EQ(trine_context_decode(c, ids.data(), n, false), TRINE_OK);
    const float* l = trine_context_get_logits(c, -1);
    if (l != nullptr) out.assign(l, l + trine_model_n_vocab(m));
    trine_context_free(c);
    return out;
  };
  const std::vector<float> f16 = last_logits(TRINE_KV_F16, TRINE_KV_SAME, sizeof(trine_context_params));
  ASSERT_FALSE(f16.empty());
  const struct {
    trine_kv_type k, v;
    float tol;
  } cases[] = {// measured max |diff|: 0.12 (q8_0 K: Q is quantized to Q8_0 for K.Q, as llama.cpp does)
               {TRINE_KV_Q8_0, TRINE_KV_SAME, 0.3f}, {TRINE_KV_Q4_0, TRINE_KV_SAME, 0.75f},
               {TRINE_KV_Q8_0, TRINE_KV_F16, 0.3f}, {TRINE_KV_F16, TRINE_KV_Q4_0, 0.75f}};
  for (const auto& c : cases) {
    SCOPED_TRACE(::testing::Message() << "K " << c.k << " V " << c.v);
    const std::vector<float> got = last_logits(c.k, c.v, sizeof(trine_context_params));
    ASSERT_EQ(got.size(), f16.size());
    float max_diff = 0;
    for (size_t i = 0; i < got.size(); ++i) max_diff = std::max(max_diff, std::fabs(got[i] - f16[i]));
    EXPECT_GT(max_diff, 0.0f) << "the cache type had no effect";
    EXPECT_LT(max_diff, c.tol);
  }
  // Old layout: kv_type_v is not read (here it holds garbage), V follows kv_type.
  const std::vector<float> q8 = last_logits(TRINE_KV_Q8_0, TRINE_KV_SAME, sizeof(trine_context_params));
  const std::vector<float> q8_old =
      last_logits(TRINE_KV_Q8_0, 77, offsetof(trine_context_params, kv_type_v));
  EXPECT_EQ(q8, q8_old);
  trine_model_free(m);
}

TEST(CApi, GenerateStopsFromCallbackAndContinues) {
  trine_model* m = LoadModel();
  trine_context* c = NewContext(m);
  trine_sampler* s = NewGreedySampler();
  Generated all;
  ASSERT_EQ(trine_generate(c, s, "Once upon a time", 10, Collect, &all), 10) << trine_last_error();
  EXPECT_EQ(trine_context_n_past(c), 5 + 10);

  trine_context_kv_clear(c);
  trine_sampler_reset(s);
  Generated part;
  part.stop_after = 4;
  ASSERT_EQ(trine_generate(c, s, "Once upon a time", 10, Collect, &part), 4);
  EXPECT_EQ(trine_context_n_past(c), 5 + 4);  // every emitted token is in the cache
  part.stop_after = -1;
  ASSERT_EQ(trine_generate(c, s, "", 6, Collect, &part), 6) << trine_last_error();
  EXPECT_EQ(part.ids, all.ids);
  EXPECT_EQ(part.text, all.text);
  EXPECT_EQ(all.text.rfind(", there was a little girl named Lily.", 0), 0u) << all.text;
  trine_sampler_free(s);
  trine_context_free(c);
  trine_model_free(m);
}

TEST(CApi, GenerateStopsWhenTheContextIsFull) {
  trine_model* m = LoadModel();
  trine_context* c = NewContext(m, 12);
  trine_sampler_params sp = trine_sampler_default_params();
  sp.temp = 0.0f;
  sp.repeat_penalty = 1.3f;  // keeps the tiny model away from end-of-text for a few tokens
  trine_sampler* s = trine_sampler_create(&sp);
  Generated g;
  const int32_t n = trine_generate(c, s, "Once upon a time", -1, Collect, &g);
  ASSERT_GE(n, 0) << trine_last_error();
  EXPECT_LE(n, 12 - 5 + 1);
  if (n == 12 - 5 + 1) {
    EXPECT_EQ(trine_context_n_past(c), 12);
  }
  EXPECT_EQ(static_cast<int32_t>(g.ids.size()), n);
  trine_sampler_free(s);
  trine_context_free(c);
  trine_model_free(m);
}

TEST(CApi, TokenizeBufferTooSmallConvention) {
  trine_model* m = LoadModel();
  const char* text = "Once upon a time";
  EXPECT_EQ(trine_tokenize(m, text, -1, nullptr, 0, true, false), -5);
  EXPECT_EQ(trine_last_status(), TRINE_ERROR_BUFFER_TOO_SMALL);
  trine_token ids[8] = {-7, -7, -7, -7, -7, -7, -7, -7};
  EXPECT_EQ(trine_tokenize(m, text, -1, ids, 4, true, false), -5);
  EXPECT_EQ(trine_tokenize(m, text, -1, ids, 5, true, false), 5);
  EXPECT_EQ(std::vector<trine_token>(ids, ids + 5), (std::vector<trine_token>{1, 436, 457, 261, 402}));
  EXPECT_EQ(ids[5], -7);
  EXPECT_EQ(trine_tokenize(m, text, 4, ids, 8, false, false), 1);  // "Once" without BOS
  EXPECT_EQ(trine_tokenize(m, nullptr, 0, ids, 8, false, false), 0);
  EXPECT_EQ(trine_tokenize(m, "", 0, nullptr, 0, false, false), 0);

  // Pieces and detokenize: -needed, then exactly needed (no NUL), then room for the NUL.
  char buf[64];
  std::memset(buf, 'x', sizeof(buf));
  const int32_t piece = -trine_token_to_piece(m, 436, nullptr, 0, false);
  ASSERT_GT(piece, 0);
  EXPECT_EQ(trine_last_status(), TRINE_ERROR_BUFFER_TOO_SMALL);
  EXPECT_EQ(trine_token_to_piece(m, 436, buf, piece - 1, false), -piece);
  EXPECT_EQ(trine_token_to_piece(m, 436, buf, piece, false), piece);
  EXPECT_EQ(buf[piece], 'x');
  EXPECT_EQ(trine_token_to_piece(m, 436, buf, piece + 1, false), piece);
  EXPECT_EQ(buf[piece], '\0');
  EXPECT_STREQ(buf, " Once");
  EXPECT_EQ(trine_token_to_piece(m, 1, buf, 64, false), 0);  // BOS is a control token
  EXPECT_GT(trine_token_to_piece(m, 1, buf, 64, true), 0);

  const trine_token story[] = {436, 457, 261, 402};  // no BOS: the leading space is dropped
  const int32_t len = -trine_detokenize(m, story, 4, nullptr, 0, false, false);
  ASSERT_EQ(len, static_cast<int32_t>(std::strlen("Once upon a time")));
  EXPECT_EQ(trine_detokenize(m, story, 4, buf, len - 1, false, false), -len);
  EXPECT_EQ(trine_detokenize(m, story, 4, buf, len + 1, false, false), len);
  EXPECT_STREQ(buf, "Once upon a time");
  trine_model_free(m);
}

TEST(CApi, ModelLoadErrors) {
  trine_model_params mp = trine_model_default_params();
  PlantSentinelError();
  EXPECT_EQ(trine_model_load(nullptr, &mp), nullptr);
  EXPECT_ERROR_SET(TRINE_ERROR_INVALID_ARGUMENT);
  PlantSentinelError();
  EXPECT_EQ(trine_model_load(kModel.c_str(), nullptr), nullptr);
  EXPECT_ERROR_SET(TRINE_ERROR_INVALID_ARGUMENT);
  for (size_t bad : {size_t{0}, sizeof(mp) - 1, sizeof(mp) + 8}) {
    trine_model_params p = mp;
    p.struct_size = bad;
    PlantSentinelError();
    EXPECT_EQ(trine_model_load(kModel.c_str(), &p), nullptr);
    EXPECT_ERROR_SET(TRINE_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(trine_last_error()).find("struct_size"), std::string::npos);
  }
  PlantSentinelError();
  EXPECT_EQ(trine_model_load("/nonexistent/model.gguf", &mp), nullptr);
  EXPECT_ERROR_SET(TRINE_ERROR_IO);
  EXPECT_NE(std::string(trine_last_error()).find("/nonexistent/model.gguf"), std::string::npos);
  PlantSentinelError();
  EXPECT_EQ(trine_model_load(ModelPath("README.md").c_str(), &mp), nullptr);
  EXPECT_ERROR_SET(TRINE_ERROR_INVALID_FILE);
}

TEST(CApi, NullModelGettersAreErrors) {
  const std::vector<std::pair<const char*, std::function<bool()>>> calls = {
      {"n_vocab", [] { return trine_model_n_vocab(nullptr) == TRINE_ERROR_INVALID_ARGUMENT; }},
      {"n_ctx_train", [] { return trine_model_n_ctx_train(nullptr) == TRINE_ERROR_INVALID_ARGUMENT; }},
      {"n_embd", [] { return trine_model_n_embd(nullptr) == TRINE_ERROR_INVALID_ARGUMENT; }},
      {"n_layer", [] { return trine_model_n_layer(nullptr) == TRINE_ERROR_INVALID_ARGUMENT; }},
      {"size", [] { return trine_model_size(nullptr) == 0; }},
      {"n_params", [] { return trine_model_n_params(nullptr) == 0; }},
      {"arch", [] { return trine_model_arch(nullptr) == nullptr; }},
      {"desc", [] { return trine_model_desc(nullptr) == nullptr; }},
      {"bos", [] { return trine_model_token_bos(nullptr) == TRINE_TOKEN_NULL; }},
      {"eos", [] { return trine_model_token_eos(nullptr) == TRINE_TOKEN_NULL; }},
      {"eot", [] { return trine_model_token_eot(nullptr) == TRINE_TOKEN_NULL; }},
      {"is_eog", [] { return !trine_model_token_is_eog(nullptr, 2); }},
      {"add_bos", [] { return !trine_model_add_bos(nullptr); }},
      {"tokenize", [] { return trine_tokenize(nullptr, "a", 1, nullptr, 0, true, false) == TRINE_SIZE_ERROR; }},
      {"token_to_piece",
       [] {
         char b[8];
         return trine_token_to_piece(nullptr, 1, b, 8, false) == TRINE_SIZE_ERROR;
       }},
      {"detokenize",
       [] {
         const trine_token t = 1;
         return trine_detokenize(nullptr, &t, 1, nullptr, 0, false, false) == TRINE_SIZE_ERROR;
       }},
      {"context_create",
       [] {
         trine_context_params cp = trine_context_default_params();
         return trine_context_create(nullptr, &cp) == nullptr;
       }},
  };
  for (const auto& [name, call] : calls) {
    SCOPED_TRACE(name);
    PlantSentinelError();
    EXPECT_TRUE(call());
    EXPECT_ERROR_SET(TRINE_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(trine_last_error()).find("model is NULL"), std::string::npos) << trine_last_error();
  }
}

TEST(CApi, ContextErrors) {
  trine_model* m = LoadModel();
  ASSERT_NE(m, nullptr);
  const trine_context_params good = trine_context_default_params();
  const std::vector<std::pair<const char*, std::function<void(trine_context_params*)>>> bad = {
      {"struct_size 0", [](trine_context_params* p) { p->struct_size = 0; }},
      {"struct_size +4", [](trine_context_params* p) { p->struct_size += 4; }},
      {"n_ctx -1", [](trine_context_params* p) { p->n_ctx = -1; }},
      {"n_ctx huge", [](trine_context_params* p) { p->n_ctx = 1 << 30; }},
      {"n_batch 0", [](trine_context_params* p) { p->n_batch = 0; }},
      {"n_threads -1", [](trine_context_params* p) { p->n_threads = -1; }},
      {"n_threads 5000", [](trine_context_params* p) { p->n_threads = 5000; }},
      {"kv_type 7",  // as a C caller could store it
       [](trine_context_params* p) {
         const int32_t seven = 7;
         std::memcpy(&p->kv_type, &seven, sizeof(seven));
       }},
      {"kv_type_v 9",
       [](trine_context_params* p) {
         const int32_t nine = 9;
         std::memcpy(&p->kv_type_v, &nine, sizeof(nine));
       }},
      {"kv_type SAME", [](trine_context_params* p) { p->kv_type = TRINE_KV_SAME; }},
      {"f32 K with q8_0 V",
       [](trine_context_params* p) {
         p->kv_type = TRINE_KV_F32;
         p->kv_type_v = TRINE_KV_Q8_0;
       }},
  };
  for (const auto& [name, edit] : bad) {
    SCOPED_TRACE(name);
    trine_context_params p = good;
    edit(&p);
    PlantSentinelError();
    EXPECT_EQ(trine_context_create(m, &p), nullptr);
    EXPECT_ERROR_SET(TRINE_ERROR_INVALID_ARGUMENT);
  }
  PlantSentinelError();
  EXPECT_EQ(trine_context_create(m, nullptr), nullptr);
  EXPECT_ERROR_SET(TRINE_ERROR_INVALID_ARGUMENT);

  trine_context* c = NewContext(m, 8);
  ASSERT_NE(c, nullptr);
  const trine_token ok[9] = {1, 436, 457, 261, 402, 2004, 408, 283, 261};
  const trine_token out_of_range[2] = {1, 2048};
  const trine_token negative[2] = {1, -3};
  const std::vector<std::pair<const char*, std::function<bool()>>> calls = {
      {"decode NULL ctx", [&] { return trine_context_decode(nullptr, ok, 1, false) == TRINE_ERROR_INVALID_ARGUMENT; }},
      {"decode NULL tokens", [&] { return trine_context_decode(c, nullptr, 1, false) == TRINE_ERROR_INVALID_ARGUMENT; }},
      {"decode 0 tokens", [&] { return trine_context_decode(c, ok, 0, false) == TRINE_ERROR_INVALID_ARGUMENT; }},
      {"decode -1 tokens", [&] { return trine_context_decode(c, ok, -1, false) == TRINE_ERROR_INVALID_ARGUMENT; }},
      {"decode id 2048", [&] { return trine_context_decode(c, out_of_range, 2, false) == TRINE_ERROR_INVALID_ARGUMENT; }},
      {"decode id -3", [&] { return trine_context_decode(c, negative, 2, false) == TRINE_ERROR_INVALID_ARGUMENT; }},
      {"decode past n_ctx", [&] { return trine_context_decode(c, ok, 9, false) == TRINE_ERROR_INVALID_ARGUMENT; }},
      {"logits before decode", [&] { return trine_context_get_logits(c, 0) == nullptr; }},
      {"logits NULL ctx", [&] { return trine_context_get_logits(nullptr, 0) == nullptr; }},
      {"n_past NULL", [&] { return trine_context_n_past(nullptr) == TRINE_ERROR_INVALID_ARGUMENT; }},
      {"n_ctx NULL", [&] { return trine_context_n_ctx(nullptr) == TRINE_ERROR_INVALID_ARGUMENT; }},
      {"n_threads NULL", [&] { return trine_context_n_threads(nullptr) == TRINE_ERROR_INVALID_ARGUMENT; }},
      {"kv_clear NULL", [&] { return trine_context_kv_clear(nullptr) == TRINE_ERROR_INVALID_ARGUMENT; }},
      {"kv_trim NULL", [&] { return trine_context_kv_trim(nullptr, 0) == TRINE_ERROR_INVALID_ARGUMENT; }},
      {"kv_trim -1", [&] { return trine_context_kv_trim(c, -1) == TRINE_ERROR_INVALID_ARGUMENT; }},
      {"kv_trim past n_past", [&] { return trine_context_kv_trim(c, 1) == TRINE_ERROR_INVALID_ARGUMENT; }},
  };
  for (const auto& [name, call] : calls) {
    SCOPED_TRACE(name);
    PlantSentinelError();
    EXPECT_TRUE(call());
    EXPECT_ERROR_SET(TRINE_ERROR_INVALID_ARGUMENT);
    EXPECT_EQ(trine_context_n_past(c), 0);  // failed calls leave the cache as it was
  }
  ASSERT_EQ(trine_context_decode(c, ok, 8, false), TRINE_OK);
  EXPECT_EQ(trine_context_n_ctx(c), 8);
  EXPECT_EQ(trine_context_n_threads(c), 1);
  PlantSentinelError();
  EXPECT_EQ(trine_context_get_logits(c, 1), nullptr);  // only the last row was kept
  EXPECT_ERROR_SET(TRINE_ERROR_INVALID_ARGUMENT);
  PlantSentinelError();
  EXPECT_EQ(trine_context_decode(c, ok, 1, false), TRINE_ERROR_INVALID_ARGUMENT);  // full
  EXPECT_ERROR_SET(TRINE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(trine_context_n_past(c), 8);
  trine_context_free(c);
  trine_model_free(m);
}

TEST(CApi, TokenizerErrors) {
  trine_model* m = LoadModel();
  ASSERT_NE(m, nullptr);
  trine_token ids[4];
  char buf[16];
  const trine_token bad_ids[2] = {1, 5000};
  const std::vector<std::pair<const char*, std::function<bool()>>> calls = {
      {"tokenize NULL text", [&] { return trine_tokenize(m, nullptr, 3, ids, 4, true, false) == TRINE_SIZE_ERROR; }},
      {"tokenize NULL tokens", [&] { return trine_tokenize(m, "a", 1, nullptr, 4, true, false) == TRINE_SIZE_ERROR; }},
      {"tokenize n_max -1", [&] { return trine_tokenize(m, "a", 1, ids, -1, true, false) == TRINE_SIZE_ERROR; }},
      {"piece id -1", [&] { return trine_token_to_piece(m, -1, buf, 16, false) == TRINE_SIZE_ERROR; }},
      {"piece id 5000", [&] { return trine_token_to_piece(m, 5000, buf, 16, false) == TRINE_SIZE_ERROR; }},
      {"piece NULL buf", [&] { return trine_token_to_piece(m, 436, nullptr, 16, false) == TRINE_SIZE_ERROR; }},
      {"piece size -1", [&] { return trine_token_to_piece(m, 436, buf, -1, false) == TRINE_SIZE_ERROR; }},
      {"detokenize bad id", [&] { return trine_detokenize(m, bad_ids, 2, buf, 16, false, false) == TRINE_SIZE_ERROR; }},
      {"detokenize n -1", [&] { return trine_detokenize(m, bad_ids, -1, buf, 16, false, false) == TRINE_SIZE_ERROR; }},
      {"detokenize NULL tokens", [&] { return trine_detokenize(m, nullptr, 2, buf, 16, false, false) == TRINE_SIZE_ERROR; }},
  };
  for (const auto& [name, call] : calls) {
    SCOPED_TRACE(name);
    PlantSentinelError();
    EXPECT_TRUE(call());
    EXPECT_ERROR_SET(TRINE_ERROR_INVALID_ARGUMENT);
  }
  trine_model_free(m);
}

TEST(CApi, SamplerAndGenerateErrors) {
  const trine_sampler_params good = trine_sampler_default_params();
  const std::vector<std::pair<const char*, std::function<void(trine_sampler_params*)>>> bad = {
      {"struct_size", [](trine_sampler_params* p) { p->struct_size = sizeof(trine_sampler_params) + 8; }},
      {"temp -1", [](trine_sampler_params* p) { p->temp = -1.0f; }},
      {"temp nan", [](trine_sampler_params* p) { p->temp = std::nanf(""); }},
      {"top_p 0", [](trine_sampler_params* p) { p->top_p = 0.0f; }},
      {"min_p 2", [](trine_sampler_params* p) { p->min_p = 2.0f; }},
      {"repeat_penalty 0", [](trine_sampler_params* p) { p->repeat_penalty = 0.0f; }},
      {"repeat_last_n -1", [](trine_sampler_params* p) { p->repeat_last_n = -1; }},
      {"presence_penalty 3", [](trine_sampler_params* p) { p->presence_penalty = 3.0f; }},
      {"frequency_penalty nan", [](trine_sampler_params* p) { p->frequency_penalty = std::nanf(""); }},
  };
  for (const auto& [name, edit] : bad) {
    SCOPED_TRACE(name);
    trine_sampler_params p = good;
    edit(&p);
    PlantSentinelError();
    EXPECT_EQ(trine_sampler_create(&p), nullptr);
    EXPECT_ERROR_SET(TRINE_ERROR_INVALID_ARGUMENT);
  }
  PlantSentinelError();
  EXPECT_EQ(trine_sampler_create(nullptr), nullptr);
  EXPECT_ERROR_SET(TRINE_ERROR_INVALID_ARGUMENT);
  // The layout from before the penalties (struct_size up to seed) is still accepted; its
  // penalties are off whatever lies past it.
  {
    trine_sampler_params old = good;
    old.struct_size = offsetof(trine_sampler_params, presence_penalty);
    old.presence_penalty = 99.0f;  // past the old struct: must not be read
    trine_sampler* s_old = trine_sampler_create(&old);
    EXPECT_NE(s_old, nullptr) << trine_last_error();
    trine_sampler_free(s_old);
  }

  trine_model* m = LoadModel();
  trine_context* c = NewContext(m, 16);
  trine_sampler* s = NewGreedySampler();
  ASSERT_NE(s, nullptr);
  const float logits[3] = {0.1f, 0.9f, 0.3f};
  const std::string long_prompt(400, 'a');
  const std::vector<std::pair<const char*, std::function<bool()>>> calls = {
      {"sample NULL sampler", [&] { return trine_sampler_sample(nullptr, c, -1) < 0; }},
      {"sample NULL ctx", [&] { return trine_sampler_sample(s, nullptr, -1) < 0; }},
      {"sample no logits", [&] { return trine_sampler_sample(s, c, -1) < 0; }},
      {"sample_logits NULL sampler", [&] { return trine_sampler_sample_logits(nullptr, logits, 3) < 0; }},
      {"sample_logits NULL logits", [&] { return trine_sampler_sample_logits(s, nullptr, 3) < 0; }},
      {"sample_logits n 0", [&] { return trine_sampler_sample_logits(s, logits, 0) < 0; }},
      {"accept NULL", [&] { return trine_sampler_accept(nullptr, 1) < 0; }},
      {"accept -1", [&] { return trine_sampler_accept(s, -1) < 0; }},
      {"reset NULL", [&] { return trine_sampler_reset(nullptr) < 0; }},
      {"generate NULL ctx", [&] { return trine_generate(nullptr, s, "a", 1, nullptr, nullptr) < 0; }},
      {"generate NULL sampler", [&] { return trine_generate(c, nullptr, "a", 1, nullptr, nullptr) < 0; }},
      {"generate nothing to continue", [&] { return trine_generate(c, s, "", 1, nullptr, nullptr) < 0; }},
      {"generate NULL prompt", [&] { return trine_generate(c, s, nullptr, 1, nullptr, nullptr) < 0; }},
      {"generate prompt too long", [&] { return trine_generate(c, s, long_prompt.c_str(), 1, nullptr, nullptr) < 0; }},
  };
  for (const auto& [name, call] : calls) {
    SCOPED_TRACE(name);
    // accept NULL is the sentinel itself; it is checked by PlantSentinelError.
    if (std::string(name) != "accept NULL") PlantSentinelError();
    EXPECT_TRUE(call());
    if (std::string(name) != "accept NULL") EXPECT_ERROR_SET(TRINE_ERROR_INVALID_ARGUMENT);
  }
  EXPECT_EQ(trine_sampler_sample_logits(s, logits, 3), 1);  // greedy: argmax
  EXPECT_EQ(trine_context_n_past(c), 0);
  trine_sampler_free(s);
  trine_context_free(c);
  trine_model_free(m);
}

TEST(CApi, ChatTemplates) {
  const trine_chat_message msgs[] = {{"system", "Be brief."}, {"user", "Hi"}};
  char buf[256];
  const int32_t n = trine_chat_apply_template(nullptr, "chatml", msgs, 2, true, buf, sizeof(buf));
  const std::string want = "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n";
  ASSERT_EQ(n, static_cast<int32_t>(want.size())) << trine_last_error();
  EXPECT_EQ(std::string(buf), want);
  EXPECT_EQ(trine_chat_apply_template(nullptr, "chatml", msgs, 2, true, buf, 10), -n);
  EXPECT_EQ(trine_last_status(), TRINE_ERROR_BUFFER_TOO_SMALL);

  trine_model* m = LoadModel();
  // llama3 writes the model's BOS text at the start.
  const int32_t n3 = trine_chat_apply_template(m, "llama3", msgs + 1, 1, true, buf, sizeof(buf));
  ASSERT_GT(n3, 0);
  EXPECT_EQ(std::string(buf, static_cast<size_t>(n3)),
            "<s><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_STREQ(trine_chat_template_name(m, nullptr), "chatml");  // no template in the file
  EXPECT_STREQ(trine_chat_template_name(nullptr, "llama-3"), "llama3");
  EXPECT_EQ(trine_chat_end_of_turn(m, nullptr, buf, sizeof(buf)), 11);
  EXPECT_STREQ(buf, "<|im_end|>\n");

  // A Jinja template's text in place of a name: rendered with the model's bos_token.
  const char* jinja = "{{ bos_token }}{% for m in messages %}<{{ m.role }}>{{ m.content | trim }}</{{ m.role }}>{% endfor %}"
                      "{% if add_generation_prompt %}<assistant>{% endif %}";
  const int32_t nj = trine_chat_apply_template(m, jinja, msgs, 2, true, buf, sizeof(buf));
  ASSERT_GT(nj, 0) << trine_last_error();
  EXPECT_EQ(std::string(buf, static_cast<size_t>(nj)), "<s><system>Be brief.</system><user>Hi</user><assistant>");
  EXPECT_STREQ(trine_chat_template_name(m, jinja), "jinja");
  const int32_t ne = trine_chat_end_of_turn(m, jinja, buf, sizeof(buf));
  ASSERT_GE(ne, 0) << trine_last_error();
  EXPECT_EQ(std::string(buf, static_cast<size_t>(ne)), "</assistant>");
  // A template that refuses the conversation: INVALID_ARGUMENT with the template's own words.
  EXPECT_EQ(trine_chat_apply_template(m, "{{ raise_exception('System role not supported') }}", msgs, 2, true, buf, 256),
            TRINE_SIZE_ERROR);
  EXPECT_EQ(trine_last_status(), TRINE_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(trine_last_error()).find("System role not supported"), std::string::npos) << trine_last_error();
  EXPECT_EQ(trine_chat_apply_template(m, "{% if %}", msgs, 2, true, buf, 256), TRINE_SIZE_ERROR);
  EXPECT_NE(std::string(trine_last_error()).find("line 1"), std::string::npos) << trine_last_error();

  const trine_chat_message null_role[] = {{nullptr, "x"}};
  const trine_chat_message tool_role[] = {{"tool", "x"}};
  const std::vector<std::pair<const char*, std::function<bool()>>> calls = {
      {"unknown name", [&] { return trine_chat_apply_template(m, "jinja", msgs, 2, true, buf, 256) == TRINE_SIZE_ERROR; }},
      {"no model no name", [&] { return trine_chat_apply_template(nullptr, nullptr, msgs, 2, true, buf, 256) == TRINE_SIZE_ERROR; }},
      {"NULL messages", [&] { return trine_chat_apply_template(m, nullptr, nullptr, 2, true, buf, 256) == TRINE_SIZE_ERROR; }},
      {"NULL role", [&] { return trine_chat_apply_template(m, nullptr, null_role, 1, true, buf, 256) == TRINE_SIZE_ERROR; }},
      {"unknown role", [&] { return trine_chat_apply_template(m, "llama2", tool_role, 1, true, buf, 256) == TRINE_SIZE_ERROR; }},
      {"NULL buf", [&] { return trine_chat_apply_template(m, nullptr, msgs, 2, true, nullptr, 256) == TRINE_SIZE_ERROR; }},
      {"name unknown", [&] { return trine_chat_template_name(nullptr, "nope") == nullptr; }},
      {"end of turn no model", [&] { return trine_chat_end_of_turn(nullptr, nullptr, buf, 256) == TRINE_SIZE_ERROR; }},
  };
  for (const auto& [name, call] : calls) {
    SCOPED_TRACE(name);
    PlantSentinelError();
    EXPECT_TRUE(call());
    EXPECT_ERROR_SET(TRINE_ERROR_INVALID_ARGUMENT);
  }
  trine_model_free(m);
}

struct Progress {
  std::vector<float> seen;
  int cancel_at = -1;  // return false on this call (0-based)
};

bool OnProgress(float p, void* user) {
  auto* pr = static_cast<Progress*>(user);
  pr->seen.push_back(p);
  return static_cast<int>(pr->seen.size()) - 1 != pr->cancel_at;
}

TEST(CApi, ProgressCallbackReportsAndCancels) {
  trine_model_params mp = trine_model_default_params();
  Progress full;
  mp.progress_callback = OnProgress;
  mp.progress_user_data = &full;
  trine_model* m = trine_model_load(kModel.c_str(), &mp);
  ASSERT_NE(m, nullptr) << trine_last_error();
  ASSERT_GE(full.seen.size(), 2u);
  for (size_t i = 1; i < full.seen.size(); ++i) EXPECT_GT(full.seen[i], full.seen[i - 1]);
  EXPECT_FLOAT_EQ(full.seen.back(), 1.0f);
  trine_model_free(m);

  for (int at : {0, 1}) {
    Progress cancel;
    cancel.cancel_at = at;
    mp.progress_user_data = &cancel;
    PlantSentinelError();
    EXPECT_EQ(trine_model_load(kModel.c_str(), &mp), nullptr);
    EXPECT_ERROR_SET(TRINE_ERROR_CANCELLED);
    EXPECT_EQ(static_cast<int>(cancel.seen.size()), at + 1);  // no call after the cancel
  }
}

struct LogSink {
  std::vector<std::pair<trine_log_level, std::string>> messages;
};

void OnLog(trine_log_level level, const char* message, void* user) {
  static_cast<LogSink*>(user)->messages.emplace_back(level, message);
}

TEST(CApi, LogCallbackReceivesLevels) {
  LogSink sink;
  trine_log_set(OnLog, &sink);
  trine_model* m = LoadModel();
  ASSERT_NE(m, nullptr);
  trine_context* c = NewContext(m, trine_model_n_ctx_train(m) * 2);
  trine_log_set(nullptr, nullptr);
  ASSERT_NE(c, nullptr);
  bool info = false, warn = false;
  for (const auto& [level, text] : sink.messages) {
    if (level == TRINE_LOG_INFO && text.find(trine_model_desc(m)) != std::string::npos) info = true;
    if (level == TRINE_LOG_WARN && text.find("longer than the model was trained for") != std::string::npos) warn = true;
  }
  EXPECT_TRUE(info);
  EXPECT_TRUE(warn);
  const size_t n = sink.messages.size();
  trine_context_free(c);
  c = NewContext(m, trine_model_n_ctx_train(m) * 2);  // default sink again: nothing reaches `sink`
  EXPECT_EQ(sink.messages.size(), n);
  trine_context_free(c);
  trine_model_free(m);
}

}  // namespace
