// `trine serve` as a client sees it: a real server process on a free loopback port with the
// bundled model. Every endpoint, streaming, 8 concurrent requests that each get the greedy text
// they get alone, cancel on disconnect, the API key, the error paths (a malformed-request suite),
// and the drain on SIGTERM.
#include <gtest/gtest.h>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "server_process.h"

namespace trine::testing {
namespace {

using json = nlohmann::json;

// Keep-alive: a test's requests share one connection, so an error answered before its body was
// read would show up as a garbled next request.
std::unique_ptr<httplib::Client> Client(const ServerProcess& s) {
  auto c = std::make_unique<httplib::Client>("127.0.0.1", s.port());
  c->set_read_timeout(60, 0);
  c->set_keep_alive(true);
  return c;
}

httplib::Result PostJson(httplib::Client& c, const std::string& path, const json& body,
                         const httplib::Headers& headers = {}) {
  return c.Post(path.c_str(), headers, body.dump(), "application/json");
}

json Chat(const std::string& user, int max_tokens) {
  return {{"messages", {{{"role", "user"}, {"content", user}}}}, {"max_tokens", max_tokens}, {"temperature", 0}};
}

json Completion(const std::string& prompt, int max_tokens) {
  return {{"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0}};
}

std::string ChatText(const json& r) { return r["choices"][0]["message"]["content"].get<std::string>(); }

// The JSON payloads of a server-sent event stream ("data: ..." lines), "[DONE]" included.
std::vector<std::string> SseData(const std::string& body) {
  std::vector<std::string> out;
  size_t at = 0;
  while ((at = body.find("data: ", at)) != std::string::npos) {
    const size_t end = body.find("\n\n", at);
    out.push_back(body.substr(at + 6, end - at - 6));
    at = end == std::string::npos ? body.size() : end;
  }
  return out;
}

class Serve : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = new ServerProcess({"-np", "4", "-c", "256"}); }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override { ASSERT_TRUE(server_->ok()) << server_->error(); }
  static ServerProcess* server_;
};
ServerProcess* Serve::server_ = nullptr;

TEST_F(Serve, HealthModelsTokenizeDetokenizeMetrics) {
  auto c = Client(*server_);
  auto r = c->Get("/health");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(json::parse(r->body)["status"], "ok");
  r = c->Get("/v1/models");
  ASSERT_TRUE(r);
  const json models = json::parse(r->body);
  EXPECT_EQ(models["object"], "list");
  EXPECT_EQ(models["data"][0]["object"], "model");
  EXPECT_EQ(models["data"][0]["id"], "bitnet-tiny-stories-TQ2_0-f16emb.gguf");
  r = PostJson(*c, "/tokenize", {{"content", "Once upon a time"}});
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json tokens = json::parse(r->body)["tokens"];
  ASSERT_GE(tokens.size(), 3u);
  r = PostJson(*c, "/detokenize", {{"tokens", tokens}});
  ASSERT_TRUE(r);
  EXPECT_EQ(json::parse(r->body)["content"], " Once upon a time");  // SPM's leading space
  r = c->Get("/metrics");
  ASSERT_TRUE(r);
  for (const char* m : {"trine_requests_total", "trine_prompt_tokens_total", "trine_generated_tokens_total",
                        "trine_tokens_per_second", "trine_queue_depth", "trine_busy_slots", "trine_kv_pool_blocks_used"}) {
    EXPECT_NE(r->body.find(std::string("# TYPE ") + m), std::string::npos) << m;
  }
}

TEST_F(Serve, ChatAndCompletionShapesAndUsage) {
  auto c = Client(*server_);
  auto r = PostJson(*c, "/v1/chat/completions", Chat("Tell me a story.", 12));
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(r->get_header_value("Content-Type"), "application/json");
  json j = json::parse(r->body);
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["id"].get<std::string>().rfind("chatcmpl-", 0), 0u);
  EXPECT_EQ(j["choices"][0]["message"]["role"], "assistant");
  EXPECT_FALSE(ChatText(j).empty());
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(j["usage"]["completion_tokens"], 12);
  EXPECT_GT(j["usage"]["prompt_tokens"].get<int>(), 5);
  EXPECT_EQ(j["usage"]["total_tokens"].get<int>(),
            j["usage"]["prompt_tokens"].get<int>() + j["usage"]["completion_tokens"].get<int>());
  r = PostJson(*c, "/v1/completions", Completion("Once upon a time", 8));
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  j = json::parse(r->body);
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_FALSE(j["choices"][0]["text"].get<std::string>().empty());
  EXPECT_EQ(j["usage"]["completion_tokens"], 8);
  // OpenAI's penalties are applied, not refused.
  json pen = Chat("Tell me a story.", 4);
  pen["presence_penalty"] = 0.6;
  pen["frequency_penalty"] = 0.4;
  r = PostJson(*c, "/v1/chat/completions", pen);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  // max_completion_tokens is chat's newer name for max_tokens.
  json body = Chat("Hi", 1);
  body.erase("max_tokens");
  body["max_completion_tokens"] = 3;
  r = PostJson(*c, "/v1/chat/completions", body);
  ASSERT_TRUE(r);
  EXPECT_EQ(json::parse(r->body)["usage"]["completion_tokens"], 3);
}

// A streamed answer is the non-streamed one in pieces: role first, deltas, the finish chunk, the
// usage chunk when asked, then [DONE].
TEST_F(Serve, StreamingGivesTheSameTextInServerSentEvents) {
  auto c = Client(*server_);
  auto r = PostJson(*c, "/v1/chat/completions", Chat("Tell me about a cat.", 20));
  ASSERT_TRUE(r);
  const std::string whole = ChatText(json::parse(r->body));
  json body = Chat("Tell me about a cat.", 20);
  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}};
  r = PostJson(*c, "/v1/chat/completions", body);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200);
  EXPECT_EQ(r->get_header_value("Content-Type"), "text/event-stream");
  const auto events = SseData(r->body);
  ASSERT_GE(events.size(), 4u);
  EXPECT_EQ(events.back(), "[DONE]");
  const json first = json::parse(events[0]);
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["delta"]["role"], "assistant");
  std::string text;
  std::string finish;
  for (size_t i = 1; i + 2 < events.size(); ++i) {
    const json e = json::parse(events[i]);
    EXPECT_EQ(e["id"], first["id"]);
    if (e["choices"][0]["delta"].contains("content")) text += e["choices"][0]["delta"]["content"].get<std::string>();
    if (!e["choices"][0]["finish_reason"].is_null()) finish = e["choices"][0]["finish_reason"];
  }
  EXPECT_EQ(text, whole);
  EXPECT_EQ(finish, "length");
  const json usage = json::parse(events[events.size() - 2]);
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["completion_tokens"], 20);
}

TEST_F(Serve, StopStringsAndLogprobs) {
  auto c = Client(*server_);
  auto r = PostJson(*c, "/v1/completions", Completion("Once upon a time", 30));
  ASSERT_TRUE(r);
  const std::string whole = json::parse(r->body)["choices"][0]["text"];
  // Stop at the second word of the greedy text: the text ends just before it.
  const size_t cut = whole.find(' ', 1);
  ASSERT_NE(cut, std::string::npos) << whole;
  const size_t next = whole.find(' ', cut + 1);
  const std::string stop = whole.substr(cut, (next == std::string::npos ? whole.size() : next) - cut);
  json body = Completion("Once upon a time", 30);
  body["stop"] = json::array({stop, "never appears"});
  r = PostJson(*c, "/v1/completions", body);
  ASSERT_TRUE(r);
  json j = json::parse(r->body);
  EXPECT_EQ(j["choices"][0]["text"], whole.substr(0, cut)) << "stop " << stop;
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  // The same with streaming: nothing of the stop string leaks into a delta.
  body["stream"] = true;
  r = PostJson(*c, "/v1/completions", body);
  ASSERT_TRUE(r);
  std::string streamed;
  for (const std::string& e : SseData(r->body)) {
    if (e != "[DONE]") streamed += json::parse(e)["choices"][0]["text"].get<std::string>();
  }
  EXPECT_EQ(streamed, whole.substr(0, cut));

  json lp = Chat("Tell me a story.", 6);
  lp["logprobs"] = true;
  lp["top_logprobs"] = 3;
  r = PostJson(*c, "/v1/chat/completions", lp);
  ASSERT_TRUE(r);
  j = json::parse(r->body);
  const json& content = j["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 6u);
  for (const json& t : content) {
    EXPECT_LE(t["logprob"].get<double>(), 0.0);
    ASSERT_EQ(t["top_logprobs"].size(), 3u);
    // Greedy: the chosen token is the most likely one.
    EXPECT_EQ(t["top_logprobs"][0]["token"], t["token"]);
    EXPECT_GE(t["top_logprobs"][0]["logprob"].get<double>(), t["top_logprobs"][1]["logprob"].get<double>());
  }
}

// Eight requests at once, each with its own prompt, give the greedy text each gets alone.
TEST_F(Serve, EightConcurrentRequestsEachGetTheirAloneText) {
  auto c = Client(*server_);
  const int n = 8;
  std::vector<std::string> alone(n), together(n);
  const auto prompt = [](int i) { return "Story " + std::to_string(i) + ": once there was a"; };
  for (int i = 0; i < n; ++i) {
    auto r = PostJson(*c, "/v1/completions", Completion(prompt(i), 16));
    ASSERT_TRUE(r);
    alone[static_cast<size_t>(i)] = json::parse(r->body)["choices"][0]["text"];
  }
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      auto ci = Client(*server_);
      auto r = PostJson(*ci, "/v1/completions", Completion(prompt(i), 16));
      if (r && r->status == 200) {
        together[static_cast<size_t>(i)] = json::parse(r->body)["choices"][0]["text"];
        ++ok;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), n);
  for (int i = 0; i < n; ++i) EXPECT_EQ(together[static_cast<size_t>(i)], alone[static_cast<size_t>(i)]) << i;
}

double Metric(httplib::Client& c, const std::string& name) {
  auto r = c.Get("/metrics");
  if (!r) return -1;
  const std::string key = "\n" + name + " ";
  const size_t at = r->body.find(key);
  return at == std::string::npos ? -1 : std::stod(r->body.substr(at + key.size()));
}

// A client that leaves mid-stream ends its request: the slot is free again at once. The request
// asks for 4000 tokens (a 4096-position context) so that it is still running, whatever the
// machine's speed, when the client goes.
TEST(ServeLeave, ClientThatLeavesAStreamFreesItsSlot) {
  ServerProcess s({"-np", "2", "-c", "4096"});
  ASSERT_TRUE(s.ok()) << s.error();
  auto c = Client(s);
  const double cancelled_before = Metric(*c, "trine_requests_cancelled_total");
  json body = Completion("Once upon a time", 4000);
  body["stream"] = true;
  body["ignore_eos"] = true;
  int chunks = 0;
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  req.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) { return ++chunks < 3; };
  auto stream_client = Client(s);
  stream_client->send(req);  // fails by design: the receiver stops after 3 chunks
  EXPECT_GE(chunks, 3);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline &&
         (Metric(*c, "trine_busy_slots") != 0 || Metric(*c, "trine_requests_cancelled_total") < cancelled_before + 1)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(Metric(*c, "trine_busy_slots"), 0);
  EXPECT_EQ(Metric(*c, "trine_requests_cancelled_total"), cancelled_before + 1);
}

// The malformed-request suite: each gets a 4xx OpenAI-shaped error naming the problem, and the
// server keeps answering.
struct Bad {
  const char* path;
  std::string body;
  const char* content_type;
  int status;
  const char* says;  // a piece of the error message
};

TEST_F(Serve, MalformedRequestsGet4xxJsonAndTheServerKeepsServing) {
  const std::string chat = "/v1/chat/completions", comp = "/v1/completions";
  const auto with = [](json base, const char* key, json value) {
    base[key] = std::move(value);
    return base.dump();
  };
  const json ok_chat = Chat("hi", 2), ok_comp = Completion("hi", 2);
  std::string deep(200, '[');
  deep += std::string(200, ']');
  std::string bad_utf8_role = R"({"messages":[{"role":"us)" "\xff" R"(er","content":"hi"}]})";
  const std::vector<Bad> cases = {
      {"/v1/chat/completions", "", "application/json", 400, "empty"},
      {"/v1/chat/completions", "{", "application/json", 400, "not valid JSON"},
      {"/v1/chat/completions", R"({"messages":[{"role":"user","content":"hi"})", "application/json", 400, "not valid JSON"},
      {"/v1/chat/completions", "[]", "application/json", 400, "JSON object"},
      {"/v1/chat/completions", "\"text\"", "application/json", 400, "JSON object"},
      {"/v1/chat/completions", ok_chat.dump(), "text/plain", 400, "application/json"},
      {"/v1/chat/completions", ok_chat.dump(), "application/x-www-form-urlencoded", 400, "application/json"},
      {"/v1/chat/completions", "{}", "application/json", 400, "'messages' is required"},
      {"/v1/chat/completions", R"({"messages":"hi"})", "application/json", 400, "'messages' must be an array"},
      {"/v1/chat/completions", R"({"messages":[]})", "application/json", 400, "at least one message"},
      {"/v1/chat/completions", R"({"messages":[1]})", "application/json", 400, "must be an object"},
      {"/v1/chat/completions", R"({"messages":[{"content":"hi"}]})", "application/json", 400, "role"},
      {"/v1/chat/completions", R"({"messages":[{"role":"wizard","content":"hi"}]})", "application/json", 400, "wizard"},
      {"/v1/chat/completions", R"({"messages":[{"role":"user"}]})", "application/json", 400, "content' is required"},
      {"/v1/chat/completions", R"({"messages":[{"role":"user","content":5}]})", "application/json", 400, "content"},
      {"/v1/chat/completions", R"({"messages":[{"role":"user","content":[{"type":"image_url"}]}]})", "application/json", 400,
       "image_url"},
      {"/v1/chat/completions", R"({"messages":[{"role":"user","content":"a\u0000b"}]})", "application/json", 400, "NUL"},
      {"/v1/chat/completions", bad_utf8_role, "application/json", 400, "UTF-8"},
      {"/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"\xc3\x28\"}]}", "application/json", 400,
       "UTF-8"},
      {"/v1/chat/completions", "{\"model\":\"\xff\",\"messages\":[]}", "application/json", 400, "UTF-8"},
      {"/v1/chat/completions", deep, "application/json", 400, "nested"},
      {"/v1/chat/completions", with(ok_chat, "max_tokens", 0), "application/json", 400, "max_tokens"},
      {"/v1/chat/completions", with(ok_chat, "max_tokens", -5), "application/json", 400, "max_tokens"},
      {"/v1/chat/completions", with(ok_chat, "max_tokens", 1.5), "application/json", 400, "max_tokens"},
      {"/v1/chat/completions", with(ok_chat, "max_tokens", "10"), "application/json", 400, "max_tokens"},
      {"/v1/chat/completions", R"({"messages":[{"role":"user","content":"hi"}],"max_tokens":1e400})", "application/json",
       400, ""},
      {"/v1/chat/completions", with(ok_chat, "max_tokens", json::parse("18446744073709551615")), "application/json", 400,
       "max_tokens"},
      {"/v1/chat/completions", with(ok_chat, "max_completion_tokens", 0), "application/json", 400, "max_completion_tokens"},
      {"/v1/chat/completions", with(ok_chat, "temperature", 3), "application/json", 400, "temperature"},
      {"/v1/chat/completions", with(ok_chat, "temperature", -1), "application/json", 400, "temperature"},
      {"/v1/chat/completions", with(ok_chat, "temperature", "hot"), "application/json", 400, "temperature"},
      {"/v1/chat/completions", with(ok_chat, "top_p", 0), "application/json", 400, "top_p"},
      {"/v1/chat/completions", with(ok_chat, "top_p", 1.5), "application/json", 400, "top_p"},
      {"/v1/chat/completions", with(ok_chat, "n", 2), "application/json", 400, "'n'"},
      {"/v1/chat/completions", with(ok_chat, "n", 0), "application/json", 400, "'n'"},
      {"/v1/chat/completions", with(ok_chat, "top_logprobs", 3), "application/json", 400, "logprobs"},
      {"/v1/chat/completions", with(json::parse(with(ok_chat, "logprobs", true)), "top_logprobs", 21), "application/json",
       400, "top_logprobs"},
      {"/v1/chat/completions", with(ok_chat, "presence_penalty", 2.5), "application/json", 400, "presence_penalty"},
      {"/v1/chat/completions", with(ok_chat, "frequency_penalty", 3), "application/json", 400, "frequency_penalty"},
      {"/v1/chat/completions", with(ok_chat, "stop", 5), "application/json", 400, "stop"},
      {"/v1/chat/completions", with(ok_chat, "stop", json::array({"a", "b", "c", "d", "e"})), "application/json", 400,
       "at most 4"},
      {"/v1/chat/completions", with(ok_chat, "stop", ""), "application/json", 400, "stop"},
      {"/v1/chat/completions", with(ok_chat, "stream", "yes"), "application/json", 400, "stream"},
      {"/v1/chat/completions", with(ok_chat, "stream_options", json{{"include_usage", true}}), "application/json", 400,
       "stream_options"},
      {"/v1/chat/completions", with(ok_chat, "seed", "x"), "application/json", 400, "seed"},
      {"/v1/chat/completions", with(ok_chat, "model", 7), "application/json", 400, "model"},
      {"/v1/chat/completions", with(ok_chat, "tools", json::array()), "application/json", 400, "tools"},
      {"/v1/completions", "{}", "application/json", 400, "'prompt' is required"},
      {"/v1/completions", with(ok_comp, "prompt", 12), "application/json", 400, "prompt"},
      {"/v1/completions", with(ok_comp, "prompt", ""), "application/json", 400, "prompt"},
      {"/v1/completions", with(ok_comp, "prompt", json::array({"a", "b"})), "application/json", 400, "several prompts"},
      {"/v1/completions", with(ok_comp, "logprobs", 6), "application/json", 400, "logprobs"},
      {"/v1/completions", with(ok_comp, "suffix", "x"), "application/json", 400, "suffix"},
      {"/v1/completions", with(ok_comp, "prompt", std::string(3000, 'a') + " end"), "application/json", 400, "context"},
      {"/tokenize", "{}", "application/json", 400, "content"},
      {"/detokenize", R"({"tokens":[1,-2]})", "application/json", 400, "tokens"},
      {"/detokenize", R"({"tokens":[99999999]})", "application/json", 400, "tokens"},
      {"/v1/chat/completions", std::string(2 << 20, 'x'), "application/json", 413, "larger than"},
  };
  ASSERT_GE(cases.size(), 40u);
  auto c = Client(*server_);
  for (const Bad& b : cases) {
    SCOPED_TRACE(std::string(b.path) + " " + b.body.substr(0, 120));
    auto r = c->Post(b.path, b.body, b.content_type);
    ASSERT_TRUE(r) << httplib::to_string(r.error());
    EXPECT_EQ(r->status, b.status) << r->body;
    json e;
    ASSERT_NO_THROW(e = json::parse(r->body)) << r->body;
    ASSERT_TRUE(e.contains("error")) << r->body;
    EXPECT_EQ(e["error"]["code"], b.status);
    EXPECT_NE(e["error"]["message"].get<std::string>().find(b.says), std::string::npos) << e["error"]["message"];
    EXPECT_TRUE(e["error"]["type"].is_string());
  }
  // 10 MiB body, a truncated body (Content-Length larger than what is sent is a timeout: not
  // sent here), and routes: 404, 405.
  auto r = c->Post("/v1/completions", std::string(10 << 20, '{'), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 413);
  r = c->Get("/v1/nothing");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  EXPECT_EQ(json::parse(r->body)["error"]["code"], 404);
  r = c->Get("/v1/chat/completions");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 405);
  EXPECT_EQ(r->get_header_value("Allow"), "POST");
  r = c->Delete("/v1/models");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 405);
  // Still serving.
  r = c->Get("/health");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  r = PostJson(*c, "/v1/completions", Completion("Once upon a time", 3));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
}

TEST(ServeAuth, ApiKeyIsRequiredExceptForHealth) {
  ServerProcess s({"-np", "1", "--api-key", "sekrit-key"});
  ASSERT_TRUE(s.ok()) << s.error();
  auto c = Client(s);
  auto r = c->Get("/health");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  for (const httplib::Headers& h : {httplib::Headers{}, httplib::Headers{{"Authorization", "Bearer wrong"}},
                                    httplib::Headers{{"Authorization", "Bearer sekrit-key2"}},
                                    httplib::Headers{{"Authorization", "sekrit-key"}}}) {
    r = c->Get("/v1/models", h);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 401);
    EXPECT_EQ(json::parse(r->body)["error"]["type"], "authentication_error");
  }
  r = c->Get("/v1/models", {{"Authorization", "Bearer sekrit-key"}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  // A refused POST on a kept-alive connection leaves nothing behind for the next request.
  for (int i = 0; i < 3; ++i) {
    r = PostJson(*c, "/v1/completions", Completion("Once", 2), {{"Authorization", "Bearer wrong"}});
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 401);
  }
  r = PostJson(*c, "/v1/completions", Completion("Once", 2), {{"Authorization", "Bearer sekrit-key"}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
}

// One sequence and no queue: a second request while the first runs gets 503 with Retry-After.
TEST(ServeBusy, AFullQueueAnswers503) {
  ServerProcess s({"-np", "1", "--queue", "0", "-c", "4096"});  // 4000 tokens: still running at chunk 2
  ASSERT_TRUE(s.ok()) << s.error();
  json body = Completion("Once upon a time", 4000);
  body["stream"] = true;
  body["ignore_eos"] = true;
  std::atomic<int> chunks{0};
  std::atomic<int> status503{0};
  std::string retry_after;
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  req.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) {
    if (++chunks == 2) {  // running now: another request cannot wait
      auto c2 = Client(s);
      auto r = PostJson(*c2, "/v1/completions", Completion("Hello", 2));
      if (r && r->status == 503) {
        ++status503;
        retry_after = r->get_header_value("Retry-After");
      }
    }
    return true;
  };
  auto c = Client(s);
  auto res = c->send(req);
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(status503.load(), 1);
  EXPECT_EQ(retry_after, "1");
}

// SIGTERM while a stream runs: the stream still ends with [DONE], then the process exits 0.
TEST(ServeDrain, SigtermFinishesInFlightRequestsAndExitsZero) {
  ServerProcess s({"-np", "2"});
  ASSERT_TRUE(s.ok()) << s.error();
  json body = Completion("Once upon a time", 200);
  body["stream"] = true;
  body["ignore_eos"] = true;
  std::string received;
  bool signalled = false;
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    received.append(data, n);
    if (!signalled) {
      signalled = true;
      kill(s.pid(), SIGTERM);
    }
    return true;
  };
  auto c = Client(s);
  auto res = c->send(req);
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 200);
  EXPECT_TRUE(signalled);
  ASSERT_GE(received.size(), 16u);
  EXPECT_EQ(received.substr(received.size() - 14), "data: [DONE]\n\n");
  EXPECT_EQ(s.Terminate(), 0) << s.Stderr();
  EXPECT_NE(s.Stderr().find("draining"), std::string::npos);
}

}  // namespace
}  // namespace trine::testing
