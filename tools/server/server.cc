// `trine serve`: see server.h.
#include "server/server.h"

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <ctime>
#include <map>
#include <random>
#include <iomanip>
#include <sstream>
#include <type_traits>

namespace trine::server {

using json = nlohmann::json;

namespace {

int64_t UnixNow() { return static_cast<int64_t>(std::time(nullptr)); }

std::string RandomId(const char* prefix) {
  static std::mutex mu;
  static std::mt19937_64 rng(std::random_device{}());
  std::lock_guard<std::mutex> lock(mu);
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(rng()));
  return std::string(prefix) + buf;
}

// Method allowed on each route: a known path with another method gets 405, an unknown one 404.
const std::map<std::string, std::string>& KnownRoutes() {
  static const std::map<std::string, std::string> routes = {
      {"/health", "GET"},          {"/v1/health", "GET"},        {"/metrics", "GET"},
      {"/v1/models", "GET"},       {"/models", "GET"},           {"/v1/chat/completions", "POST"},
      {"/chat/completions", "POST"}, {"/v1/completions", "POST"}, {"/completions", "POST"},
      {"/tokenize", "POST"},       {"/detokenize", "POST"}};
  return routes;
}

void SendJson(httplib::Response& res, int status, const json& j) {
  res.status = status;
  res.set_content(j.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

const char* FinishName(FinishReason r) { return r == FinishReason::kLength ? "length" : "stop"; }

}  // namespace

// One completion request in flight: written by the scheduler thread (on_token, on_done), read by
// the request's HTTP thread.
struct Server::Exchange {
  Job job;
  std::string id;
  int64_t created = 0;
  uint64_t sched_id = 0;
  std::mutex mu;
  std::condition_variable cv;
  std::string text;     // generated text, cut before a stop string
  size_t stable = 0;    // bytes of text the client may be sent
  bool stop_hit = false;
  std::vector<TokenLogprob> logprobs;
  bool done = false;
  RequestResult result;
  std::shared_ptr<void> flight;  // counts the request in flight until the exchange goes (EnterFlight)
};

Server::Server(const ServerOptions& options) : options_(options), http_(std::make_unique<httplib::Server>()) {
  started_ = UnixNow();
}

Server::~Server() { Shutdown(); }

void Server::CountError(int status) { (status >= 500 ? counters_.errors_5xx : counters_.errors_4xx)++; }

void Server::Error(httplib::Response& res, const ApiError& e) {
  CountError(e.status);
  res.status = e.status;
  res.set_content(ErrorBody(e), "application/json");
}

bool Server::Authorized(const std::string& header) const {
  const std::string want = "Bearer " + options_.api_key;
  // Constant time in the key's content: every byte of the longer string is compared.
  const size_t n = std::max(want.size(), header.size());
  unsigned diff = static_cast<unsigned>(want.size() ^ header.size());
  for (size_t i = 0; i < n; ++i) {
    const unsigned char a = i < want.size() ? static_cast<unsigned char>(want[i]) : 0;
    const unsigned char b = i < header.size() ? static_cast<unsigned char>(header[i]) : 0;
    diff |= static_cast<unsigned>(a ^ b);
  }
  return diff == 0;
}

Status Server::Listen(int* port) {
  Routes();
  http_->set_payload_max_length(options_.max_body);
  http_->set_read_timeout(options_.timeout_s, 0);
  http_->set_write_timeout(options_.timeout_s, 0);
  // Every queued or running request holds a connection thread while it waits for its tokens.
  const size_t threads = static_cast<size_t>(options_.n_parallel + options_.max_waiting + 16);
  http_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  *port = options_.port == 0 ? http_->bind_to_any_port(options_.host)
                             : (http_->bind_to_port(options_.host, options_.port) ? options_.port : -1);
  if (*port < 0) {
    return IoError("cannot listen on " + options_.host + ":" + std::to_string(options_.port) +
                   " (in use, or not an address of this machine)");
  }
  http_thread_ = std::thread([this] { http_->listen_after_bind(); });
  return Status::Ok();
}

Status Server::Ready(std::unique_ptr<Model> model, std::unique_ptr<Context> ctx) {
  model_ = std::move(model);
  ctx_ = std::move(ctx);
  TRINE_RETURN_IF_ERROR(Tokenizer::Create(model_->shared_vocab(), &tokenizer_));
  if (options_.chat_template) {
    TRINE_RETURN_IF_ERROR(ChatFormat::Named(*options_.chat_template, ChatFormat::TokensOf(model_->vocab()), &format_));
  } else {
    // A template trine cannot render still leaves /v1/completions and the rest serving; only chat
    // requests are refused, with the flag that fixes it.
    template_status_ = ChatFormat::ForVocab(model_->vocab(), &format_);
    if (!template_status_.ok()) {
      std::fprintf(stderr, "trine serve: warning: %s; /v1/chat/completions is off until --chat-template is given\n",
                   template_status_.message().c_str());
    } else if (!format_->note().empty()) {
      std::fprintf(stderr, "trine serve: note: %s\n", format_->note().c_str());
    }
  }
  const Vocab& v = model_->vocab();
  bos_text_ = v.InRange(v.bos()) ? v.token(v.bos()) : "";
  SchedulerOptions so;
  so.max_waiting = options_.max_waiting;
  scheduler_ = std::make_unique<Scheduler>(ctx_.get(), so);
  loop_ = std::thread([this] {
    while (!stop_loop_.load()) {
      bool worked = false;
      scheduler_->Step(&worked);
      if (!worked) scheduler_->WaitForWork(std::chrono::milliseconds(200));
    }
  });
  ready_ = true;
  return Status::Ok();
}

void Server::Shutdown() {
  if (draining_.exchange(true)) return;
  // New completion requests get 503 from here on; those in flight finish, for drain_s at most,
  // then are cancelled. httplib's stop() would cut open streams, so it comes after.
  std::unique_lock<std::mutex> lock(flight_mu_);
  if (!flight_cv_.wait_for(lock, std::chrono::seconds(options_.drain_s), [&] { return in_flight_ == 0; })) {
    {
      std::lock_guard<std::mutex> active(active_mu_);
      for (uint64_t id : active_) {
        if (scheduler_) scheduler_->Cancel(id);
      }
    }
    flight_cv_.wait_for(lock, std::chrono::seconds(10), [&] { return in_flight_ == 0; });
  }
  lock.unlock();
  // A response's last bytes leave after its handler returns; stop() does nothing before the
  // listening thread runs (a load that failed at once).
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  for (int i = 0; i < 200 && http_thread_.joinable() && !http_->is_running(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  http_->stop();
  if (http_thread_.joinable()) http_thread_.join();
  stop_loop_ = true;
  if (scheduler_) scheduler_->Wake();
  if (loop_.joinable()) loop_.join();
  scheduler_.reset();  // requests it still holds release their exchanges while this is whole
}

std::shared_ptr<void> Server::EnterFlight() {
  {
    std::lock_guard<std::mutex> lock(flight_mu_);
    ++in_flight_;
  }
  return std::shared_ptr<void>(nullptr, [this](void*) {
    std::lock_guard<std::mutex> lock(flight_mu_);
    --in_flight_;
    flight_cv_.notify_all();
  });
}

void Server::Routes() {
  httplib::Server& s = *http_;
  s.set_error_handler(httplib::Server::HandlerWithResponse([this](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;  // ours already
    std::string message = "HTTP " + std::to_string(res.status);
    const auto route = KnownRoutes().find(req.path);
    if (res.status == 404 && route != KnownRoutes().end()) {  // a known path, another method
      res.status = 405;
      res.set_header("Allow", route->second);
      message = "method " + req.method + " is not allowed on " + req.path + " (use " + route->second + ")";
    } else if (res.status == 404) {
      message = "no route for " + req.method + " " + ValidUtf8(req.path.substr(0, 200));
    }
    if (res.status == 413) {
      message = "the body is larger than " + std::to_string(options_.max_body) + " bytes (--max-body)";
      res.set_header("Connection", "close");  // the body was not read: the connection cannot go on
    }
    Error(res, {res.status, message, ""});
    return httplib::Server::HandlerResponse::Handled;
  }));
  s.set_exception_handler([this](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown exception";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    Error(res, {500, "internal error: " + what, ""});
  });

  // Every route but /health checks the key, then (but /metrics) that the model is ready, and POSTs
  // that the server is not draining and that the body is JSON. In the handler, not in a
  // pre-routing hook: there the body is not read yet, and an early answer would leave it in the
  // connection to be parsed as the next request.
  const auto guard = [this](bool needs_model, httplib::Server::Handler h) {
    return [this, needs_model, h](const httplib::Request& req, httplib::Response& res) {
      if (!options_.api_key.empty() && !Authorized(req.get_header_value("Authorization"))) {
        res.set_header("WWW-Authenticate", "Bearer");
        return Error(res, {401, "invalid or missing API key: send 'Authorization: Bearer <key>'", ""});
      }
      if (needs_model && !ready_) {
        res.set_header("Retry-After", "1");
        return Error(res, {503, "the model is loading", ""});
      }
      if (req.method == "POST") {
        if (draining_) {
          res.set_header("Retry-After", "1");
          return Error(res, {503, "the server is shutting down", ""});
        }
        std::string type = req.get_header_value("Content-Type");
        for (char& c : type) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        if (type.rfind("application/json", 0) != 0) {
          return Error(res, {400, "the body must be application/json, got Content-Type '" +
                                      ValidUtf8(req.get_header_value("Content-Type").substr(0, 80)) + "'",
                             ""});
        }
      }
      h(req, res);
    };
  };
  const auto health = [this](const httplib::Request&, httplib::Response& res) {
    if (!ready_ || draining_) {
      res.set_header("Retry-After", "1");
      SendJson(res, 503, {{"status", draining_ ? "draining" : "loading"}});
    } else {
      SendJson(res, 200, {{"status", "ok"}});
    }
  };
  s.Get("/health", health);
  s.Get("/v1/health", health);
  const auto models = [this](const httplib::Request&, httplib::Response& res) {
    SendJson(res, 200,
             {{"object", "list"},
              {"data", json::array({{{"id", options_.alias},
                                     {"object", "model"},
                                     {"created", started_},
                                     {"owned_by", "trine"},
                                     {"meta",
                                      {{"n_vocab", ctx_->n_vocab()},
                                       {"n_ctx", ctx_->n_ctx()},
                                       {"n_parallel", ctx_->n_seq_max()},
                                       {"chat_template", format_ ? format_->name() : "none"}}}}})}});
  };
  s.Get("/v1/models", guard(true, models));
  s.Get("/models", guard(true, models));
  s.Get("/metrics", guard(false, [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(Metrics(), "text/plain; version=0.0.4");
  }));
  const auto chat = [this](const httplib::Request& q, httplib::Response& r) { HandleCompletion(q, r, true); };
  const auto completion = [this](const httplib::Request& q, httplib::Response& r) { HandleCompletion(q, r, false); };
  s.Post("/v1/chat/completions", guard(true, chat));
  s.Post("/chat/completions", guard(true, chat));
  s.Post("/v1/completions", guard(true, completion));
  s.Post("/completions", guard(true, completion));
  s.Post("/tokenize", guard(true, [this](const httplib::Request& q, httplib::Response& r) { HandleTokenize(q, r); }));
  s.Post("/detokenize",
         guard(true, [this](const httplib::Request& q, httplib::Response& r) { HandleDetokenize(q, r); }));
}

void Server::HandleTokenize(const httplib::Request& req, httplib::Response& res) {
  json o;
  ApiError err;
  if (!ParseJsonBody(req.body, &o, &err)) return Error(res, err);
  if (!o.contains("content") || !o["content"].is_string()) return Error(res, {400, "'content' must be a string", "content"});
  bool add_special = false, with_pieces = false;
  for (auto [key, out] : {std::pair<const char*, bool*>{"add_special", &add_special}, {"with_pieces", &with_pieces}}) {
    if (o.contains(key) && !o[key].is_boolean()) {
      return Error(res, {400, std::string("'") + key + "' must be a boolean", key});
    }
    if (o.contains(key)) *out = o[key].get<bool>();
  }
  std::vector<TokenId> ids;
  Status st = tokenizer_->Tokenize(o["content"].get<std::string>(), add_special, true, &ids);
  if (!st.ok()) return Error(res, {400, st.message(), "content"});
  json tokens = json::array();
  for (TokenId id : ids) {
    if (with_pieces) {
      tokens.push_back({{"id", id}, {"piece", ValidUtf8(tokenizer_->TokenToPiece(id, true))}});
    } else {
      tokens.push_back(id);
    }
  }
  SendJson(res, 200, {{"tokens", tokens}});
}

void Server::HandleDetokenize(const httplib::Request& req, httplib::Response& res) {
  json o;
  ApiError err;
  if (!ParseJsonBody(req.body, &o, &err)) return Error(res, err);
  if (!o.contains("tokens") || !o["tokens"].is_array()) return Error(res, {400, "'tokens' must be an array", "tokens"});
  std::string text;
  for (const json& t : o["tokens"]) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= ctx_->n_vocab()) {
      return Error(res, {400, "'tokens' must hold token ids in [0, " + std::to_string(ctx_->n_vocab()) + ")", "tokens"});
    }
    text += tokenizer_->TokenToPiece(static_cast<TokenId>(t.get<int64_t>()), false);
  }
  SendJson(res, 200, {{"content", ValidUtf8(text)}});
}

void Server::HandleCompletion(const httplib::Request& req, httplib::Response& res, bool chat) {
  auto ex = std::make_shared<Exchange>();
  ex->flight = EnterFlight();
  ApiError err;
  const bool ok = chat ? ParseChatRequest(req.body, options_.sampling, &ex->job, &err)
                       : ParseCompletionRequest(req.body, options_.sampling, &ex->job, &err);
  if (!ok) return Error(res, err);
  if (chat && !template_status_.ok()) {
    return Error(res, {400, "this model's chat template is not one trine renders (" + template_status_.message() +
                                "): start the server with --chat-template NAME or --chat-template-file FILE, or use /v1/completions",
                       "messages"});
  }
  const Job& job = ex->job;
  std::vector<TokenId> prompt;
  Status st;
  if (chat) {
    std::string text;
    st = format_->Render(job.messages, true, &text);
    if (!st.ok()) return Error(res, {400, st.message(), "messages"});
    // Templates that write the BOS text themselves get no second one.
    const bool bos_in_text = !bos_text_.empty() && text.compare(0, bos_text_.size(), bos_text_) == 0;
    st = tokenizer_->Tokenize(text, !bos_in_text, true, &prompt);
  } else {
    st = tokenizer_->Tokenize(job.prompt, true, true, &prompt);
  }
  if (!st.ok()) return Error(res, {400, st.message(), chat ? "messages" : "prompt"});
  ex->id = RandomId(chat ? "chatcmpl-" : "cmpl-");
  ex->created = UnixNow();

  Request r;
  r.prompt.assign(prompt.begin(), prompt.end());
  r.n_predict = job.max_tokens;
  r.sampling = job.sampling;
  r.ignore_eog = job.ignore_eos;
  Exchange* e = ex.get();
  r.on_token = [this, e](const TokenEvent& t) {
    const std::string piece = tokenizer_->TokenToPiece(t.token, false);
    TokenLogprob lp;
    if (e->job.logprobs) {
      std::vector<std::pair<int32_t, float>> top;
      ComputeLogprobs(t.logits, t.n_vocab, t.token, e->job.top_logprobs, &lp.logprob, &top);
      lp.token = piece;
      for (const auto& [id, v] : top) lp.top.emplace_back(tokenizer_->TokenToPiece(id, false), v);
    }
    std::lock_guard<std::mutex> lock(e->mu);
    e->text += piece;
    if (e->job.logprobs) e->logprobs.push_back(std::move(lp));
    e->stable = StableLength(e->text, e->job.stop, e->stable, &e->stop_hit);
    if (e->stop_hit) e->text.resize(e->stable);
    e->cv.notify_all();
    return !e->stop_hit;
  };
  // The exchange outlives the HTTP handler when a client leaves mid-stream: on_done keeps it alive.
  r.on_done = [this, ex](const RequestResult& result) {
    {
      std::lock_guard<std::mutex> lock(ex->mu);
      ex->done = true;
      ex->result = result;
      if (result.reason != FinishReason::kCancelled && result.reason != FinishReason::kError) {
        ex->stable = ex->text.size();  // the end: incomplete characters are replaced, not held
      }
    }
    ex->cv.notify_all();
    std::lock_guard<std::mutex> lock(active_mu_);
    active_.erase(ex->sched_id);
  };
  {
    // Registered before Submit so that on_done (on the scheduler thread) never races the insert.
    std::lock_guard<std::mutex> lock(active_mu_);
    st = scheduler_->Submit(std::move(r), &ex->sched_id);
    if (st.ok()) active_.insert(ex->sched_id);
  }
  if (!st.ok()) {
    if (st.code() == StatusCode::kUnavailable) {
      counters_.rejected_busy++;
      res.set_header("Retry-After", "1");
      return Error(res, {503, st.message(), ""});
    }
    return Error(res, {400, st.message(), chat ? "messages" : "prompt"});
  }
  if (job.stream) return Stream(ex, res);

  std::unique_lock<std::mutex> lock(ex->mu);
  ex->cv.wait(lock, [&] { return ex->done; });
  const RequestResult& result = ex->result;
  if (result.reason == FinishReason::kError) {
    const bool pool = result.error.code() == StatusCode::kOutOfMemory;
    if (pool) res.set_header("Retry-After", "1");
    return Error(res, {pool ? 503 : 500, result.error.message(), ""});
  }
  if (result.reason == FinishReason::kCancelled) return Error(res, {503, "the server is shutting down", ""});
  counters_.requests++;
  SendJson(res, 200,
           CompletionResponse(job, ex->id, ex->created, options_.alias, ex->text, ex->logprobs,
                              FinishName(result.reason), Usage{result.n_prompt, result.n_generated}));
}

void Server::Stream(const std::shared_ptr<Exchange>& ex, httplib::Response& res) {
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");  // nginx: pass events on as they come
  struct Cursor {
    bool role_sent = false;
    size_t sent = 0;
    size_t logprobs_sent = 0;
    int idle_waits = 0;
  };
  auto cur = std::make_shared<Cursor>();
  res.set_chunked_content_provider(
      "text/event-stream",
      [this, ex, cur](size_t, httplib::DataSink& sink) {
        const Job& job = ex->job;
        std::string out;
        if (!cur->role_sent && job.chat) {
          out += SseEvent(StreamChunk(job, ex->id, ex->created, options_.alias, "", {}, "assistant", nullptr));
        }
        cur->role_sent = true;
        std::unique_lock<std::mutex> lock(ex->mu);
        ex->cv.wait_for(lock, std::chrono::milliseconds(500), [&] { return ex->done || ex->stable > cur->sent; });
        if (ex->stable > cur->sent) {
          std::vector<TokenLogprob> lps(ex->logprobs.begin() + static_cast<long>(cur->logprobs_sent), ex->logprobs.end());
          cur->logprobs_sent = ex->logprobs.size();
          out += SseEvent(StreamChunk(job, ex->id, ex->created, options_.alias,
                                      ex->text.substr(cur->sent, ex->stable - cur->sent), lps, nullptr, nullptr));
          cur->sent = ex->stable;
        }
        const bool done = ex->done;
        const RequestResult result = ex->result;
        lock.unlock();
        if (done) {
          if (result.reason == FinishReason::kError || result.reason == FinishReason::kCancelled) {
            const bool pool = result.reason == FinishReason::kError && result.error.code() == StatusCode::kOutOfMemory;
            const ApiError e{result.reason == FinishReason::kError && !pool ? 500 : 503,
                             result.reason == FinishReason::kError ? result.error.message() : "the server is shutting down",
                             ""};
            CountError(e.status);
            out += "data: " + ErrorBody(e) + "\n\n";
          } else {
            counters_.requests++;
            out += SseEvent(StreamChunk(job, ex->id, ex->created, options_.alias, "", {}, nullptr,
                                        FinishName(result.reason)));
            if (job.include_usage) {
              out += SseEvent(UsageChunk(job, ex->id, ex->created, options_.alias,
                                         Usage{result.n_prompt, result.n_generated}));
            }
          }
          out += "data: [DONE]\n\n";
        } else if (out.empty() && ++cur->idle_waits % 10 == 0) {
          out = ": waiting\n\n";  // an SSE comment every ~5 s: finds clients that left
        }
        if (!out.empty() && !sink.write(out.data(), out.size())) return false;
        if (done) sink.done();
        return true;
      },
      [this, ex](bool) {
        std::lock_guard<std::mutex> lock(ex->mu);
        if (!ex->done) {  // the client left: its sequence and blocks go at the next step
          counters_.cancelled++;
          scheduler_->Cancel(ex->sched_id);
        }
      });
}

std::string Server::Metrics() const {
  std::ostringstream o;
  // Counters as integers (a double in the default format would print 1.23457e+06).
  const auto metric = [&](const char* name, const char* type, const char* help, auto value) {
    o << "# HELP trine_" << name << " " << help << "\n# TYPE trine_" << name << " " << type << "\ntrine_" << name << " ";
    if constexpr (std::is_floating_point_v<decltype(value)>) {
      o << std::fixed << std::setprecision(3) << value;
    } else {
      o << static_cast<uint64_t>(value);
    }
    o << "\n";
  };
  metric("requests_total", "counter", "Completion requests answered.", counters_.requests.load());
  metric("requests_rejected_busy_total", "counter", "Requests refused with 503 because the queue was full.",
         counters_.rejected_busy.load());
  metric("requests_cancelled_total", "counter", "Requests whose client left before the end.",
         counters_.cancelled.load());
  metric("errors_4xx_total", "counter", "Client errors answered.", counters_.errors_4xx.load());
  metric("errors_5xx_total", "counter", "Server errors answered.", counters_.errors_5xx.load());
  if (ready_) {  // scheduler_ is set before ready_ and never changes while serving
    const SchedulerStats s = scheduler_->stats();
    metric("prompt_tokens_total", "counter", "Prompt tokens evaluated.", s.prompt_tokens);
    metric("prompt_tokens_cached_total", "counter", "Prompt tokens reused from cached or running sequences.",
           s.cached_tokens);
    metric("generated_tokens_total", "counter", "Tokens generated.", s.generated_tokens);
    metric("tokens_per_second", "gauge", "Prompt and generated tokens per second of forward-pass time.",
           s.busy_seconds > 0 ? static_cast<double>(s.prompt_tokens + s.generated_tokens) / s.busy_seconds : 0.0);
    metric("steps_total", "counter", "Forward passes run.", s.steps);
    metric("queue_depth", "gauge", "Requests waiting for a sequence.", s.waiting);
    metric("busy_slots", "gauge", "Sequences running a request.", s.running);
    metric("slots", "gauge", "Sequences (-np).", scheduler_->n_seq_max());
    metric("kv_pool_blocks", "gauge", "Blocks of 16 positions in the KV pool.", s.kv_blocks);
    metric("kv_pool_blocks_used", "gauge", "KV pool blocks in use (running and cached sequences).",
           s.kv_blocks - s.kv_blocks_free);
  }
  return o.str();
}

}  // namespace trine::server
