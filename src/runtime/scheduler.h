// Continuous batching over one Context (vLLM's and llama-server's design): requests join the
// running batch between steps and leave it when they finish, and each step is one forward pass
// that carries every running sequence's next token plus chunks of the prompts being read, under
// a per-step token budget. A long prompt therefore delays the others' next token by one chunk,
// not by the whole prompt, and the weights are read once per step for everyone.
//
// Each request runs on one sequence id of the context (n_seq_max of them). When a request ends,
// its sequence keeps its KV cache as a cached prefix: a later request whose prompt begins with
// the same tokens (a shared system prompt, the previous turns of a chat) starts from there, and
// one whose prompt begins like a running request's shares that request's blocks (KvCache::Fork,
// copy on write). Cached prefixes give their blocks back when the pool runs short.
//
// Threads: Submit, Cancel, Wake and stats may be called from any thread; Step and WaitForWork
// from one thread (the one that runs the steps), on which every callback runs.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <unordered_set>
#include <vector>

#include "core/status.h"
#include "runtime/context.h"
#include "sampler/sampler.h"

namespace trine {

enum class FinishReason {
  kStop,       // an end-of-generation token was sampled (it is not passed on)
  kLength,     // n_predict tokens, or the sequence reached the context size
  kCaller,     // on_token returned false (a stop string, a client that has enough)
  kCancelled,  // Cancel
  kError,      // RequestResult::error says why (e.g. OUT_OF_MEMORY "KV pool full")
};
const char* FinishReasonName(FinishReason reason);

// A sampled token, with the logits it was drawn from (valid during the callback only).
struct TokenEvent {
  int32_t token = 0;
  const float* logits = nullptr;  // (n_vocab) before sampling's penalties and temperature
  int n_vocab = 0;
};

struct RequestResult {
  FinishReason reason = FinishReason::kStop;
  Status error;        // kError's cause
  int n_prompt = 0;    // prompt tokens
  int n_cached = 0;    // prompt tokens whose KV came from an earlier or running request
  int n_generated = 0; // tokens passed to on_token
  double prompt_ms = 0;      // submit -> first token sampled (queueing and prompt evaluation)
  double generation_ms = 0;  // first token sampled -> the end
};

struct Request {
  std::vector<int32_t> prompt;  // >= 1 token ids, each < n_vocab
  int n_predict = -1;           // most tokens generated (0 is refused); < 0: until end of generation or n_ctx
  SamplerParams sampling;
  bool ignore_eog = false;      // end-of-generation tokens are passed on like any other
  // Each generated token; false stops the request (FinishReason::kCaller). May be empty.
  std::function<bool(const TokenEvent&)> on_token;
  // Called exactly once when the request ends, after its last on_token. May be empty.
  std::function<void(const RequestResult&)> on_done;
};

struct SchedulerOptions {
  int step_tokens = 0;      // tokens per forward pass; 0: the context's n_batch (>= n_seq_max)
  int max_waiting = 64;     // requests that may wait while every sequence is busy; Submit refuses beyond
  bool reuse_prefix = true; // start prompts from cached or running sequences' KV where it matches
};

struct SchedulerStats {
  uint64_t steps = 0;
  uint64_t requests_done = 0;
  uint64_t prompt_tokens = 0;     // prompt tokens evaluated (cached ones excluded)
  uint64_t cached_tokens = 0;     // prompt tokens taken from cached or running sequences
  uint64_t generated_tokens = 0;
  double busy_seconds = 0;        // time spent in forward passes
  int running = 0;                // requests holding a sequence
  int waiting = 0;                // requests submitted and not yet running
  int kv_blocks = 0;              // the pool
  int kv_blocks_free = 0;
};

class Scheduler {
 public:
  // `ctx` (not owned) must outlive the scheduler; its sequences belong to the scheduler.
  Scheduler(Context* ctx, const SchedulerOptions& options);
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues a request; *id names it for Cancel. Errors (nothing queued, no callback runs):
  // INVALID_ARGUMENT (empty prompt, token ids out of range, a prompt longer than the context or
  // the KV pool, bad sampling parameters), UNAVAILABLE (max_waiting requests already wait).
  Status Submit(Request request, uint64_t* id);
  // Ends a request at the next step (FinishReason::kCancelled) and frees its blocks; unknown or
  // finished ids are ignored.
  void Cancel(uint64_t id);

  // Runs one step: ends cancelled requests, starts waiting ones on free sequences, evaluates one
  // batch, samples and calls back. *worked is false when there was nothing to run. A failing
  // forward pass ends the requests of that batch with kError; the scheduler stays usable.
  void Step(bool* worked);
  // Returns when there is work for Step, after Wake, or after `timeout`.
  void WaitForWork(std::chrono::milliseconds timeout);
  void Wake();

  SchedulerStats stats() const;
  int n_seq_max() const { return static_cast<int>(slots_.size()); }
  int step_tokens() const { return step_tokens_; }

 private:
  struct Pending {
    uint64_t id = 0;
    Request request;
    std::chrono::steady_clock::time_point submitted;
  };
  // One sequence id of the context: the request it runs, if any, and the tokens its KV holds.
  struct Slot {
    std::vector<int32_t> kv_tokens;  // tokens of positions 0 .. SeqPos - 1
    bool busy = false;
    uint64_t last_used = 0;          // step of its last use (least recently used cache goes first)
    uint64_t id = 0;
    uint64_t admitted = 0;           // admission order (older prompts are read first)
    Request request;
    std::unique_ptr<Sampler> sampler;
    size_t prompt_done = 0;          // prompt tokens in the KV (cached ones included)
    int32_t next_token = -1;         // sampled and not yet evaluated (-1: reading the prompt)
    RequestResult result;
    std::chrono::steady_clock::time_point submitted, first_token;
  };
  // A slot's share of the batch being built.
  struct Planned {
    int slot = 0;
    int first = 0;   // batch index of its first token
    int n = 0;       // tokens it evaluates this step
  };

  void TakeCancellations();
  void Admit(Pending pending);
  int PickFreeSlot(int avoid) const;
  // Frees the blocks of cached (idle) sequences, least recently used first, until `blocks` are
  // free or none is left; returns whether `blocks` are free.
  bool EvictCachedUntil(int blocks);
  void PlanBatch(std::vector<Planned>* plan);
  void AfterForward(const std::vector<Planned>& plan);
  void Finish(int slot, FinishReason reason, Status error = Status::Ok());

  Context* ctx_;
  SchedulerOptions options_;
  int step_tokens_ = 0;
  std::vector<Slot> slots_;
  Batch batch_;
  uint64_t step_ = 0;
  uint64_t admitted_ = 0;
  uint64_t finished_ = 0;  // requests ended so far (Finish)

  mutable std::mutex mu_;  // guards everything below
  std::condition_variable cv_;
  std::deque<Pending> waiting_;
  std::unordered_set<uint64_t> cancelled_;
  uint64_t next_id_ = 1;
  bool woken_ = false;
  SchedulerStats stats_;
};

}  // namespace trine
