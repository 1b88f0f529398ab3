// OpenAI's API shapes for `trine serve`: parsing and validating request bodies of
// /v1/chat/completions and /v1/completions into a Job, and writing responses, stream chunks and
// errors with OpenAI's field names. Pure functions of their inputs (no model, no sockets), so the
// request parser can be unit-tested and fuzzed alone (tests/server, tests/fuzz).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "sampler/sampler.h"
#include "tokenizer/chat_template.h"

namespace trine::server {

// An error as OpenAI returns it: HTTP status, and {"error":{"message","type","param","code"}}.
struct ApiError {
  int status = 400;
  std::string message;
  std::string param;  // the request field at fault ("" when none)
};
// "invalid_request_error" (4xx but 401), "authentication_error" (401), "server_error" (5xx).
std::string ErrorBody(const ApiError& e);

// What a completion request asks for, validated.
struct Job {
  bool chat = true;
  std::vector<ChatMessage> messages;  // chat
  std::string prompt;                 // completions
  int max_tokens = -1;                // -1: until a stop or the context's end
  SamplerParams sampling;
  std::vector<std::string> stop;      // at most 4, none empty
  bool stream = false;
  bool include_usage = false;         // stream_options.include_usage
  bool logprobs = false;
  int top_logprobs = 0;               // 0..20 (completions' integer logprobs: 0..5)
  bool echo = false;                  // completions: prepend the prompt to the text
  bool ignore_eos = false;            // llama-server's extension: generate past end-of-text tokens
};

// Body limits beyond the size limit the HTTP layer applies.
inline constexpr int kMaxJsonDepth = 64;

// Parses a request body. `defaults` supplies the sampling fields the request leaves out. Returns
// false with *err (status 400 and the field) for malformed JSON, wrong types, values outside
// OpenAI's documented ranges, unknown roles, empty messages, NUL characters in text, and what this
// server does not do (n > 1, non-zero presence/frequency penalties, tools, suffix).
bool ParseChatRequest(const std::string& body, const SamplerParams& defaults, Job* job, ApiError* err);
bool ParseCompletionRequest(const std::string& body, const SamplerParams& defaults, Job* job, ApiError* err);

// Parses a JSON body with the depth limit; false and *err on failure.
bool ParseJsonBody(const std::string& body, nlohmann::json* out, ApiError* err);

// One token's log-probability and its most likely alternatives (OpenAI's logprobs.content[i]).
struct TokenLogprob {
  std::string token;
  float logprob = 0;
  std::vector<std::pair<std::string, float>> top;  // (token text, logprob), most likely first
};

// log softmax(logits)[token] and the top_n most likely tokens' log-probabilities.
void ComputeLogprobs(const float* logits, int n_vocab, int32_t token, int top_n, float* logprob,
                     std::vector<std::pair<int32_t, float>>* top);

// The longest prefix of `text` that ends on a complete UTF-8 character (a token may end inside one).
size_t CompleteUtf8Prefix(std::string_view text);
// `text` with invalid UTF-8 replaced by U+FFFD, safe for JSON.
std::string ValidUtf8(const std::string& text);

// Where the text may be given to the client: before the first stop string (found: *hit) or
// before a tail that could still become one, and on a complete UTF-8 character. `from` is the
// previous result for a shorter prefix of the same text (0 the first time): no stop string starts
// before it, so the search (once per generated token) starts there, not at the beginning.
size_t StableLength(const std::string& text, const std::vector<std::string>& stop, size_t from, bool* hit);

struct Usage {
  int prompt_tokens = 0;
  int completion_tokens = 0;
};

// Response objects. `id` is "chatcmpl-..." or "cmpl-..."; finish_reason "stop" or "length".
nlohmann::json CompletionResponse(const Job& job, const std::string& id, int64_t created, const std::string& model,
                                  const std::string& text, const std::vector<TokenLogprob>& logprobs,
                                  const std::string& finish_reason, const Usage& usage);
// A stream chunk: the role chunk (role set), a text delta, or the last chunk (finish_reason set).
nlohmann::json StreamChunk(const Job& job, const std::string& id, int64_t created, const std::string& model,
                           const std::string& delta, const std::vector<TokenLogprob>& logprobs, const char* role,
                           const char* finish_reason);
// The usage chunk of stream_options.include_usage (choices empty).
nlohmann::json UsageChunk(const Job& job, const std::string& id, int64_t created, const std::string& model,
                          const Usage& usage);
// "data: <json>\n\n"
std::string SseEvent(const nlohmann::json& j);

}  // namespace trine::server
