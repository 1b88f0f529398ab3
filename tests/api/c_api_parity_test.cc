// The C API against the rest of trine: four contexts on one shared model in four threads give the
// greedy tokens of a single-threaded run; greedy tokens equal `trine generate --json --temp 0`;
// libtrine.so exports only trine_* symbols and carries the SONAME libtrine.so.0.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/test_util.h"
#include "trine/trine.h"

namespace {

using trine::testing::ModelPath;
using trine::testing::RunTrine;

const std::string kModel = ModelPath("bitnet-tiny-stories-TQ2_0-f16emb.gguf");
const char* const kPrompts[] = {"Once upon a time", "The capital of France is", "1 2 3 4", "Tom and his dog"};

struct GenRun {
  std::vector<trine_token> ids;
  std::string text;
  int32_t result = 0;
  std::string error;
};

bool Collect(const char* piece, size_t len, trine_token token, void* user) {
  auto* r = static_cast<GenRun*>(user);
  r->ids.push_back(token);
  r->text.append(piece, len);
  return true;
}

// One greedy generation in a fresh context and sampler of `model`; safe to call from any thread.
GenRun Generate(trine_model* model, const std::string& prompt, int n_predict) {
  GenRun r;
  trine_context_params cp = trine_context_default_params();
  cp.n_ctx = 128;
  cp.n_threads = 1;
  trine_context* ctx = trine_context_create(model, &cp);
  trine_sampler_params sp = trine_sampler_default_params();
  sp.temp = 0.0f;
  trine_sampler* s = trine_sampler_create(&sp);
  if (ctx == nullptr || s == nullptr) {
    r.result = trine_last_status();
    r.error = trine_last_error();
  } else {
    r.result = trine_generate(ctx, s, prompt.c_str(), n_predict, Collect, &r);
    if (r.result < 0) r.error = trine_last_error();
  }
  trine_sampler_free(s);
  trine_context_free(ctx);
  return r;
}

TEST(CApiParity, FourThreadsOnOneModelMatchSingleThreadedRuns) {
  trine_model_params mp = trine_model_default_params();
  trine_model* model = trine_model_load(kModel.c_str(), &mp);
  ASSERT_NE(model, nullptr) << trine_last_error();
  constexpr int kThreads = 4;
  constexpr int kPredict = 24;
  std::vector<GenRun> want;
  for (int i = 0; i < kThreads; ++i) {
    want.push_back(Generate(model, kPrompts[i], kPredict));
    ASSERT_GT(want.back().result, 0) << want.back().error;
  }
  // Each thread runs every prompt, starting at a different one, so different prompts are in
  // flight at the same time on the shared model.
  std::vector<std::vector<GenRun>> got(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int k = 0; k < kThreads; ++k) got[static_cast<size_t>(t)].push_back(Generate(model, kPrompts[(t + k) % kThreads], kPredict));
    });
  }
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    for (int k = 0; k < kThreads; ++k) {
      const GenRun& r = got[static_cast<size_t>(t)][static_cast<size_t>(k)];
      const GenRun& w = want[static_cast<size_t>((t + k) % kThreads)];
      SCOPED_TRACE("thread " + std::to_string(t) + ", prompt '" + kPrompts[(t + k) % kThreads] + "'");
      EXPECT_EQ(r.result, w.result) << r.error;
      EXPECT_EQ(r.ids, w.ids);
      EXPECT_EQ(r.text, w.text);
    }
  }
  trine_model_free(model);
}

TEST(CApiParity, GreedyTokensMatchTrineGenerateJson) {
  trine_model_params mp = trine_model_default_params();
  trine_model* model = trine_model_load(kModel.c_str(), &mp);
  ASSERT_NE(model, nullptr) << trine_last_error();
  for (const char* prompt : kPrompts) {
    SCOPED_TRACE(prompt);
    std::string out, err;
    ASSERT_EQ(RunTrine("generate -m '" + kModel + "' -p '" + prompt + "' -n 20 --temp 0 --json -t 1 -c 128", &out, &err),
              0)
        << err;
    const nlohmann::json j = nlohmann::json::parse(out);
    const GenRun r = Generate(model, prompt, 20);
    ASSERT_GE(r.result, 0) << r.error;
    EXPECT_EQ(r.ids, j["generated_ids"].get<std::vector<trine_token>>());
    EXPECT_EQ(r.text, j["text"].get<std::string>());
    // The prompt tokens agree too.
    const auto want_prompt = j["prompt_ids"].get<std::vector<trine_token>>();
    std::vector<trine_token> ids(want_prompt.size() + 4);
    const int32_t n = trine_tokenize(model, prompt, -1, ids.data(), static_cast<int32_t>(ids.size()), true, false);
    ASSERT_GE(n, 0) << trine_last_error();
    ids.resize(static_cast<size_t>(n));
    EXPECT_EQ(ids, want_prompt);
  }
  trine_model_free(model);
}

std::string RunCommand(const std::string& cmd, int* status) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) {
    *status = -1;
    return out;
  }
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  *status = pclose(p);
  return out;
}

TEST(CApiParity, SharedLibraryExportsOnlyTrineSymbols) {
  int status = 0;
  const std::string lib = TRINE_SHARED_LIBRARY;
  const std::string nm = RunCommand("nm -D --defined-only '" + lib + "' 2>&1", &status);
  ASSERT_EQ(status, 0) << nm;
  std::istringstream lines(nm);
  std::string line;
  std::vector<std::string> symbols;
  while (std::getline(lines, line)) {
    // "0000000000012340 T trine_model_load"
    const size_t sp = line.rfind(' ');
    ASSERT_NE(sp, std::string::npos) << line;
    symbols.push_back(line.substr(sp + 1));
  }
  ASSERT_GE(symbols.size(), 40u) << nm;
  for (const std::string& s : symbols) EXPECT_EQ(s.rfind("trine_", 0), 0u) << "exported: " << s;
  for (const char* want : {"trine_version", "trine_model_load", "trine_context_decode", "trine_generate",
                           "trine_sampler_sample", "trine_last_error", "trine_chat_apply_template"}) {
    EXPECT_NE(std::find(symbols.begin(), symbols.end(), want), symbols.end()) << want;
  }
  const std::string dyn = RunCommand("objdump -p '" + lib + "' 2>&1", &status);
  ASSERT_EQ(status, 0) << dyn;
  std::istringstream dyn_lines(dyn);
  std::string soname;
  while (std::getline(dyn_lines, line)) {
    std::istringstream fields(line);
    std::string key, value;
    if (fields >> key >> value && key == "SONAME") soname = value;
  }
  EXPECT_EQ(soname, "libtrine.so.0") << dyn;
}

}  // namespace
