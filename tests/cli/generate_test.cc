// End-to-end checks of `trine generate` and `trine chat`: the bundled model reproduces llama.cpp's
// greedy text, --json carries ids and logits, thread counts agree, and bad input exits 1 with a
// clear error (2 for bad usage), never a signal.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <fstream>

#include "common/test_util.h"
#include "gguf/gguf_reader.h"
#include "model/model_config.h"
#include "profiler/plan.h"
#include "profiler/plan_load.h"

namespace trine {
namespace {

using testing::ModelPath;
using testing::RunTrine;
using testing::RunTrineWithInput;

const std::string kModel = "models/bitnet-tiny-stories-TQ2_0-f16emb.gguf";

nlohmann::json LoadRef(const std::string& name) {
  std::ifstream in(ModelPath("ref/" + name));
  return nlohmann::json::parse(in);
}

TEST(Generate, DefaultModelGreedyMatchesLlamaCppText) {
  std::string out, err;
  // No -m: the bundled default model is found from the working directory (the project root).
  ASSERT_EQ(RunTrine("generate -p 'Once upon a time' -n 20 --temp 0 -t 1", &out, &err), 0) << err;
  EXPECT_EQ(out.rfind("Once upon a time, there was a little girl named Lily. She loved to play outside in the park.", 0),
            0u)
      << out;
  EXPECT_NE(err.find("tokens per second"), std::string::npos) << err;
}

TEST(Generate, JsonIdsAndTopLogitsMatchReference) {
  const nlohmann::json ref = LoadRef("bitnet-tiny-stories-TQ2_0-f16emb.json");
  for (const auto& p : ref["prompts"]) {
    SCOPED_TRACE(p["prompt"].get<std::string>());
    std::string out, err;
    ASSERT_EQ(RunTrine("generate -m " + kModel + " -p '" + p["prompt"].get<std::string>() +
                           "' -n 16 --temp 0 --json --top-logits 5 -t 1",
                       &out, &err),
              0)
        << err;
    const nlohmann::json j = nlohmann::json::parse(out);
    EXPECT_EQ(j["prompt_ids"], p["prompt_tokens"]);
    const auto want = p["greedy_tokens"].get<std::vector<int>>();
    const auto got = j["generated_ids"].get<std::vector<int>>();
    ASSERT_GE(got.size(), 1u);
    for (size_t i = 0; i < got.size() && i < want.size(); ++i) EXPECT_EQ(got[i], want[i]) << "step " << i;
    // The first top-logits entry is the last prompt position.
    const auto& first = j["top_logits"][0];
    const auto& ref_top = p["last_logits_top20"];
    for (int k = 0; k < 5; ++k) {
      EXPECT_EQ(first[k][0], ref_top[k][0]);
      EXPECT_NEAR(first[k][1].get<double>(), ref_top[k][1].get<double>(), 0.05);
    }
    std::string out2;
    ASSERT_EQ(RunTrine("generate -m " + kModel + " -p '" + p["prompt"].get<std::string>() +
                           "' -n 16 --temp 0 --json -t 2",
                       &out2, &err),
              0);
    EXPECT_EQ(nlohmann::json::parse(out2)["generated_ids"], j["generated_ids"]) << "1 vs 2 threads";
  }
}

TEST(Generate, SeededSamplingIsDeterministic) {
  std::string a, b, c, err;
  ASSERT_EQ(RunTrine("generate -p 'Once upon a time' -n 24 --temp 1.0 --seed 42 --json -t 1", &a, &err), 0) << err;
  ASSERT_EQ(RunTrine("generate -p 'Once upon a time' -n 24 --temp 1.0 --seed 42 --json -t 1", &b, &err), 0) << err;
  ASSERT_EQ(RunTrine("generate -p 'Once upon a time' -n 24 --temp 1.0 --seed 43 --json -t 1", &c, &err), 0) << err;
  EXPECT_EQ(nlohmann::json::parse(a)["generated_ids"], nlohmann::json::parse(b)["generated_ids"]);
  EXPECT_NE(nlohmann::json::parse(a)["generated_ids"], nlohmann::json::parse(c)["generated_ids"]);
}

struct BadCase {
  const char* args;
  int code;
  const char* message;  // substring expected on stderr
};

// Quantized KV caches through generate (the C API path), with llama.cpp's flag spellings: greedy
// text stays close to the F16 cache's (identical for the first tokens on this model).
TEST(Generate, QuantizedKvCacheFlags) {
  std::string ref, out, err;
  ASSERT_EQ(RunTrine("generate -p 'Once upon a time' -n 12 --temp 0 -t 1 --json", &ref, &err), 0) << err;
  const auto want = nlohmann::json::parse(ref)["generated_ids"];
  for (const char* flags : {"--kv-type q8_0", "-ctk q8_0 -ctv q8_0", "-ctk q4_0", "--cache-type-v q4_0"}) {
    SCOPED_TRACE(flags);
    ASSERT_EQ(RunTrine(std::string("generate -p 'Once upon a time' -n 12 --temp 0 -t 1 --json ") + flags, &out, &err),
              0)
        << err;
    const auto got = nlohmann::json::parse(out)["generated_ids"];
    ASSERT_EQ(got.size(), want.size());
    EXPECT_EQ(got[0], want[0]);
    EXPECT_EQ(got[1], want[1]);
  }
}

// llama.cpp's flags: those that ask for nothing trine does differently pass with a note, those that
// ask for what it cannot do fail saying so, and generate's own -e / -r work as in llama-cli.
TEST(Generate, LlamaCppFlagsParse) {
  std::string out, err;
  ASSERT_EQ(RunTrine("generate -p hi -n 2 --temp 0 -ngl 0 -fa on -ub 64 -tb 2 -co -no-cnv -np 1", &out, &err), 0) << err;
  for (const char* note : {"note: -ngl 0", "note: -fa on", "note: -ub 64", "note: -tb 2", "note: --color"}) {
    EXPECT_NE(err.find(note), std::string::npos) << note << "\n" << err;
  }
  const BadCase cases[] = {
      {"generate -p hi -ngl 99", 1, "-ngl 99: trine runs on the CPU; GPU offload is not available"},
      {"generate -p hi --n-gpu-layers=12", 1, "GPU offload is not available"},
      {"generate -hf org/model-GGUF", 1, "trine does not download models; pass a local GGUF with -m"},
      {"generate -p hi -np 4", 1, "runs one sequence"},
      {"generate -p hi -cnv", 2, "use 'trine chat'"},
      {"generate -p hi -i", 2, "use 'trine chat'"},
      {"generate -p hi -ngl", 2, "needs a value"},
      {"chat -no-cnv", 2, "use 'trine generate"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.args);
    EXPECT_EQ(RunTrine(c.args, &out, &err), c.code);
    EXPECT_EQ(err.rfind("error: ", 0), 0u) << err;
    EXPECT_NE(err.find(c.message), std::string::npos) << err;
  }
  // -e is llama.cpp's default: "\n" in -p is a newline; --no-escape keeps it as typed.
  ASSERT_EQ(RunTrine("generate -p 'a\\nb' -n 1 --temp 0 --json", &out, &err), 0) << err;
  EXPECT_NE(out.find("\"prompt\":\"a\\nb\""), std::string::npos) << out;
  ASSERT_EQ(RunTrine("generate -p 'a\\nb' -n 1 --temp 0 --json --no-escape", &out, &err), 0) << err;
  EXPECT_NE(out.find("\"prompt\":\"a\\\\nb\""), std::string::npos) << out;
  // -r stops once the output contains the text.
  ASSERT_EQ(RunTrine("generate -p 'Once upon a time' -n 40 --temp 0", &out, &err), 0) << err;
  const size_t girl = out.find(" girl");
  ASSERT_NE(girl, std::string::npos) << out;
  ASSERT_EQ(RunTrine("generate -p 'Once upon a time' -n 40 --temp 0 -r ' girl'", &out, &err), 0) << err;
  EXPECT_EQ(out, out.substr(0, girl + 5) + "\n") << out;  // nothing after " girl" but the final newline
}

TEST(Generate, BadInputGivesCleanErrors) {
  const BadCase cases[] = {
      {"generate -p hi -n -5", 1, "-n"},
      {"generate -p hi -t -1", 1, "-t"},
      {"generate -p hi -c -3", 1, "-c"},
      {"generate -p hi -b 0", 1, "-b"},
      {"generate -p hi --temp -1", 1, "--temp"},
      {"generate -p hi --top-p 0", 1, "--top-p"},
      {"generate -p hi --kv-type q9", 1, "--kv-type"},
      {"generate -p hi -ctk q9", 1, "-ctk"},
      {"generate -p hi -m models/stories260K.gguf --kv-type q8_0", 1, "multiple of 32"},
      {"generate -p hi -m /nonexistent/model.gguf", 1, "/nonexistent/model.gguf"},
      {"generate -p hi -m models", 1, "not a regular file"},
      {"generate -p hi -m models/text/tinystories-heldout.txt", 1, "not a GGUF file"},
      {"generate -p hi -m models/vocab/ggml-vocab-llama-spm.gguf", 1, "missing tensor"},
      {"generate -f /nonexistent/prompt.txt", 1, "/nonexistent/prompt.txt"},
      {"generate --no-bos -p ''", 1, "empty"},
      {"generate -c 4 -p 'Once upon a time there was a dog'", 1, "longer than the context"},
      {"generate --bogus-flag", 2, "bogus"},
      {"generate -p a -f b", 2, "either"},
      {"nosuchcommand", 2, "unknown command"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.args);
    std::string out, err;
    EXPECT_EQ(RunTrine(c.args, &out, &err), c.code);
    EXPECT_EQ(err.rfind("error: ", 0), 0u) << err;
    EXPECT_NE(err.find(c.message), std::string::npos) << err;
  }
}

// Memory plans: --plan FILE (a plan streaming layers 1-3), a budget-only plan (--mem-budget),
// and their errors; the tokens are those of the plain run, and a one-line summary is printed
// (in the JSON with --json).
TEST(Generate, PlansApplyAndKeepTheTokens) {
  const std::string model = kModel;
  const std::string base = "generate -m " + model + " -p 'Once upon a time' -n 12 --temp 0 -t 1 -c 64 --json";
  std::string out, err;
  ASSERT_EQ(RunTrine(base, &out, &err), 0) << err;
  const auto want = nlohmann::json::parse(out)["generated_ids"];
  EXPECT_FALSE(nlohmann::json::parse(out).contains("plan"));

  std::unique_ptr<GgufFile> f;
  ASSERT_TRUE(GgufFile::Open(model, &f).ok());
  ModelConfig c;
  ASSERT_TRUE(LoadModelConfig(*f, &c).ok());
  profiler::Plan plan;
  plan.model_hash = profiler::ModelContentHash(*f);
  plan.key.mem_budget = 1ull << 30;
  plan.key.n_ctx = 64;
  ASSERT_TRUE(profiler::PlanWithoutProfile(*f, c, &plan).ok());
  for (auto& u : plan.units) {
    if (u.layer >= 1) u.placement = "streamed";
  }
  plan.units[0].precision = "fp32";
  for (const auto& t : plan.units[0].tensors) plan.tensors[t] = "fp32";
  const std::string plan_path = testing::TempPath("stream-plan.json");
  ASSERT_TRUE(profiler::WritePlanFile(plan, plan_path).ok());
  ASSERT_EQ(RunTrine(base + " --plan " + plan_path, &out, &err), 0) << err;
  const auto j = nlohmann::json::parse(out);
  EXPECT_NE(j["plan"].get<std::string>().find("1 resident / 0 page cache / 3 streamed"), std::string::npos) << out;
  EXPECT_NE(j["plan"].get<std::string>().find("plan file"), std::string::npos) << out;
  EXPECT_EQ(err, "");  // quiet with --json
  // blk.0 in fp32 may change a token; the streamed layers alone do not (tested bitwise elsewhere).
  EXPECT_EQ(j["generated_ids"].size(), want.size());

  ASSERT_EQ(RunTrine("generate -m " + model + " -p 'Once upon a time' -n 12 --temp 0 -t 1 -c 64 --mem-budget 1K "
                     "--no-cache",
                     &out, &err),
            0)
      << err;
  EXPECT_NE(err.find("plan: layers 0 resident / 0 page cache / 4 streamed"), std::string::npos) << err;
  ASSERT_EQ(RunTrine(base + " --mem-budget 1K", &out, &err), 0) << err;
  EXPECT_EQ(nlohmann::json::parse(out)["generated_ids"], want);

  EXPECT_EQ(RunTrine(base + " --mem-budget lots", &out, &err), 1);
  EXPECT_NE(err.find("--mem-budget"), std::string::npos) << err;
  EXPECT_EQ(RunTrine(base + " --plan /nonexistent/plan.json", &out, &err), 1);
  EXPECT_NE(err.find("/nonexistent/plan.json"), std::string::npos) << err;
  EXPECT_EQ(RunTrine(base + " --mem-budget 1K --no-mmap", &out, &err), 1);
  EXPECT_NE(err.find("memory-mapped"), std::string::npos) << err;
}

// --auto profiles at load (the profile's own forward passes already stream) and caches the plan;
// the next run (with or without --auto) reuses it, as does trine profile with the same key.
TEST(Generate, AutoProfilesOnceThenReusesTheCachedPlan) {
  const std::string cache = testing::TempPath("xdg-cache");
  ASSERT_EQ(::setenv("XDG_CACHE_HOME", cache.c_str(), 1), 0);
  const std::string base = "generate -m " + kModel + " -p 'Once upon a time' -n 4 --temp 0 -t 1 -c 64 --mem-budget 600K";
  std::string out, err;
  ASSERT_EQ(RunTrine(base + " --auto", &out, &err), 0) << err;
  EXPECT_NE(err.find("profiled in"), std::string::npos) << err;
  EXPECT_NE(err.find("cached at " + cache + "/trine/plans/"), std::string::npos) << err;
  EXPECT_NE(err.find("4 streamed"), std::string::npos) << err;
  const std::string first = out;
  for (const char* extra : {" --auto", ""}) {
    ASSERT_EQ(RunTrine(base + extra, &out, &err), 0) << err;
    EXPECT_NE(err.find("plan cache " + cache), std::string::npos) << err;
    EXPECT_EQ(out, first);
  }
  // generate plans for the context's cache type (F16 by default): the same key as --kv-type f16.
  ASSERT_EQ(RunTrine("profile -m " + kModel + " -t 1 -c 64 --mem-budget 600K --kv-type f16 -q", &out, &err), 0) << err;
  EXPECT_NE(out.find("plan: plan cache"), std::string::npos) << out;
  ASSERT_EQ(RunTrine(base + " --no-cache", &out, &err), 0) << err;
  EXPECT_NE(err.find("budget only"), std::string::npos) << err;
  ::unsetenv("XDG_CACHE_HOME");
}

TEST(Generate, InvalidUtf8PromptDoesNotCrash) {
  const std::string path = testing::TempPath("bad-utf8.txt");
  testing::WriteFileBytes(path, {0xff, 0xfe, ' ', 'a', 'b', 'c', ' ', 0xc3});
  std::string out, err;
  EXPECT_EQ(RunTrine("generate -n 4 --temp 0 -t 1 -f " + path, &out, &err), 0) << err;
}

TEST(Chat, TwoTurnsThenEof) {
  std::string out, err;
  ASSERT_EQ(RunTrineWithInput("chat --chat-template chatml -n 8 --temp 0 -sys 'You tell stories.'",
                              "Tell me a story.\nAnd then?\n", &out, &err),
            0)
      << err;
  EXPECT_NE(err.find("template chatml"), std::string::npos) << err;
  // Two prompts were answered (each reply follows a "> " prompt).
  size_t n = 0;
  for (size_t pos = out.find("> "); pos != std::string::npos; pos = out.find("> ", pos + 2)) ++n;
  EXPECT_GE(n, 3u) << out;
}

// The replies of a chat fed `input` (the text between each "> " prompt and the next).
std::vector<std::string> ChatReplies(const std::string& input, std::string* err) {
  std::string out;
  EXPECT_EQ(RunTrineWithInput("chat --chat-template chatml -n 10 --temp 0", input, &out, err), 0) << *err;
  std::vector<std::string> replies;
  for (size_t at = out.find("> "); at != std::string::npos;) {
    const size_t next = out.find("\n> ", at + 2);
    replies.push_back(out.substr(at + 2, next == std::string::npos ? std::string::npos : next - at - 2));
    at = next == std::string::npos ? next : next + 1;
  }
  return replies;
}

// A turn spans lines with a trailing '\\' or inside a """ block (the same text either way);
// /clear starts a fresh conversation (the first turn's reply again); /exit stops reading; the
// timings print on the way out.
TEST(Chat, MultiLineTurnsClearAndExit) {
  std::string err;
  const auto replies = ChatReplies("Tell me\\\nabout a cat.\n/clear\n\"\"\"\nTell me\nabout a cat.\n\"\"\"\n/exit\nnot read\n",
                                   &err);
  ASSERT_EQ(replies.size(), 4u);  // two answered turns, the /clear line, the /exit prompt
  EXPECT_NE(replies[1].find("[conversation cleared]"), std::string::npos) << replies[1];
  EXPECT_FALSE(replies[0].empty());
  EXPECT_EQ(replies[2], replies[0]);
  EXPECT_NE(err.find("prompt eval time"), std::string::npos) << err;
  EXPECT_NE(err.find("eval time"), std::string::npos) << err;
}

// A real model's Jinja template (Llama 3.1's, with its system header) drives the chat; each turn
// evaluates only what the KV cache does not already hold, so the prompt tokens of two turns stay
// below twice the second turn's whole conversation.
TEST(Chat, JinjaTemplateFromAFile) {
  const std::string tmpl = std::string(TRINE_TEST_DATA_DIR) + "/chat_templates/meta-llama-Llama-3.1-8B-Instruct.jinja";
  // Prompt tokens evaluated over a chat of `input`, from the timings line.
  const auto prompt_tokens = [&](const std::string& input) {
    std::string out, err;
    EXPECT_EQ(RunTrineWithInput("chat --chat-template-file " + tmpl + " -n 6 --temp 0", input, &out, &err), 0) << err;
    EXPECT_NE(err.find("template jinja"), std::string::npos) << err;
    const size_t at = err.find("prompt eval time");
    const size_t slash = at == std::string::npos ? at : err.find("/ ", at);
    return slash == std::string::npos ? -1 : std::atoi(err.c_str() + slash + 2);
  };
  const int one = prompt_tokens("Tell me a story.\n");
  const int two = prompt_tokens("Tell me a story.\nAnd then?\n");
  ASSERT_GT(one, 20);
  EXPECT_GT(two, one);
  EXPECT_LT(two, 2 * one) << "the second turn re-evaluated the conversation instead of appending to it";

  std::string out, err;
  EXPECT_EQ(RunTrineWithInput("chat --chat-template-file /nonexistent.jinja", "hi\n", &out, &err), 1);
  EXPECT_NE(err.find("/nonexistent.jinja"), std::string::npos) << err;
  EXPECT_EQ(RunTrineWithInput("chat --chat-template chatml --chat-template-file " + tmpl, "hi\n", &out, &err), 1);
  EXPECT_NE(err.find("not both"), std::string::npos) << err;
}

TEST(Chat, UnknownTemplateIsAnError) {
  std::string out, err;
  EXPECT_EQ(RunTrineWithInput("chat --chat-template vicuna", "hi\n", &out, &err), 1);
  EXPECT_NE(err.find("unknown chat template"), std::string::npos) << err;
}

}  // namespace
}  // namespace trine
