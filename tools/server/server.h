// `trine serve`: an OpenAI-compatible HTTP server over the continuous-batching scheduler
// (runtime/scheduler.h). HTTP is cpp-httplib (Debian's libcpp-httplib-dev, what llama-server
// uses): one thread per connection from a bounded pool; every request thread parses and validates
// its body, submits a job to the scheduler and waits for (or streams) its tokens, while one
// scheduler thread runs the forward passes for all of them.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_set>

#include <httplib.h>

#include "core/status.h"
#include "model/model.h"
#include "runtime/context.h"
#include "runtime/scheduler.h"
#include "sampler/sampler.h"
#include "server/openai.h"
#include "tokenizer/chat_format.h"
#include "tokenizer/tokenizer.h"

namespace trine::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;             // 0: any free port (printed)
  std::string api_key;         // empty: no authentication
  std::string alias;           // the model id in responses and /v1/models
  size_t max_body = 1 << 20;   // bytes; larger bodies get 413
  int timeout_s = 600;         // read/write timeout of a connection
  int max_waiting = 64;        // requests queued beyond the busy sequences; more get 503
  int n_parallel = 4;          // sequences (-np): with max_waiting, sizes the connection threads
  int drain_s = 30;            // on SIGTERM: how long in-flight requests may finish
  std::optional<std::string> chat_template;  // forced: a built-in's name or a Jinja template's text
  SamplerParams sampling;      // defaults for fields a request leaves out
};

struct Counters {
  std::atomic<uint64_t> requests{0};      // completion requests answered 200
  std::atomic<uint64_t> errors_4xx{0};
  std::atomic<uint64_t> errors_5xx{0};
  std::atomic<uint64_t> rejected_busy{0};  // 503 queue full
  std::atomic<uint64_t> cancelled{0};      // clients gone mid-request
};

class Server {
 public:
  explicit Server(const ServerOptions& options);
  ~Server();

  // Binds the port and starts answering (/health says "loading" until Ready). *port: the bound port.
  Status Listen(int* port);
  // Hands over the loaded model and context; starts the scheduler thread; /health says "ok".
  Status Ready(std::unique_ptr<Model> model, std::unique_ptr<Context> ctx);
  // Refuses new completion requests (503; /health says "draining"), lets those in flight finish
  // for drain_s, cancels the rest, then stops listening; returns when every thread has ended.
  void Shutdown();

 private:
  struct Exchange;  // one completion request's state shared by its HTTP thread and the scheduler

  void Routes();
  void HandleCompletion(const httplib::Request& req, httplib::Response& res, bool chat);
  void Stream(const std::shared_ptr<Exchange>& ex, httplib::Response& res);
  void HandleTokenize(const httplib::Request& req, httplib::Response& res);
  void HandleDetokenize(const httplib::Request& req, httplib::Response& res);
  void CountError(int status);  // for /metrics
  // Sends an OpenAI error (and counts it).
  void Error(httplib::Response& res, const ApiError& e);
  std::string Metrics() const;
  // Counts a completion request until the returned token's last copy goes.
  std::shared_ptr<void> EnterFlight();
  bool Authorized(const std::string& header) const;

  ServerOptions options_;
  std::unique_ptr<httplib::Server> http_;
  std::thread http_thread_;
  std::atomic<bool> ready_{false};
  std::atomic<bool> draining_{false};
  std::unique_ptr<Model> model_;
  std::unique_ptr<Context> ctx_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<ChatFormat> format_;  // null when the model's template cannot be rendered
  Status template_status_;  // not ok: the model's template is unknown and no --chat-template was given
  std::string bos_text_;
  // Before scheduler_: exchanges it holds count themselves out of flight when they go.
  std::mutex flight_mu_;
  std::condition_variable flight_cv_;
  int in_flight_ = 0;
  std::unique_ptr<Scheduler> scheduler_;
  std::thread loop_;
  std::atomic<bool> stop_loop_{false};
  std::mutex active_mu_;
  std::unordered_set<uint64_t> active_;  // scheduler ids of requests in flight
  Counters counters_;
  int64_t started_ = 0;
};

}  // namespace trine::server
