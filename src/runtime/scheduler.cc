// Continuous batching: see scheduler.h.
#include "runtime/scheduler.h"

#include <algorithm>
#include <string>
#include <utility>

namespace trine {

namespace {

using Clock = std::chrono::steady_clock;

double Ms(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double, std::milli>(to - from).count();
}

// Tokens a and b have in common from the start.
size_t CommonPrefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  const size_t n = std::min(a.size(), b.size());
  size_t i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return i;
}

}  // namespace

const char* FinishReasonName(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kCaller: return "caller";
    case FinishReason::kCancelled: return "cancelled";
    case FinishReason::kError: return "error";
  }
  return "unknown";
}

Scheduler::Scheduler(Context* ctx, const SchedulerOptions& options) : ctx_(ctx), options_(options) {
  slots_.resize(static_cast<size_t>(ctx_->n_seq_max()));
  // Every running sequence must fit one decode token into a step.
  step_tokens_ = std::max(options_.step_tokens > 0 ? options_.step_tokens : ctx_->n_batch(), ctx_->n_seq_max());
  batch_.Reserve(step_tokens_);
  for (size_t s = 0; s < slots_.size(); ++s) ctx_->SeqTruncate(static_cast<int>(s), 0);
}

Scheduler::~Scheduler() = default;

Status Scheduler::Submit(Request request, uint64_t* id) {
  const std::vector<int32_t>& p = request.prompt;
  if (p.empty()) return InvalidArgument("the prompt is empty: a request needs at least one token");
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] < 0 || p[i] >= ctx_->n_vocab()) {
      return InvalidArgument("prompt token " + std::to_string(i) + " is id " + std::to_string(p[i]) +
                             ", outside the vocabulary [0, " + std::to_string(ctx_->n_vocab()) + ")");
    }
  }
  const int n = static_cast<int>(std::min<size_t>(p.size(), INT32_MAX));
  if (n >= ctx_->n_ctx()) {
    return InvalidArgument("the prompt is " + std::to_string(p.size()) + " tokens; the context holds " +
                           std::to_string(ctx_->n_ctx()) + " positions per sequence and one is needed to answer");
  }
  if (KvCache::PoolBlocks(n + 1) > ctx_->kv().n_blocks()) {
    return InvalidArgument("the prompt is " + std::to_string(p.size()) + " tokens, more than the KV pool's " +
                           std::to_string(ctx_->kv().n_blocks() * kKvBlockPositions) + " positions");
  }
  if (request.n_predict == 0) return InvalidArgument("n_predict is 0: ask for at least one token (< 0: no limit)");
  Status st = ValidateSamplerParams(request.sampling);
  if (!st.ok()) return st;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Requests beyond the free sequences wait; at most max_waiting of them.
    const int free_seqs = std::max(0, static_cast<int>(slots_.size()) - stats_.running);
    if (static_cast<int>(waiting_.size()) >= options_.max_waiting + free_seqs) {
      return Unavailable("the queue is full: " + std::to_string(waiting_.size()) +
                         " requests are waiting for one of " + std::to_string(slots_.size()) + " sequences");
    }
    *id = next_id_++;
    waiting_.push_back(Pending{*id, std::move(request), Clock::now()});
    stats_.waiting = static_cast<int>(waiting_.size());
  }
  cv_.notify_all();
  return Status::Ok();
}

void Scheduler::Cancel(uint64_t id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    cancelled_.insert(id);
  }
  cv_.notify_all();
}

void Scheduler::Wake() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    woken_ = true;
  }
  cv_.notify_all();
}

void Scheduler::WaitForWork(std::chrono::milliseconds timeout) {
  const bool running = std::any_of(slots_.begin(), slots_.end(), [](const Slot& s) { return s.busy; });
  std::unique_lock<std::mutex> lock(mu_);
  if (!running) {
    cv_.wait_for(lock, timeout, [&] { return woken_ || !waiting_.empty() || !cancelled_.empty(); });
  }
  woken_ = false;
}

SchedulerStats Scheduler::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

// Ends the cancelled requests: the running ones here, the waiting ones without starting them.
void Scheduler::TakeCancellations() {
  std::vector<Pending> dropped;
  std::unordered_set<uint64_t> ids;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (cancelled_.empty()) return;
    ids.swap(cancelled_);
    for (auto it = waiting_.begin(); it != waiting_.end();) {
      if (ids.count(it->id) != 0) {
        dropped.push_back(std::move(*it));
        it = waiting_.erase(it);
      } else {
        ++it;
      }
    }
    stats_.waiting = static_cast<int>(waiting_.size());
  }
  for (size_t s = 0; s < slots_.size(); ++s) {
    if (slots_[s].busy && ids.count(slots_[s].id) != 0) Finish(static_cast<int>(s), FinishReason::kCancelled);
  }
  for (Pending& p : dropped) {
    RequestResult r;
    r.reason = FinishReason::kCancelled;
    r.n_prompt = static_cast<int>(p.request.prompt.size());
    if (p.request.on_done) p.request.on_done(r);
  }
}

// A free sequence other than `avoid`: an empty one if any, else the least recently used cache.
int Scheduler::PickFreeSlot(int avoid) const {
  int best = -1;
  for (size_t s = 0; s < slots_.size(); ++s) {
    const Slot& c = slots_[s];
    if (c.busy || static_cast<int>(s) == avoid) continue;
    if (best < 0) {
      best = static_cast<int>(s);
      continue;
    }
    const Slot& b = slots_[static_cast<size_t>(best)];
    const bool c_empty = c.kv_tokens.empty(), b_empty = b.kv_tokens.empty();
    if (c_empty != b_empty ? c_empty : c.last_used < b.last_used) best = static_cast<int>(s);
  }
  return best;
}

// Starts `pending` on a free sequence (one exists), from the longest prefix of its prompt that a
// sequence's KV holds: in place when that sequence is free, by Fork when it is running.
void Scheduler::Admit(Pending pending) {
  const std::vector<int32_t>& prompt = pending.request.prompt;
  // At least the prompt's last token is evaluated: its logits give the first token.
  const size_t reusable = prompt.size() - 1;
  int src = -1;
  size_t best = 0;
  if (options_.reuse_prefix) {
    for (size_t s = 0; s < slots_.size(); ++s) {
      const size_t n = std::min(CommonPrefix(slots_[s].kv_tokens, prompt), reusable);
      // Equal lengths: a free sequence, used in place, beats a running one, which must be forked.
      if (n > best || (n == best && n > 0 && !slots_[s].busy && slots_[static_cast<size_t>(src)].busy)) {
        best = n;
        src = static_cast<int>(s);
      }
    }
  }
  int slot;
  if (src >= 0 && !slots_[static_cast<size_t>(src)].busy) {
    slot = src;
    ctx_->SeqTruncate(slot, static_cast<int>(best));
  } else {
    slot = PickFreeSlot(src);
    if (src >= 0 && ctx_->SeqFork(src, slot, static_cast<int>(best)).ok()) {
      slots_[static_cast<size_t>(slot)].kv_tokens.assign(prompt.begin(), prompt.begin() + static_cast<long>(best));
    } else {
      best = 0;
      ctx_->SeqTruncate(slot, 0);
    }
  }
  Slot& s = slots_[static_cast<size_t>(slot)];
  s.kv_tokens.resize(best);
  s.busy = true;
  s.id = pending.id;
  s.admitted = admitted_++;
  s.request = std::move(pending.request);
  s.sampler = std::make_unique<Sampler>(s.request.sampling);
  for (int32_t t : s.request.prompt) s.sampler->Accept(t);
  s.prompt_done = best;
  s.next_token = -1;
  s.result = RequestResult();
  s.result.n_prompt = static_cast<int>(s.request.prompt.size());
  s.result.n_cached = static_cast<int>(best);
  s.submitted = pending.submitted;
  std::lock_guard<std::mutex> lock(mu_);
  stats_.cached_tokens += best;
}

bool Scheduler::EvictCachedUntil(int blocks) {
  while (ctx_->kv().n_free_blocks() < blocks) {
    int victim = -1;
    for (size_t s = 0; s < slots_.size(); ++s) {
      const Slot& c = slots_[s];
      if (c.busy || c.kv_tokens.empty()) continue;
      if (victim < 0 || c.last_used < slots_[static_cast<size_t>(victim)].last_used) victim = static_cast<int>(s);
    }
    if (victim < 0) return false;
    ctx_->SeqTruncate(victim, 0);
    slots_[static_cast<size_t>(victim)].kv_tokens.clear();
  }
  return true;
}

// Fills batch_: first every running sequence's next token, then prompt chunks, oldest request
// first, while the step's token budget and the pool's free blocks last.
void Scheduler::PlanBatch(std::vector<Planned>* plan) {
  batch_.Clear();
  plan->clear();
  std::vector<int> order;
  for (size_t s = 0; s < slots_.size(); ++s) {
    if (slots_[s].busy) order.push_back(static_cast<int>(s));
  }
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    return slots_[static_cast<size_t>(a)].admitted < slots_[static_cast<size_t>(b)].admitted;
  });
  int reserved = 0;  // blocks the planned tokens will take
  const uint64_t done_before = finished_;
  const auto blocks_for = [&](int slot, int n) { return ctx_->kv().BlocksNeeded(slot, ctx_->SeqPos(slot) + n); };
  for (int slot : order) {
    Slot& s = slots_[static_cast<size_t>(slot)];
    if (s.next_token < 0) continue;
    // A dry pool: the youngest running request that holds blocks of its own gives them back (and
    // fails), so that the older ones, which have waited and computed longer, go on. One that
    // holds none (just admitted, or only blocks shared with others) would free nothing.
    while (!EvictCachedUntil(reserved + blocks_for(slot, 1))) {
      int victim = slot;
      for (size_t y = 0; y < slots_.size(); ++y) {
        const Slot& c = slots_[y];
        if (c.busy && c.admitted > slots_[static_cast<size_t>(victim)].admitted &&
            ctx_->kv().OwnedBlocks(static_cast<int>(y)) > 0) {
          victim = static_cast<int>(y);
        }
      }
      Finish(victim, FinishReason::kError,
             Status(StatusCode::kOutOfMemory, "KV pool full: no free block for the next token of this sequence (" +
                                                  std::to_string(ctx_->kv().n_blocks()) +
                                                  " blocks in all; a larger pool: -c / kv_pool_size)"));
      if (victim == slot) break;
    }
    if (!s.busy) continue;
    const int need = blocks_for(slot, 1);
    reserved += need;
    plan->push_back(Planned{slot, batch_.size(), 1});
    batch_.Add(s.next_token, ctx_->SeqPos(slot), slot, true);
  }
  for (int slot : order) {
    Slot& s = slots_[static_cast<size_t>(slot)];
    if (!s.busy || s.next_token >= 0) continue;
    const int left = step_tokens_ - batch_.size();
    if (left <= 0) break;
    const int pos = ctx_->SeqPos(slot);
    int n = static_cast<int>(std::min<size_t>(s.request.prompt.size() - s.prompt_done, static_cast<size_t>(left)));
    EvictCachedUntil(reserved + blocks_for(slot, n));
    // Shrink the chunk to whole blocks the pool can still give.
    while (n > 0 && reserved + blocks_for(slot, n) > ctx_->kv().n_free_blocks()) {
      const int end = (pos + n - 1) / kKvBlockPositions * kKvBlockPositions;
      n = std::max(0, end - pos);
    }
    if (n == 0) continue;
    reserved += blocks_for(slot, n);
    plan->push_back(Planned{slot, batch_.size(), n});
    const bool last = s.prompt_done + static_cast<size_t>(n) == s.request.prompt.size();
    for (int i = 0; i < n; ++i) {
      batch_.Add(s.request.prompt[s.prompt_done + static_cast<size_t>(i)], pos + i, slot, last && i == n - 1);
    }
  }
  // Prompts wait for blocks that only running sequences can free. With none running (and none that
  // ended while planning), no step will ever free one: the newest prompt gives its blocks back and
  // fails, and the others go on.
  if (batch_.size() == 0 && !order.empty() && finished_ == done_before) {
    // The newest that holds blocks of its own (else the newest): failing it frees something.
    int victim = -1;
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      if (!slots_[static_cast<size_t>(*it)].busy) continue;
      if (victim < 0) victim = *it;
      if (ctx_->kv().OwnedBlocks(*it) > 0) {
        victim = *it;
        break;
      }
    }
    if (victim >= 0) {
      Finish(victim, FinishReason::kError,
             Status(StatusCode::kOutOfMemory, "KV pool full: the prompts being read need more than the pool's " +
                                                  std::to_string(ctx_->kv().n_blocks()) +
                                                  " blocks (a larger pool: -c / kv_pool_size, or fewer parallel sequences)"));
    }
  }
}

void Scheduler::AfterForward(const std::vector<Planned>& plan) {
  uint64_t prompt_tokens = 0, generated = 0;
  for (const Planned& p : plan) {
    Slot& s = slots_[static_cast<size_t>(p.slot)];
    s.last_used = step_;
    const int32_t* tokens = batch_.token.data() + p.first;
    s.kv_tokens.insert(s.kv_tokens.end(), tokens, tokens + p.n);
    if (s.next_token < 0) {
      s.prompt_done += static_cast<size_t>(p.n);
      prompt_tokens += static_cast<uint64_t>(p.n);
    }
    const int row = ctx_->LogitsRow(p.first + p.n - 1);
    if (row < 0) continue;  // a prompt chunk before the last
    const float* logits = ctx_->logits(row);
    const int token = s.sampler->Sample(logits, ctx_->n_vocab());
    if (s.result.n_generated == 0) s.first_token = Clock::now();
    if (!s.request.ignore_eog && ctx_->model().vocab().IsEog(token)) {
      Finish(p.slot, FinishReason::kStop);
      continue;
    }
    s.sampler->Accept(token);
    ++s.result.n_generated;
    ++generated;
    if (s.request.on_token && !s.request.on_token(TokenEvent{token, logits, ctx_->n_vocab()})) {
      Finish(p.slot, FinishReason::kCaller);
    } else if (s.result.n_generated == s.request.n_predict || ctx_->SeqPos(p.slot) >= ctx_->n_ctx()) {
      Finish(p.slot, FinishReason::kLength);
    } else {
      s.next_token = token;
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  stats_.prompt_tokens += prompt_tokens;
  stats_.generated_tokens += generated;
}

void Scheduler::Finish(int slot, FinishReason reason, Status error) {
  Slot& s = slots_[static_cast<size_t>(slot)];
  const Clock::time_point now = Clock::now();
  s.busy = false;
  ++finished_;
  s.last_used = step_;
  s.next_token = -1;
  // A finished request's KV stays as a cached prefix; a cancelled or failed one's goes at once.
  if (reason == FinishReason::kCancelled || reason == FinishReason::kError || !options_.reuse_prefix) {
    ctx_->SeqTruncate(slot, 0);
    s.kv_tokens.clear();
  }
  RequestResult r = std::move(s.result);
  r.reason = reason;
  r.error = std::move(error);
  if (r.n_generated > 0 || reason == FinishReason::kStop) {
    r.prompt_ms = Ms(s.submitted, s.first_token);
    r.generation_ms = Ms(s.first_token, now);
  } else {
    r.prompt_ms = Ms(s.submitted, now);
  }
  Request request = std::move(s.request);
  s.request = Request();
  s.sampler.reset();
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.requests_done;
  }
  if (request.on_done) request.on_done(r);
}

void Scheduler::Step(bool* worked) {
  *worked = false;
  TakeCancellations();
  for (;;) {
    Pending next;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (waiting_.empty() || PickFreeSlot(-1) < 0) break;
      next = std::move(waiting_.front());
      waiting_.pop_front();
      stats_.waiting = static_cast<int>(waiting_.size());
    }
    Admit(std::move(next));
  }
  std::vector<Planned> plan;
  PlanBatch(&plan);
  if (batch_.size() > 0) {
    *worked = true;
    ++step_;
    const Clock::time_point t0 = Clock::now();
    Status st = ctx_->Decode(batch_);
    const double seconds = Ms(t0, Clock::now()) / 1000.0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.steps;
      stats_.busy_seconds += seconds;
    }
    if (st.ok()) {
      AfterForward(plan);
    } else {
      for (const Planned& p : plan) {
        if (slots_[static_cast<size_t>(p.slot)].busy) Finish(p.slot, FinishReason::kError, st);
      }
    }
  }
  int running = 0;
  for (const Slot& s : slots_) running += s.busy ? 1 : 0;
  std::lock_guard<std::mutex> lock(mu_);
  stats_.running = running;
  stats_.kv_blocks = ctx_->kv().n_blocks();
  stats_.kv_blocks_free = ctx_->kv().n_free_blocks();
  if (running > 0 || !waiting_.empty()) *worked = true;
}

}  // namespace trine
