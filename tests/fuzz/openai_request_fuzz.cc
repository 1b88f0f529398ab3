// libFuzzer target for `trine serve`'s request parser (tools/server/openai.cc): arbitrary bytes as
// the body of /v1/chat/completions and /v1/completions.
// Invariants: parsing never crashes or throws; a refused body has status 400 and a non-empty
// message, and its error body is valid JSON; an accepted body gives a Job within the documented
// ranges, whose response and stream chunks serialize to valid JSON; StableLength never exceeds the
// text and never splits a UTF-8 character; ValidUtf8 output parses as a JSON string.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <string>

#include "fuzz_util.h"
#include "server/openai.h"

namespace {

using trine::fuzz::Check;
using json = nlohmann::json;

void CheckJob(const trine::server::Job& job) {
  Check(job.max_tokens == -1 || job.max_tokens >= 1, "max_tokens >= 1");
  Check(job.sampling.temp >= 0 && job.sampling.temp <= 2, "temperature in [0, 2]");
  Check(job.sampling.top_p > 0 && job.sampling.top_p <= 1, "top_p in (0, 1]");
  Check(job.stop.size() <= 4, "at most 4 stop strings");
  Check(job.top_logprobs >= 0 && job.top_logprobs <= 20, "top_logprobs in [0, 20]");
  Check(!job.chat || !job.messages.empty(), "chat has messages");
  const std::string text = job.chat ? job.messages.back().content : job.prompt;
  trine::server::TokenLogprob lp{text, -1.0f, {{text, -1.0f}}};
  const json r = trine::server::CompletionResponse(job, "id", 0, "m", text, {lp}, "stop", {1, 1});
  Check(!json::parse(r.dump()).is_null(), "response serializes");
  Check(trine::server::SseEvent(trine::server::StreamChunk(job, "id", 0, "m", text, {lp}, "assistant", nullptr))
                .rfind("data: ", 0) == 0,
        "stream chunk serializes");
  bool hit = false;
  const size_t stable = trine::server::StableLength(text, job.stop, 0, &hit);
  // Grown a few bytes at a time (as tokens come), each call starting from the last result: a stop
  // string is found exactly when the whole text has one, and without one it ends where a single
  // call over the whole text does.
  size_t step = 0;
  bool step_hit = false;
  for (size_t n = 0; n < text.size() && !step_hit;) {
    n = std::min(text.size(), n + 3);
    step = trine::server::StableLength(text.substr(0, n), job.stop, step, &step_hit);
  }
  Check(step_hit == hit, "incremental stop search finds what a whole one finds");
  if (!hit) Check(step == stable, "incremental stable length equals the whole one");
  Check(stable <= text.size(), "stable length within the text");
  Check(trine::server::CompleteUtf8Prefix(std::string_view(text).substr(0, stable)) == stable,
        "stable length on a character");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string body(reinterpret_cast<const char*>(data), size);
  const trine::SamplerParams defaults;
  for (bool chat : {true, false}) {
    trine::server::Job job;
    trine::server::ApiError err;
    const bool ok = chat ? trine::server::ParseChatRequest(body, defaults, &job, &err)
                         : trine::server::ParseCompletionRequest(body, defaults, &job, &err);
    if (ok) {
      CheckJob(job);
    } else {
      Check(err.status == 400 && !err.message.empty(), "a refused body has a 400 and a message");
      Check(json::parse(trine::server::ErrorBody(err)).contains("error"), "the error body is JSON");
    }
  }
  Check(json::parse(json(trine::server::ValidUtf8(body)).dump()).is_string(), "ValidUtf8 gives a JSON string");
  return 0;
}
