// OpenAI request parsing and response shapes: see openai.h.
#include "server/openai.h"

#include "core/utf8.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace trine::server {

using json = nlohmann::json;

namespace {

bool Fail(ApiError* err, const std::string& param, const std::string& message) {
  err->status = 400;
  err->param = param;
  err->message = message;
  return false;
}

// Depth of the deepest array/object outside strings: bodies nested past kMaxJsonDepth are refused
// before the parser sees them.
int JsonDepth(const std::string& s) {
  int depth = 0, max_depth = 0;
  bool in_string = false, escaped = false;
  for (char c : s) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      max_depth = std::max(max_depth, ++depth);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return max_depth;
}

bool IsNull(const json& o, const char* key) { return !o.contains(key) || o[key].is_null(); }

// Optional number field within [lo, hi]; absent or null leaves *out.
bool NumberField(const json& o, const char* key, double lo, double hi, float* out, ApiError* err) {
  if (IsNull(o, key)) return true;
  const json& v = o[key];
  if (!v.is_number()) return Fail(err, key, std::string("'") + key + "' must be a number");
  const double d = v.get<double>();
  if (!std::isfinite(d) || d < lo || d > hi) {
    return Fail(err, key, std::string("'") + key + "' must be between " + json(lo).dump() + " and " + json(hi).dump() +
                              ", got " + v.dump());
  }
  *out = static_cast<float>(d);
  return true;
}

// Optional integer field within [lo, hi].
bool IntField(const json& o, const char* key, int64_t lo, int64_t hi, int64_t* out, ApiError* err) {
  if (IsNull(o, key)) return true;
  const json& v = o[key];
  if (!v.is_number_integer()) return Fail(err, key, std::string("'") + key + "' must be an integer");
  // Unsigned values past INT64_MAX read as large negatives through get<int64_t>.
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi)) {
    return Fail(err, key, std::string("'") + key + "' must be at most " + std::to_string(hi) + ", got " + v.dump());
  }
  const int64_t i = v.get<int64_t>();
  if (i < lo || i > hi) {
    return Fail(err, key, std::string("'") + key + "' must be between " + std::to_string(lo) + " and " +
                              std::to_string(hi) + ", got " + v.dump());
  }
  *out = i;
  return true;
}

bool BoolField(const json& o, const char* key, bool* out, ApiError* err) {
  if (IsNull(o, key)) return true;
  if (!o[key].is_boolean()) return Fail(err, key, std::string("'") + key + "' must be a boolean");
  *out = o[key].get<bool>();
  return true;
}

bool NoNul(const std::string& s, const std::string& param, ApiError* err) {
  if (s.find('\0') != std::string::npos) return Fail(err, param, "'" + param + "' contains a NUL character");
  return true;
}

// The fields chat and completions share: sampling, stop, stream, n, penalties.
bool ParseCommon(const json& o, const SamplerParams& defaults, Job* job, ApiError* err) {
  if (!IsNull(o, "model") && !o["model"].is_string()) return Fail(err, "model", "'model' must be a string");
  job->sampling = defaults;
  SamplerParams& s = job->sampling;
  if (!NumberField(o, "temperature", 0, 2, &s.temp, err)) return false;
  if (!NumberField(o, "top_p", 0, 1, &s.top_p, err)) return false;
  if (s.top_p <= 0) return Fail(err, "top_p", "'top_p' must be greater than 0");
  if (!NumberField(o, "min_p", 0, 1, &s.min_p, err)) return false;
  if (!NumberField(o, "repeat_penalty", 0, 10, &s.repeat_penalty, err)) return false;
  if (s.repeat_penalty <= 0) return Fail(err, "repeat_penalty", "'repeat_penalty' must be greater than 0");
  int64_t i = s.top_k;
  if (!IntField(o, "top_k", 0, 1 << 30, &i, err)) return false;
  s.top_k = static_cast<int>(i);
  if (!IsNull(o, "seed")) {
    if (!o["seed"].is_number_integer()) return Fail(err, "seed", "'seed' must be an integer");
    s.seed = o["seed"].is_number_unsigned() ? o["seed"].get<uint64_t>() : static_cast<uint64_t>(o["seed"].get<int64_t>());
  }
  if (!NumberField(o, "presence_penalty", -2, 2, &s.presence_penalty, err)) return false;
  if (!NumberField(o, "frequency_penalty", -2, 2, &s.frequency_penalty, err)) return false;
  int64_t n = 1;
  if (!IntField(o, "n", 1, 128, &n, err)) return false;
  if (n != 1) return Fail(err, "n", "'n' > 1 is not supported by this server: send one request per choice");
  if (!IsNull(o, "stop")) {
    const json& st = o["stop"];
    if (st.is_string()) {
      job->stop.push_back(st.get<std::string>());
    } else if (st.is_array()) {
      if (st.size() > 4) return Fail(err, "stop", "'stop' holds at most 4 sequences");
      for (const json& x : st) {
        if (!x.is_string()) return Fail(err, "stop", "'stop' must be a string or an array of strings");
        job->stop.push_back(x.get<std::string>());
      }
    } else {
      return Fail(err, "stop", "'stop' must be a string or an array of strings");
    }
    for (const std::string& x : job->stop) {
      if (x.empty()) return Fail(err, "stop", "'stop' sequences must not be empty");
      if (!NoNul(x, "stop", err)) return false;
    }
  }
  if (!BoolField(o, "stream", &job->stream, err)) return false;
  if (!BoolField(o, "ignore_eos", &job->ignore_eos, err)) return false;
  if (!IsNull(o, "stream_options")) {
    const json& so = o["stream_options"];
    if (!so.is_object()) return Fail(err, "stream_options", "'stream_options' must be an object");
    if (!job->stream) return Fail(err, "stream_options", "'stream_options' is only allowed when 'stream' is true");
    if (!BoolField(so, "include_usage", &job->include_usage, err)) return false;
  }
  return true;
}

// max_tokens (and chat's max_completion_tokens): >= 1.
bool ParseMaxTokens(const json& o, const char* key, Job* job, ApiError* err) {
  int64_t m = job->max_tokens;
  if (!IntField(o, key, 1, std::numeric_limits<int32_t>::max(), &m, err)) return false;
  job->max_tokens = static_cast<int>(m);
  return true;
}

// A message's content: a string, or an array of {"type":"text","text":...} parts.
bool MessageContent(const json& c, const std::string& param, std::string* out, ApiError* err) {
  if (c.is_string()) {
    *out = c.get<std::string>();
  } else if (c.is_array()) {
    for (const json& part : c) {
      if (!part.is_object() || !part.contains("type") || !part["type"].is_string()) {
        return Fail(err, param, "'" + param + "' parts must be objects with a 'type'");
      }
      if (part["type"] != "text") {
        return Fail(err, param, "'" + param + "' part type '" + part["type"].get<std::string>() +
                                    "' is not supported (text only)");
      }
      if (!part.contains("text") || !part["text"].is_string()) {
        return Fail(err, param, "'" + param + "' text parts need a string 'text'");
      }
      *out += part["text"].get<std::string>();
    }
  } else {
    return Fail(err, param, "'" + param + "' must be a string or an array of text parts");
  }
  return NoNul(*out, param, err);
}

}  // namespace

std::string ErrorBody(const ApiError& e) {
  const char* type = e.status == 401 ? "authentication_error"
                     : e.status >= 500 ? "server_error"
                     : e.status == 404 ? "not_found_error"
                                       : "invalid_request_error";
  json j = {{"error",
             {{"message", ValidUtf8(e.message)},
              {"type", type},
              {"param", e.param.empty() ? json(nullptr) : json(e.param)},
              {"code", e.status}}}};
  return j.dump();
}

bool ParseJsonBody(const std::string& body, json* out, ApiError* err) {
  if (body.empty()) return Fail(err, "", "the request body is empty; send a JSON object");
  if (JsonDepth(body) > kMaxJsonDepth) {
    return Fail(err, "", "the JSON body is nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
  }
  try {
    *out = json::parse(body);
  } catch (const json::exception& e) {
    return Fail(err, "", std::string("the body is not valid JSON: ") + e.what());
  }
  if (!out->is_object()) return Fail(err, "", "the body must be a JSON object");
  return true;
}

bool ParseChatRequest(const std::string& body, const SamplerParams& defaults, Job* job, ApiError* err) {
  json o;
  if (!ParseJsonBody(body, &o, err)) return false;
  *job = Job();
  job->chat = true;
  if (!ParseCommon(o, defaults, job, err)) return false;
  if (!ParseMaxTokens(o, "max_tokens", job, err) || !ParseMaxTokens(o, "max_completion_tokens", job, err)) return false;
  for (const char* key : {"tools", "functions", "tool_choice", "function_call"}) {
    if (!IsNull(o, key)) return Fail(err, key, std::string("'") + key + "' is not supported by this server");
  }
  if (!o.contains("messages")) return Fail(err, "messages", "'messages' is required");
  const json& ms = o["messages"];
  if (!ms.is_array()) return Fail(err, "messages", "'messages' must be an array");
  if (ms.empty()) return Fail(err, "messages", "'messages' must hold at least one message");
  for (size_t i = 0; i < ms.size(); ++i) {
    const std::string p = "messages[" + std::to_string(i) + "]";
    const json& m = ms[i];
    if (!m.is_object()) return Fail(err, p, "'" + p + "' must be an object");
    if (!m.contains("role") || !m["role"].is_string()) return Fail(err, p + ".role", "'" + p + ".role' must be a string");
    std::string role = m["role"].get<std::string>();
    if (role == "developer") role = "system";  // OpenAI's newer name for the system role
    if (role != "system" && role != "user" && role != "assistant") {
      return Fail(err, p + ".role", "'" + p + ".role' must be system, user or assistant, got '" +
                                        ValidUtf8(role.substr(0, 40)) + "'");
    }
    if (IsNull(m, "content")) return Fail(err, p + ".content", "'" + p + ".content' is required");
    std::string content;
    if (!MessageContent(m["content"], p + ".content", &content, err)) return false;
    job->messages.push_back({role, content});
  }
  if (!BoolField(o, "logprobs", &job->logprobs, err)) return false;
  int64_t top = 0;
  if (!IntField(o, "top_logprobs", 0, 20, &top, err)) return false;
  if (!IsNull(o, "top_logprobs") && !job->logprobs) {
    return Fail(err, "top_logprobs", "'top_logprobs' needs 'logprobs' set to true");
  }
  job->top_logprobs = static_cast<int>(top);
  return true;
}

bool ParseCompletionRequest(const std::string& body, const SamplerParams& defaults, Job* job, ApiError* err) {
  json o;
  if (!ParseJsonBody(body, &o, err)) return false;
  *job = Job();
  job->chat = false;
  job->max_tokens = 16;  // OpenAI's default for completions
  if (!ParseCommon(o, defaults, job, err)) return false;
  if (!ParseMaxTokens(o, "max_tokens", job, err)) return false;
  if (!IsNull(o, "suffix")) return Fail(err, "suffix", "'suffix' is not supported by this server");
  if (!o.contains("prompt") || o["prompt"].is_null()) return Fail(err, "prompt", "'prompt' is required");
  const json& p = o["prompt"];
  if (p.is_string()) {
    job->prompt = p.get<std::string>();
  } else if (p.is_array() && p.size() == 1 && p[0].is_string()) {
    job->prompt = p[0].get<std::string>();
  } else if (p.is_array() && p.size() > 1) {
    return Fail(err, "prompt", "'prompt' with several prompts is not supported: send one request per prompt");
  } else {
    return Fail(err, "prompt", "'prompt' must be a string");
  }
  if (job->prompt.empty()) return Fail(err, "prompt", "'prompt' must not be empty");
  if (!NoNul(job->prompt, "prompt", err)) return false;
  if (!BoolField(o, "echo", &job->echo, err)) return false;
  int64_t lp = -1;
  if (!IntField(o, "logprobs", 0, 5, &lp, err)) return false;
  if (lp >= 0) {
    job->logprobs = true;
    job->top_logprobs = static_cast<int>(lp);
  }
  return true;
}

void ComputeLogprobs(const float* logits, int n_vocab, int32_t token, int top_n, float* logprob,
                     std::vector<std::pair<int32_t, float>>* top) {
  float max = logits[0];
  for (int i = 1; i < n_vocab; ++i) max = std::max(max, logits[i]);
  double sum = 0;
  for (int i = 0; i < n_vocab; ++i) sum += std::exp(static_cast<double>(logits[i] - max));
  const double log_z = static_cast<double>(max) + std::log(sum);
  *logprob = static_cast<float>(logits[token] - log_z);
  top->clear();
  for (int id : TopKLowestId(logits, n_vocab, top_n)) top->emplace_back(id, static_cast<float>(logits[id] - log_z));
}

size_t CompleteUtf8Prefix(std::string_view text) {
  // Only the last 3 bytes can start an unfinished character.
  const size_t n = text.size();
  for (size_t back = 1; back <= std::min<size_t>(3, n); ++back) {
    const uint8_t c = static_cast<uint8_t>(text[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte: look further back
    return Utf8LeadLength(c) > back ? n - back : n;
  }
  return n;
}

std::string ValidUtf8(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const size_t len = Utf8SequenceAt(text, i);
    if (len > 0) {
      out.append(text, i, len);
      i += len;
    } else {
      out += "\xEF\xBF\xBD";  // U+FFFD
      ++i;
    }
  }
  return out;
}

size_t StableLength(const std::string& text, const std::vector<std::string>& stop, size_t from, bool* hit) {
  *hit = false;
  size_t stable = text.size();
  for (const std::string& s : stop) {
    const size_t at = text.find(s, std::min(from, text.size()));
    if (at != std::string::npos && at <= stable) {
      stable = at;
      *hit = true;
    }
  }
  if (*hit) return stable;
  // Hold back a tail that is the beginning of a stop string.
  for (const std::string& s : stop) {
    for (size_t k = std::min(s.size() - 1, text.size()); k > 0; --k) {
      if (text.compare(text.size() - k, k, s, 0, k) == 0) {
        stable = std::min(stable, text.size() - k);
        break;
      }
    }
  }
  return CompleteUtf8Prefix(std::string_view(text).substr(0, stable));  // no copy: this runs per token
}

namespace {

json LogprobsJson(const Job& job, const std::vector<TokenLogprob>& lps) {
  if (!job.logprobs) return nullptr;
  const auto bytes = [](const std::string& s) {
    json b = json::array();
    for (unsigned char c : s) b.push_back(static_cast<int>(c));
    return b;
  };
  if (job.chat) {
    json content = json::array();
    for (const TokenLogprob& t : lps) {
      json top = json::array();
      for (const auto& [tok, lp] : t.top) {
        top.push_back({{"token", ValidUtf8(tok)}, {"logprob", lp}, {"bytes", bytes(tok)}});
      }
      content.push_back({{"token", ValidUtf8(t.token)}, {"logprob", t.logprob}, {"bytes", bytes(t.token)},
                         {"top_logprobs", top}});
    }
    return {{"content", content}};
  }
  // Completions' legacy shape: parallel arrays.
  json tokens = json::array(), token_logprobs = json::array(), top = json::array();
  for (const TokenLogprob& t : lps) {
    tokens.push_back(ValidUtf8(t.token));
    token_logprobs.push_back(t.logprob);
    json alt = json::object();
    for (const auto& [tok, lp] : t.top) alt[ValidUtf8(tok)] = lp;
    top.push_back(alt);
  }
  return {{"tokens", tokens}, {"token_logprobs", token_logprobs}, {"top_logprobs", top}};
}

json UsageJson(const Usage& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens}};
}

}  // namespace

json CompletionResponse(const Job& job, const std::string& id, int64_t created, const std::string& model,
                        const std::string& text, const std::vector<TokenLogprob>& logprobs,
                        const std::string& finish_reason, const Usage& usage) {
  json choice = {{"index", 0}, {"logprobs", LogprobsJson(job, logprobs)}, {"finish_reason", finish_reason}};
  if (job.chat) {
    choice["message"] = {{"role", "assistant"}, {"content", ValidUtf8(text)}};
  } else {
    choice["text"] = ValidUtf8(job.echo ? job.prompt + text : text);
  }
  return {{"id", id},
          {"object", job.chat ? "chat.completion" : "text_completion"},
          {"created", created},
          {"model", model},
          {"system_fingerprint", "trine"},
          {"choices", json::array({choice})},
          {"usage", UsageJson(usage)}};
}

json StreamChunk(const Job& job, const std::string& id, int64_t created, const std::string& model,
                 const std::string& delta, const std::vector<TokenLogprob>& logprobs, const char* role,
                 const char* finish_reason) {
  json choice = {{"index", 0},
                 {"logprobs", logprobs.empty() ? json(nullptr) : LogprobsJson(job, logprobs)},
                 {"finish_reason", finish_reason != nullptr ? json(finish_reason) : json(nullptr)}};
  if (job.chat) {
    json d = json::object();
    if (role != nullptr) d["role"] = role;
    if (role != nullptr || !delta.empty()) d["content"] = ValidUtf8(delta);
    choice["delta"] = d;
  } else {
    choice["text"] = ValidUtf8(delta);
  }
  return {{"id", id},
          {"object", job.chat ? "chat.completion.chunk" : "text_completion"},
          {"created", created},
          {"model", model},
          {"system_fingerprint", "trine"},
          {"choices", json::array({choice})}};
}

json UsageChunk(const Job& job, const std::string& id, int64_t created, const std::string& model, const Usage& usage) {
  return {{"id", id},
          {"object", job.chat ? "chat.completion.chunk" : "text_completion"},
          {"created", created},
          {"model", model},
          {"system_fingerprint", "trine"},
          {"choices", json::array()},
          {"usage", UsageJson(usage)}};
}

std::string SseEvent(const json& j) {
  return "data: " + j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
}

}  // namespace trine::server
