// `trine serve`: the OpenAI-compatible HTTP server (tools/server/). Flags follow llama-server's
// spellings. The port opens first (/health answers "loading"), then the model loads; SIGTERM or
// SIGINT stops accepting, lets in-flight requests finish (--drain-timeout) and exits 0.
#include <pthread.h>
#include <signal.h>

#include <cxxopts.hpp>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "cli_args.h"
#include "cli_common.h"
#include "commands.h"
#include "model_options.h"
#include "profiler/plan_load.h"
#include "server/server.h"

namespace trine::cli {

namespace {

Status ReadApiKeyFile(const std::string& path, std::string* key) {
  std::string text;
  TRINE_RETURN_IF_ERROR(ReadTextFile(path, &text));
  std::istringstream in(text);
  std::getline(in, *key);
  while (!key->empty() && (key->back() == '\r' || key->back() == ' ')) key->pop_back();
  if (key->empty()) return InvalidArgument(path + ": the first line (the API key) is empty");
  return Status::Ok();
}

}  // namespace

int RunServe(int argc, char** argv) {
  cxxopts::Options opts("trine serve", "OpenAI-compatible HTTP server with continuous batching.");
  AddModelOptions(opts);
  AddPlanOptions(opts);
  AddSamplingOptions(opts);
  AddChatTemplateOptions(opts);
  opts.add_options("server")("host", "address to listen on", cxxopts::value<std::string>()->default_value("127.0.0.1"))(
      "port", "port to listen on (0: any free port, printed)", cxxopts::value<int>()->default_value("8080"))(
      "parallel", "sequences decoded at once (-np N, as llama-server)", cxxopts::value<int>()->default_value("4"))(
      "kv-pool", "KV pool positions shared by all sequences (0: -c times -np)", cxxopts::value<int>()->default_value("0"))(
      "api-key", "require 'Authorization: Bearer KEY'", cxxopts::value<std::string>())(
      "api-key-file", "read the API key from the first line of a file", cxxopts::value<std::string>())(
      "alias", "model id in responses (default: the file name)", cxxopts::value<std::string>())(
      "timeout", "read/write timeout of a connection, seconds", cxxopts::value<int>()->default_value("600"))(
      "max-body", "largest request body, bytes", cxxopts::value<int64_t>()->default_value("1048576"))(
      "queue", "requests that may wait for a sequence (more get 503)", cxxopts::value<int>()->default_value("64"))(
      "drain-timeout", "on SIGTERM, seconds in-flight requests may take to finish",
      cxxopts::value<int>()->default_value("30"))("h,help", "show this help");
  cxxopts::ParseResult a;
  if (const int rc = ParseCommand("serve", opts, argc, argv, &a); rc >= 0) return rc;

  server::ServerOptions so;
  so.host = a["host"].as<std::string>();
  so.port = a["port"].as<int>();
  if (so.port < 0 || so.port > 65535) return Fail("--port must be in [0, 65535], got " + std::to_string(so.port));
  const int n_parallel = a["parallel"].as<int>();
  if (n_parallel < 1 || n_parallel > 256) return Fail("-np must be in [1, 256], got " + std::to_string(n_parallel));
  so.n_parallel = n_parallel;
  so.timeout_s = a["timeout"].as<int>();
  if (so.timeout_s < 1) return Fail("--timeout must be >= 1 second");
  const int64_t max_body = a["max-body"].as<int64_t>();
  if (max_body < 1024) return Fail("--max-body must be >= 1024 bytes");
  so.max_body = static_cast<size_t>(max_body);
  so.max_waiting = a["queue"].as<int>();
  if (so.max_waiting < 0 || so.max_waiting > 4096) return Fail("--queue must be in [0, 4096]");
  so.drain_s = a["drain-timeout"].as<int>();
  if (so.drain_s < 0) return Fail("--drain-timeout must be >= 0");
  if (a.count("api-key") && a.count("api-key-file")) return UsageError("serve", "give --api-key or --api-key-file, not both");
  if (a.count("api-key")) so.api_key = a["api-key"].as<std::string>();
  if (a.count("api-key-file")) {
    Status st = ReadApiKeyFile(a["api-key-file"].as<std::string>(), &so.api_key);
    if (!st.ok()) return Fail(st);
  }
  Status st = ParseChatTemplateOption(a, &so.chat_template);
  if (!st.ok()) return Fail(st);
  st = ParseSamplerParams(a, &so.sampling);
  if (!st.ok()) return Fail(st);
  ContextParams cp;
  st = ParseContextParams(a, &cp);
  if (!st.ok()) return Fail(st);
  const int kv_pool = a["kv-pool"].as<int>();
  if (kv_pool < 0) return Fail("--kv-pool must be >= 0");
  PlanFlags plan_flags;
  st = ParsePlanFlags(a, &plan_flags);
  if (!st.ok()) return Fail(st);
  const std::string path = ResolveModelPath(a["model"].as<std::string>());
  so.alias = a.count("alias") ? a["alias"].as<std::string>() : path.substr(path.find_last_of('/') + 1);

  // Signals go to one waiting thread (sigwait), never to a worker in the middle of a request.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a client that leaves is a failed write, not a dead server

  server::Server server(so);
  int port = 0;
  st = server.Listen(&port);
  if (!st.ok()) return Fail(st);
  std::fprintf(stderr, "trine serve: listening on http://%s:%d (loading %s)\n", so.host.c_str(), port, path.c_str());
  std::fflush(stderr);

  const auto t0 = std::chrono::steady_clock::now();
  std::unique_ptr<Model> model;
  ModelLoadOptions lo;
  lo.use_mmap = !a.count("no-mmap");
  // Under --mem-budget/--plan/--auto the planner budgets the KV pool of all sequences: --kv-pool,
  // else -c (or 4096 when -c is 0, before the model says its own) times -np.
  profiler::PlanRequest plan;
  plan.mem_budget = plan_flags.mem_budget;
  plan.auto_plan = plan_flags.auto_plan;
  plan.plan_path = plan_flags.plan_path;
  plan.no_cache = plan_flags.no_cache;
  plan.mlock = plan_flags.mlock;
  plan.n_ctx = kv_pool > 0 ? kv_pool : (cp.n_ctx > 0 ? cp.n_ctx : 4096) * n_parallel;
  plan.kv_type = cp.kv_type;
  plan.n_threads = cp.n_threads;
  plan.progress = [](float done, const std::string& what) {  // --auto's profile: seconds to minutes
    std::fprintf(stderr, "trine serve: profiling %3.0f%% %s\n", 100.0f * done, what.c_str());
    return true;
  };
  profiler::PlanOutcome outcome;
  st = profiler::LoadModelWithPlan(path, lo, plan, &model, &outcome);
  if (st.ok() && outcome.active) std::fprintf(stderr, "trine serve: %s\n", outcome.summary.c_str());
  std::unique_ptr<Context> ctx;
  if (st.ok()) {
    cp.n_seq_max = n_parallel;
    if (cp.n_ctx == 0) cp.n_ctx = std::min(model->config().n_ctx_train, 4096);
    cp.kv_pool = kv_pool > 0 ? kv_pool : cp.n_ctx * n_parallel;
    st = Context::Create(*model, cp, &ctx);
  }
  const int n_threads = ctx ? ctx->n_threads() : 0;
  if (st.ok()) st = server.Ready(std::move(model), std::move(ctx));
  if (!st.ok()) {
    server.Shutdown();
    return Fail(st);
  }
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::fprintf(stderr,
               "trine serve: ready in %.0f ms: %d sequences of up to %d positions, a KV pool of %d positions, "
               "%d threads%s\n",
               ms, n_parallel, cp.n_ctx, cp.kv_pool, n_threads,
               so.api_key.empty() ? "" : ", API key required");
  std::fflush(stderr);

  int sig = 0;
  sigwait(&signals, &sig);
  std::fprintf(stderr, "trine serve: %s: draining in-flight requests (up to %d s)\n", sig == SIGTERM ? "SIGTERM" : "SIGINT",
               so.drain_s);
  std::fflush(stderr);
  server.Shutdown();
  std::fprintf(stderr, "trine serve: stopped\n");
  return kExitOk;
}

}  // namespace trine::cli
