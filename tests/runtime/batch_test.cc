// Several sequences in one forward pass (Context::Decode(Batch)) against each sequence alone: the
// same greedy tokens and the same logits; forked prefixes; the KV pool's accounting and its
// exhaustion, which fails the call and leaves every sequence as it was.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "model/model.h"
#include "runtime/context.h"

namespace trine {
namespace {

std::unique_ptr<Model> Load(const std::string& name) {
  std::unique_ptr<Model> m;
  Status st = Model::Load(testing::ModelPath(name), ModelLoadOptions(), &m);
  EXPECT_TRUE(st.ok()) << st.message();
  return m;
}

std::unique_ptr<Context> MakeContext(const Model& m, int n_seq_max, int kv_pool, int n_threads = 2,
                                     KvType kv = KvType::kF16) {
  ContextParams p;
  p.n_ctx = 256;
  p.n_seq_max = n_seq_max;
  p.kv_pool = kv_pool;
  p.n_threads = n_threads;
  p.kv_type = kv;
  std::unique_ptr<Context> ctx;
  Status st = Context::Create(m, p, &ctx);
  EXPECT_TRUE(st.ok()) << st.message();
  return ctx;
}

int Argmax(const float* v, int n) {
  return static_cast<int>(std::max_element(v, v + n) - v);  // lowest id on ties
}

std::vector<int32_t> RandomTokens(const Model& m, int n, uint32_t seed) {
  return testing::RandomTokenIds(m.config().n_vocab, n, seed);
}

// Logits after the prompt and after each of `steps` greedy tokens, for one sequence alone.
struct AloneRun {
  std::vector<std::vector<float>> logits;
  std::vector<int32_t> tokens;
};

AloneRun Alone(const Model& m, const std::vector<int32_t>& prompt, int steps, KvType kv = KvType::kF16) {
  auto ctx = MakeContext(m, 1, 0, 2, kv);
  AloneRun r;
  Status st = ctx->Decode(prompt.data(), static_cast<int>(prompt.size()), false);
  EXPECT_TRUE(st.ok()) << st.message();
  for (int s = 0;; ++s) {
    r.logits.emplace_back(ctx->logits(0), ctx->logits(0) + ctx->n_vocab());
    if (s == steps) break;
    const int32_t next = Argmax(ctx->logits(0), ctx->n_vocab());
    r.tokens.push_back(next);
    st = ctx->Decode(&next, 1, false);
    EXPECT_TRUE(st.ok()) << st.message();
  }
  return r;
}

// max |a - b| / max |a|
double RelDiff(const std::vector<float>& a, const float* b) {
  double d = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    d = std::max(d, static_cast<double>(std::fabs(a[i] - b[i])));
    scale = std::max(scale, static_cast<double>(std::fabs(a[i])));
  }
  return d / std::max(scale, 1e-30);
}

struct BatchCase {
  const char* model;
  KvType kv;
};

class BatchedDecode : public ::testing::TestWithParam<BatchCase> {};

// Four sequences of different prompt lengths: their prompts in one batch, then greedy decode of
// all four together, one token each per step. Each gets the tokens and logits it gets alone.
TEST_P(BatchedDecode, EachSequenceGetsWhatItGetsAlone) {
  auto m = Load(GetParam().model);
  ASSERT_TRUE(m);
  const int n_seq = 4, steps = 6;
  const int lens[n_seq] = {5, 17, 1, 9};
  std::vector<std::vector<int32_t>> prompts;
  std::vector<AloneRun> alone;
  for (int s = 0; s < n_seq; ++s) {
    prompts.push_back(RandomTokens(*m, lens[s], 100u + static_cast<uint32_t>(s)));
    alone.push_back(Alone(*m, prompts.back(), steps, GetParam().kv));
  }
  auto ctx = MakeContext(*m, n_seq, 0, 2, GetParam().kv);
  Batch b;
  // Interleaved: sequence 1's tokens between the others' (order within a sequence kept).
  for (int i = 0; i < 17; ++i) {
    for (int s = 0; s < n_seq; ++s) {
      if (i < lens[s]) b.Add(prompts[static_cast<size_t>(s)][static_cast<size_t>(i)], -1, s, i == lens[s] - 1);
    }
  }
  ASSERT_TRUE(ctx->Decode(b).ok());
  int bit_equal = 0, compared = 0;
  for (int step = 0; step <= steps; ++step) {
    std::vector<int32_t> next(n_seq);
    for (int s = 0; s < n_seq; ++s) {
      int idx = -1;
      for (int i = 0; i < b.size(); ++i) {
        if (b.seq[static_cast<size_t>(i)] == s && b.logits[static_cast<size_t>(i)]) idx = i;
      }
      ASSERT_GE(ctx->LogitsRow(idx), 0);
      const float* got = ctx->logits(ctx->LogitsRow(idx));
      const auto& want = alone[static_cast<size_t>(s)].logits[static_cast<size_t>(step)];
      EXPECT_LE(RelDiff(want, got), 1e-4) << "sequence " << s << " step " << step;
      bit_equal += std::equal(want.begin(), want.end(), got) ? 1 : 0;
      ++compared;
      next[static_cast<size_t>(s)] = Argmax(got, ctx->n_vocab());
      if (step < steps) {
        EXPECT_EQ(next[static_cast<size_t>(s)], alone[static_cast<size_t>(s)].tokens[static_cast<size_t>(step)]);
      }
    }
    if (step == steps) break;
    b.Clear();
    for (int s = n_seq - 1; s >= 0; --s) b.Add(next[static_cast<size_t>(s)], -1, s, true);  // any order
    ASSERT_TRUE(ctx->Decode(b).ok());
  }
  for (int s = 0; s < n_seq; ++s) EXPECT_EQ(ctx->SeqPos(s), lens[s] + steps);
  // Recorded for the docs: which paths give the alone bits (the kernels compute each row alone).
  RecordProperty("bit_equal_logit_rows", bit_equal);
  RecordProperty("compared_logit_rows", compared);
  EXPECT_EQ(bit_equal, compared) << "rows that differ in bits from the sequence alone";
}

INSTANTIATE_TEST_SUITE_P(Models, BatchedDecode,
                         ::testing::Values(BatchCase{"bitnet-tiny-stories-TQ2_0-f16emb.gguf", KvType::kF16},
                                           BatchCase{"tiny-tern-q4_0.gguf", KvType::kF16},
                                           BatchCase{"tiny-tern-tq2_0.gguf", KvType::kQ8_0},
                                           BatchCase{"stories260K.gguf", KvType::kF32}),
                         [](const auto& param_info) {
                           std::string n = param_info.param.model;
                           n = n.substr(0, n.find('.')) + "_" + KvTypeName(param_info.param.kv);
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

// A common prefix computed once in sequence 0 and forked to three others, each continuing with
// its own suffix (the blocks are shared, the partly filled last one copied on write): each gets
// the logits of the prefix and suffix run alone, and sequence 0 is unchanged by the others.
TEST(BatchedDecodeFork, ForkedPrefixesGiveTheLogitsOfSeparateRuns) {
  auto m = Load("bitnet-tiny-stories-TQ2_0-f16emb.gguf");
  ASSERT_TRUE(m);
  const std::vector<int32_t> prefix = RandomTokens(*m, 21, 7);  // 16 + 5: a shared partial block
  auto ctx = MakeContext(*m, 4, 0);
  ASSERT_TRUE(ctx->Decode(prefix.data(), static_cast<int>(prefix.size()), false).ok());
  const int free_after_prefix = ctx->kv().n_free_blocks();
  for (int s = 1; s < 4; ++s) ASSERT_TRUE(ctx->SeqFork(0, s, static_cast<int>(prefix.size())).ok());
  EXPECT_EQ(ctx->kv().n_free_blocks(), free_after_prefix) << "a fork copies no block";
  Batch b;
  std::vector<std::vector<int32_t>> suffix;
  for (int s = 0; s < 4; ++s) {
    suffix.push_back(RandomTokens(*m, 3 + s, 50u + static_cast<uint32_t>(s)));
    for (size_t i = 0; i < suffix.back().size(); ++i) b.Add(suffix.back()[i], -1, s, i + 1 == suffix.back().size());
  }
  ASSERT_TRUE(ctx->Decode(b).ok());
  for (int s = 0; s < 4; ++s) {
    std::vector<int32_t> whole = prefix;
    whole.insert(whole.end(), suffix[static_cast<size_t>(s)].begin(), suffix[static_cast<size_t>(s)].end());
    const AloneRun r = Alone(*m, whole, 0);
    int idx = -1;
    for (int i = 0; i < b.size(); ++i) {
      if (b.seq[static_cast<size_t>(i)] == s && b.logits[static_cast<size_t>(i)]) idx = i;
    }
    EXPECT_LE(RelDiff(r.logits[0], ctx->logits(ctx->LogitsRow(idx))), 1e-4) << "sequence " << s;
  }
  // Each sequence wrote into the shared partial block: the three forks copied it.
  EXPECT_EQ(ctx->kv().n_free_blocks(), free_after_prefix - 3);
}

TEST(KvPool, RemovingASequenceReturnsItsBlocks) {
  auto m = Load("bitnet-tiny-stories-TQ2_0-f16emb.gguf");
  ASSERT_TRUE(m);
  auto ctx = MakeContext(*m, 3, 128);
  const int total = ctx->kv().n_blocks();
  EXPECT_EQ(total, 128 / kKvBlockPositions);
  EXPECT_EQ(ctx->kv().n_free_blocks(), total) << "several sequences: no block is taken before use";
  Batch b;
  for (int i = 0; i < 40; ++i) b.Add(5 + i, -1, 1, false);  // 3 blocks
  for (int i = 0; i < 10; ++i) b.Add(9 + i, -1, 2, i == 9);  // 1 block
  ASSERT_TRUE(ctx->Decode(b).ok());
  EXPECT_EQ(ctx->kv().n_free_blocks(), total - 4);
  ctx->SeqTruncate(1, 16);  // keeps exactly one block
  EXPECT_EQ(ctx->kv().n_free_blocks(), total - 2);
  EXPECT_EQ(ctx->SeqPos(1), 16);
  ctx->SeqTruncate(1, 0);
  ctx->SeqTruncate(2, 0);
  EXPECT_EQ(ctx->kv().n_free_blocks(), total);
  EXPECT_EQ(ctx->SeqPos(2), 0);
}

// A pool too small for a batch: the call fails with "KV pool full" and changes nothing; the other
// sequences then decode as if it had never been tried.
TEST(KvPool, ExhaustionFailsThatCallOnlyAndHurtsNoNeighbour) {
  auto m = Load("bitnet-tiny-stories-TQ2_0-f16emb.gguf");
  ASSERT_TRUE(m);
  auto ctx = MakeContext(*m, 2, 64);  // 4 blocks
  const std::vector<int32_t> p0 = RandomTokens(*m, 20, 1), big = RandomTokens(*m, 40, 2);
  ASSERT_TRUE(ctx->Decode(p0.data(), static_cast<int>(p0.size()), false).ok());  // 2 blocks
  const int free_before = ctx->kv().n_free_blocks();
  Batch b;
  for (size_t i = 0; i < big.size(); ++i) b.Add(big[i], -1, 1, i + 1 == big.size());  // 3 blocks
  Status st = ctx->Decode(b);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kOutOfMemory);
  EXPECT_NE(st.message().find("KV pool full"), std::string::npos) << st.message();
  EXPECT_EQ(ctx->kv().n_free_blocks(), free_before);
  EXPECT_EQ(ctx->SeqPos(1), 0);
  EXPECT_EQ(ctx->SeqPos(0), 20);
  // Sequence 0 continues as alone.
  const int32_t next = 42;
  ASSERT_TRUE(ctx->Decode(&next, 1, false).ok());
  std::vector<int32_t> whole = p0;
  whole.push_back(next);
  const AloneRun r = Alone(*m, whole, 0);
  EXPECT_LE(RelDiff(r.logits[0], ctx->logits(0)), 1e-4);
}

TEST(BatchValidation, BadSequencesPositionsAndTokensAreRejectedByName) {
  auto m = Load("bitnet-tiny-stories-TQ2_0-f16emb.gguf");
  ASSERT_TRUE(m);
  auto ctx = MakeContext(*m, 2, 0);
  const auto fails_with = [&](const Batch& b, const std::string& text) {
    Status st = ctx->Decode(b);
    EXPECT_FALSE(st.ok());
    EXPECT_NE(st.message().find(text), std::string::npos) << st.message();
    EXPECT_EQ(ctx->SeqPos(0), 0);
    EXPECT_EQ(ctx->SeqPos(1), 0);
  };
  Batch b;
  fails_with(b, "no tokens");
  b.Add(5, -1, 2, true);
  fails_with(b, "sequence id 2");
  b.Clear();
  b.Add(5, 0, 0, false);
  b.Add(6, 2, 0, true);  // skips position 1
  fails_with(b, "continues at 1");
  b.Clear();
  b.Add(-3, -1, 1, true);
  fails_with(b, "token id -3");
  b.Clear();
  for (int i = 0; i < 257; ++i) b.Add(5, -1, 1, false);
  fails_with(b, "context is full");
  EXPECT_EQ(ctx->SeqFork(1, 1, 0).ok(), false);
  EXPECT_EQ(ctx->SeqFork(0, 1, 3).ok(), false) << "sequence 0 holds no position";
}

}  // namespace
}  // namespace trine
