// Continuous batching (runtime/scheduler.h): requests that join and leave a running batch, prompts
// read in chunks beside other sequences' decode, prefixes reused from finished and running
// requests, cancellation, a full pool, and requests submitted from another thread. Every request
// must get the greedy tokens it gets alone on a context of its own.
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "common/test_util.h"
#include "model/model.h"
#include "runtime/context.h"
#include "runtime/scheduler.h"

namespace trine {
namespace {

const char* kModel = "bitnet-tiny-stories-TQ2_0-f16emb.gguf";

std::unique_ptr<Model> Load() {
  std::unique_ptr<Model> m;
  Status st = Model::Load(testing::ModelPath(kModel), ModelLoadOptions(), &m);
  EXPECT_TRUE(st.ok()) << st.message();
  return m;
}

std::unique_ptr<Context> MakeContext(const Model& m, int n_seq_max, int kv_pool = 0) {
  ContextParams p;
  p.n_ctx = 256;
  p.n_seq_max = n_seq_max;
  p.kv_pool = kv_pool;
  p.n_threads = 2;
  std::unique_ptr<Context> ctx;
  Status st = Context::Create(m, p, &ctx);
  EXPECT_TRUE(st.ok()) << st.message();
  return ctx;
}

std::vector<int32_t> RandomTokens(const Model& m, int n, uint32_t seed) {
  return testing::RandomTokenIds(m.config().n_vocab, n, seed);
}

// Greedy tokens of `prompt` alone on a fresh context, as the scheduler ends them: at an
// end-of-generation token (not included) or after n_predict.
std::vector<int32_t> Alone(const Model& m, const std::vector<int32_t>& prompt, int n_predict) {
  auto ctx = MakeContext(m, 1);
  std::vector<int32_t> out;
  Status st = ctx->Decode(prompt.data(), static_cast<int>(prompt.size()), false);
  EXPECT_TRUE(st.ok()) << st.message();
  while (static_cast<int>(out.size()) < n_predict) {
    const int32_t next = ArgmaxLowestId(ctx->logits(0), ctx->n_vocab());
    if (m.vocab().IsEog(next)) break;
    out.push_back(next);
    st = ctx->Decode(&next, 1, false);
    EXPECT_TRUE(st.ok()) << st.message();
  }
  return out;
}

// What the callbacks of one request saw.
struct Seen {
  std::vector<int32_t> tokens;
  std::vector<uint64_t> token_steps;  // the scheduler's step count when each token came
  bool done = false;
  RequestResult result;
};

Request Greedy(const std::vector<int32_t>& prompt, int n_predict, Seen* seen, const Scheduler* sched = nullptr) {
  Request r;
  r.prompt = prompt;
  r.n_predict = n_predict;
  r.sampling.temp = 0;
  r.on_token = [seen, sched](const TokenEvent& e) {
    seen->tokens.push_back(e.token);
    seen->token_steps.push_back(sched != nullptr ? sched->stats().steps : 0);
    return true;
  };
  r.on_done = [seen](const RequestResult& res) {
    EXPECT_FALSE(seen->done) << "on_done called twice";
    seen->done = true;
    seen->result = res;
  };
  return r;
}

// Steps until nothing is left to run (bounded).
void RunUntilIdle(Scheduler& s, int max_steps = 2000) {
  bool worked = true;
  for (int i = 0; i < max_steps && worked; ++i) s.Step(&worked);
  EXPECT_FALSE(worked) << "still busy after " << max_steps << " steps";
}

// Six requests on three sequences with a 16-token step: prompts longer than a step are read in
// chunks beside the others' decode, later requests start as earlier ones end, and every request
// gets the tokens it gets alone.
TEST(Scheduler, RequestsJoinAndLeaveAndEachGetsItsAloneTokens) {
  auto m = Load();
  ASSERT_TRUE(m);
  auto ctx = MakeContext(*m, 3);
  SchedulerOptions opt;
  opt.step_tokens = 16;
  Scheduler sched(ctx.get(), opt);
  const int lens[] = {5, 40, 1, 23, 16, 9};
  const int n_predict[] = {12, 6, 9, 3, 14, 7};
  std::vector<Seen> seen(6);
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 6; ++i) {
    prompts.push_back(RandomTokens(*m, lens[i], 300u + static_cast<uint32_t>(i)));
    uint64_t id = 0;
    ASSERT_TRUE(sched.Submit(Greedy(prompts.back(), n_predict[i], &seen[static_cast<size_t>(i)]), &id).ok());
  }
  RunUntilIdle(sched);
  for (int i = 0; i < 6; ++i) {
    const Seen& s = seen[static_cast<size_t>(i)];
    ASSERT_TRUE(s.done) << "request " << i;
    EXPECT_EQ(s.tokens, Alone(*m, prompts[static_cast<size_t>(i)], n_predict[i])) << "request " << i;
    EXPECT_EQ(s.result.n_generated, static_cast<int>(s.tokens.size()));
    EXPECT_EQ(s.result.n_prompt, lens[i]);
    EXPECT_TRUE(s.result.reason == FinishReason::kLength || s.result.reason == FinishReason::kStop);
  }
  const SchedulerStats st = sched.stats();
  EXPECT_EQ(st.requests_done, 6u);
  EXPECT_EQ(st.running, 0);
  EXPECT_EQ(st.waiting, 0);
  EXPECT_EQ(st.prompt_tokens + st.cached_tokens, 94u);
}

// A 120-token prompt arrives while a sequence decodes: with a 16-token step the prompt takes
// several steps, and the decoding sequence still gets a token at every one of them.
TEST(Scheduler, ALongPromptDoesNotStallTheOthersDecode) {
  auto m = Load();
  ASSERT_TRUE(m);
  auto ctx = MakeContext(*m, 2);
  SchedulerOptions opt;
  opt.step_tokens = 16;
  Scheduler sched(ctx.get(), opt);
  Seen a, b;
  uint64_t id = 0;
  const auto prompt_a = RandomTokens(*m, 4, 7);
  const auto prompt_b = RandomTokens(*m, 120, 8);
  Request ra = Greedy(prompt_a, 60, &a, &sched);
  ra.ignore_eog = true;  // keeps decoding through B's whole prompt
  ASSERT_TRUE(sched.Submit(std::move(ra), &id).ok());
  bool worked = false;
  for (int i = 0; i < 3; ++i) sched.Step(&worked);
  ASSERT_FALSE(a.tokens.empty());
  const uint64_t joined = sched.stats().steps;
  ASSERT_TRUE(sched.Submit(Greedy(prompt_b, 2, &b, &sched), &id).ok());
  while (b.tokens.empty() && !b.done && !a.done) sched.Step(&worked);
  ASSERT_FALSE(b.tokens.empty());
  const uint64_t b_first = b.token_steps[0];
  EXPECT_GE(b_first - joined, 8u) << "120 prompt tokens at <= 15 per step beside a decode";
  // A got one token in every step from B's arrival to B's first token.
  std::map<uint64_t, int> per_step;
  for (uint64_t s : a.token_steps) ++per_step[s];
  for (uint64_t s = joined + 1; s <= b_first; ++s) EXPECT_EQ(per_step[s], 1) << "step " << s;
  RunUntilIdle(sched);
  EXPECT_EQ(b.tokens, Alone(*m, prompt_b, 2));
}

// A finished request's KV is a cached prefix: a prompt that begins the same way starts from it.
// A running request's KV is shared by fork. Either way the tokens are those of a fresh run.
TEST(Scheduler, PromptsReuseCachedAndRunningPrefixes) {
  auto m = Load();
  ASSERT_TRUE(m);
  auto ctx = MakeContext(*m, 2);
  Scheduler sched(ctx.get(), SchedulerOptions());
  const auto system = RandomTokens(*m, 40, 11);
  auto with_tail = [&](uint32_t seed, int n) {
    auto p = system;
    const auto tail = RandomTokens(*m, n, seed);
    p.insert(p.end(), tail.begin(), tail.end());
    return p;
  };
  const auto p1 = with_tail(12, 6), p2 = with_tail(13, 3), p3 = with_tail(14, 5);
  Seen s1, s2, s3;
  uint64_t id = 0;
  ASSERT_TRUE(sched.Submit(Greedy(p1, 5, &s1), &id).ok());
  RunUntilIdle(sched);
  EXPECT_EQ(s1.result.n_cached, 0);
  // From the finished request's cache, in place.
  ASSERT_TRUE(sched.Submit(Greedy(p2, 30, &s2), &id).ok());
  bool worked = false;
  sched.Step(&worked);
  sched.Step(&worked);
  ASSERT_FALSE(s2.done);
  // From the running request, by fork (the other sequence's cache holds only the same prefix).
  ASSERT_TRUE(sched.Submit(Greedy(p3, 6, &s3), &id).ok());
  RunUntilIdle(sched);
  EXPECT_EQ(s2.result.n_cached, 40);
  EXPECT_EQ(s3.result.n_cached, 40);
  EXPECT_EQ(s1.tokens, Alone(*m, p1, 5));
  EXPECT_EQ(s2.tokens, Alone(*m, p2, 30));
  EXPECT_EQ(s3.tokens, Alone(*m, p3, 6));
  EXPECT_EQ(sched.stats().cached_tokens, 80u);
}

TEST(Scheduler, CancelEndsTheRequestAndFreesItsBlocks) {
  auto m = Load();
  ASSERT_TRUE(m);
  auto ctx = MakeContext(*m, 2, 128);
  Scheduler sched(ctx.get(), SchedulerOptions());
  const int total = ctx->kv().n_blocks();
  Seen running, queued;
  uint64_t id_running = 0, id_queued = 0;
  ASSERT_TRUE(sched.Submit(Greedy(RandomTokens(*m, 30, 3), 50, &running), &id_running).ok());
  bool worked = false;
  sched.Step(&worked);
  sched.Step(&worked);
  EXPECT_LT(ctx->kv().n_free_blocks(), total);
  sched.Cancel(id_running);
  sched.Step(&worked);
  ASSERT_TRUE(running.done);
  EXPECT_EQ(running.result.reason, FinishReason::kCancelled);
  EXPECT_EQ(ctx->kv().n_free_blocks(), total);
  // A request cancelled before it starts ends without running.
  SchedulerOptions one;
  Scheduler busy(ctx.get(), one);
  Seen a;
  uint64_t id_a = 0;
  ASSERT_TRUE(busy.Submit(Greedy(RandomTokens(*m, 3, 4), 2, &a), &id_a).ok());
  ASSERT_TRUE(busy.Submit(Greedy(RandomTokens(*m, 3, 5), 2, &queued), &id_queued).ok());
  busy.Cancel(id_queued);
  RunUntilIdle(busy);
  ASSERT_TRUE(queued.done);
  EXPECT_EQ(queued.result.reason, FinishReason::kCancelled);
  EXPECT_TRUE(queued.tokens.empty());
  EXPECT_TRUE(a.done);
  EXPECT_EQ(a.result.reason == FinishReason::kCancelled, false);
}

// Two requests that together need more blocks than the pool has: the younger one fails with "KV
// pool full" when the pool runs dry, its blocks go back, and the older one finishes as if alone.
TEST(Scheduler, AFullPoolFailsOneRequestAndSparesItsNeighbour) {
  auto m = Load();
  ASSERT_TRUE(m);
  auto ctx = MakeContext(*m, 2, 96);  // 6 blocks of 16 positions
  Scheduler sched(ctx.get(), SchedulerOptions());
  const auto pa = RandomTokens(*m, 20, 21), pb = RandomTokens(*m, 20, 22);
  Seen a, b;
  uint64_t id = 0;
  // Past end of generation, so that both need 60 positions (4 blocks each).
  Request ra = Greedy(pa, 40, &a), rb = Greedy(pb, 40, &b);
  ra.ignore_eog = rb.ignore_eog = true;
  ASSERT_TRUE(sched.Submit(std::move(ra), &id).ok());
  ASSERT_TRUE(sched.Submit(std::move(rb), &id).ok());
  RunUntilIdle(sched);
  ASSERT_TRUE(a.done && b.done);
  EXPECT_NE(a.result.reason, FinishReason::kError) << a.result.error.message();
  ASSERT_EQ(b.result.reason, FinishReason::kError);
  EXPECT_EQ(b.result.error.code(), StatusCode::kOutOfMemory);
  EXPECT_NE(b.result.error.message().find("KV pool full"), std::string::npos) << b.result.error.message();
  const auto alone = Alone(*m, pa, 40);
  ASSERT_LE(alone.size(), a.tokens.size());
  EXPECT_TRUE(std::equal(alone.begin(), alone.end(), a.tokens.begin()));
}

TEST(Scheduler, BadRequestsAreRefusedByName) {
  auto m = Load();
  ASSERT_TRUE(m);
  auto ctx = MakeContext(*m, 1, 64);
  SchedulerOptions opt;
  opt.max_waiting = 1;
  Scheduler sched(ctx.get(), opt);
  Seen s;
  uint64_t id = 0;
  Status st = sched.Submit(Greedy({}, 4, &s), &id);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("empty"), std::string::npos);
  st = sched.Submit(Greedy({1, ctx->n_vocab()}, 4, &s), &id);
  EXPECT_NE(st.message().find("prompt token 1"), std::string::npos) << st.message();
  st = sched.Submit(Greedy(RandomTokens(*m, 300, 1), 4, &s), &id);
  EXPECT_NE(st.message().find("context holds 256"), std::string::npos) << st.message();
  st = sched.Submit(Greedy(RandomTokens(*m, 70, 1), 4, &s), &id);
  EXPECT_NE(st.message().find("KV pool"), std::string::npos) << st.message();
  Request bad = Greedy({1, 2}, 4, &s);
  bad.sampling.top_p = 2;
  EXPECT_EQ(sched.Submit(std::move(bad), &id).code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(s.done);
  // One free sequence plus max_waiting = 1: the third request is refused.
  Seen q1, q2, q3;
  ASSERT_TRUE(sched.Submit(Greedy({1, 2}, 1, &q1), &id).ok());
  ASSERT_TRUE(sched.Submit(Greedy({1, 2}, 1, &q2), &id).ok());
  st = sched.Submit(Greedy({1, 2}, 1, &q3), &id);
  EXPECT_EQ(st.code(), StatusCode::kUnavailable);
  EXPECT_NE(st.message().find("queue is full"), std::string::npos);
  RunUntilIdle(sched);
  EXPECT_TRUE(q1.done && q2.done);
  EXPECT_FALSE(q3.done);
}

// A server's shape: one thread runs the steps, others submit and wait for their results.
TEST(Scheduler, RequestsFromOtherThreads) {
  auto m = Load();
  ASSERT_TRUE(m);
  auto ctx = MakeContext(*m, 2);
  Scheduler sched(ctx.get(), SchedulerOptions());
  std::atomic<bool> stop{false};
  std::thread loop([&] {
    while (!stop.load()) {
      bool worked = false;
      sched.Step(&worked);
      if (!worked) sched.WaitForWork(std::chrono::milliseconds(50));
    }
  });
  const int n = 4;
  std::vector<std::vector<int32_t>> got(n);
  std::vector<std::thread> clients;
  for (int i = 0; i < n; ++i) {
    clients.emplace_back([&, i] {
      std::mutex mu;
      std::condition_variable cv;
      bool done = false;
      Request r;
      r.prompt = RandomTokens(*m, 6 + i, 40u + static_cast<uint32_t>(i));
      r.n_predict = 5;
      r.sampling.temp = 0;
      r.on_token = [&got, i](const TokenEvent& e) {
        got[static_cast<size_t>(i)].push_back(e.token);
        return true;
      };
      r.on_done = [&](const RequestResult&) {
        std::lock_guard<std::mutex> lock(mu);
        done = true;
        cv.notify_all();
      };
      uint64_t id = 0;
      ASSERT_TRUE(sched.Submit(std::move(r), &id).ok());
      std::unique_lock<std::mutex> lock(mu);
      EXPECT_TRUE(cv.wait_for(lock, std::chrono::seconds(60), [&] { return done; }));
    });
  }
  for (auto& t : clients) t.join();
  stop = true;
  sched.Wake();
  loop.join();
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(got[static_cast<size_t>(i)], Alone(*m, RandomTokens(*m, 6 + i, 40u + static_cast<uint32_t>(i)), 5));
  }
}

}  // namespace
}  // namespace trine
