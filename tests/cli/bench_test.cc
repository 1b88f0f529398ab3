// `trine bench` on a tiny mkmodel model: the JSON array has one pp and one tg row per model and
// thread count with llama-bench's fields plus bytes/token and bandwidth; the Markdown table has
// the same rows; bad usage exits 2, bad values 1. No timing is asserted beyond being positive.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <string>

#include "common/test_util.h"

namespace trine {
namespace {

using testing::RunTrine;
using testing::TempPath;

// One tiny model per test process (each test runs in its own process under ctest).
const std::string& TinyModel() {
  static const std::string path = [] {
    const std::string p = TempPath("bench-tiny.gguf");
    std::string out, err;
    EXPECT_EQ(RunTrine("mkmodel --preset tiny --layers 1 -o " + p, &out, &err), 0) << err;
    return p;
  }();
  return path;
}

TEST(Bench, JsonHasPpAndTgRowsPerThreadCount) {
  std::string out, err;
  ASSERT_EQ(RunTrine("bench -m " + TinyModel() + " -t 1,2 -p 8 -n 4 -r 2 -o json", &out, &err), 0) << err;
  const nlohmann::json j = nlohmann::json::parse(out);
  ASSERT_TRUE(j.is_array());
  ASSERT_EQ(j.size(), 4u) << out;
  const char* tests[] = {"pp8", "tg4", "pp8", "tg4"};
  const int threads[] = {1, 1, 2, 2};
  for (size_t i = 0; i < j.size(); ++i) {
    const auto& r = j[i];
    SCOPED_TRACE(r.dump());
    EXPECT_EQ(r["test"], tests[i]);
    EXPECT_EQ(r["n_threads"], threads[i]);
    EXPECT_EQ(r["model_filename"], TinyModel());
    EXPECT_EQ(r["samples_ts"].size(), 2u);
    EXPECT_EQ(r["samples_ns"].size(), 2u);
    EXPECT_GT(r["avg_ts"].get<double>(), 0.0);
    EXPECT_GE(r["stddev_ts"].get<double>(), 0.0);
    EXPECT_GT(r["model_size"].get<double>(), 0.0);
    EXPECT_GT(r["model_n_params"].get<double>(), 0.0);
    // Tied embedding: a decoded token reads every tensor of the file.
    EXPECT_EQ(r["bytes_per_token"], r["model_size"]);
    EXPECT_EQ(r["resident_bytes_per_token"], r["bytes_per_token"]);  // TQ2_0 is not repacked
    EXPECT_TRUE(r["isa"].is_string());
    EXPECT_TRUE(r["membw_gbps"].is_null());
    if (r["test"] == "tg4") {
      EXPECT_EQ(r["n_gen"], 4);
      EXPECT_EQ(r["n_prompt"], 0);
      EXPECT_GT(r["gbps"].get<double>(), 0.0);
    } else {
      EXPECT_EQ(r["n_prompt"], 8);
      EXPECT_EQ(r["n_gen"], 0);
      EXPECT_TRUE(r["gbps"].is_null());
    }
  }
}

// -d: each test again after that many tokens already in the context, named as llama-bench does.
TEST(Bench, DepthRowsFollowTheEmptyContextRows) {
  std::string out, err;
  ASSERT_EQ(RunTrine("bench -m " + TinyModel() + " -t 1 -p 8 -n 4 -d 0,16 -r 2 -o json", &out, &err), 0) << err;
  const nlohmann::json j = nlohmann::json::parse(out);
  ASSERT_EQ(j.size(), 4u) << out;
  const char* tests[] = {"pp8", "tg4", "pp8 @ d16", "tg4 @ d16"};
  const int depths[] = {0, 0, 16, 16};
  for (size_t i = 0; i < j.size(); ++i) {
    SCOPED_TRACE(j[i].dump());
    EXPECT_EQ(j[i]["test"], tests[i]);
    EXPECT_EQ(j[i]["n_depth"], depths[i]);
    EXPECT_GT(j[i]["avg_ts"].get<double>(), 0.0);
  }
  ASSERT_EQ(RunTrine("bench -m " + TinyModel() + " -t 1 -p 0 -n 2 -d 8 -r 1", &out, &err), 0) << err;
  EXPECT_NE(out.find("| tg2 @ d8 |"), std::string::npos) << out;
}

TEST(Bench, MembwAndSeveralModels) {
  std::string out, err;
  ASSERT_EQ(RunTrine("bench -m " + TinyModel() + "," + TinyModel() +
                         " -t 1 -p 0 -n 2 -r 2 -o json --membw --membw-mib 16 --no-warmup",
                     &out, &err),
            0)
      << err;
  const nlohmann::json j = nlohmann::json::parse(out);
  ASSERT_EQ(j.size(), 2u) << out;  // -p 0: no pp rows; one tg row per model
  for (const auto& r : j) {
    EXPECT_EQ(r["test"], "tg2");
    EXPECT_GT(r["membw_gbps"].get<double>(), 0.0);
    EXPECT_GT(r["membw_pct"].get<double>(), 0.0);
    // One probe before each of the 2 runs; the row's figure is their mean.
    ASSERT_EQ(r["membw_samples_gbps"].size(), 2u) << r;
    const double a = r["membw_samples_gbps"][0].get<double>(), b = r["membw_samples_gbps"][1].get<double>();
    EXPECT_GT(a, 0.0);
    EXPECT_GT(b, 0.0);
    EXPECT_NEAR(r["membw_gbps"].get<double>(), (a + b) / 2, 1e-9 * (a + b));
    // The % pairs each run with its own probe.
    const double want = 50.0 * (r["samples_ts"][0].get<double>() / a + r["samples_ts"][1].get<double>() / b) *
                        r["bytes_per_token"].get<double>() / 1e9;
    EXPECT_NEAR(r["membw_pct"].get<double>(), want, 1e-9 * want);
  }
  EXPECT_NE(err.find("memory read bandwidth"), std::string::npos) << err;
}

TEST(Bench, MarkdownTable) {
  std::string out, err;
  ASSERT_EQ(RunTrine("bench -m " + TinyModel() + " -t 1 -p 8 -n 2 -r 1", &out, &err), 0) << err;
  EXPECT_NE(out.find("| model | size | params | isa | threads | test | t/s |"), std::string::npos) << out;
  EXPECT_NE(out.find("| pp8 |"), std::string::npos) << out;
  EXPECT_NE(out.find("| tg2 |"), std::string::npos) << out;
  EXPECT_NE(out.find("bitnet"), std::string::npos) << out;
  EXPECT_NE(out.find("TQ2_0"), std::string::npos) << out;
}

// llama-batched-bench's mode: one row per (pp, tg, pl) with its field names, N_KV = pl * (pp + tg)
// (pp + pl * tg with -pps), speeds consistent with the times; the Markdown table has its columns.
TEST(Bench, BatchedModeHasLlamaBatchedBenchRows) {
  std::string out, err;
  ASSERT_EQ(RunTrine("bench -m " + TinyModel() + " -t 2 -npp 8 -ntg 3 -npl 1,4 -o json", &out, &err), 0) << err;
  const nlohmann::json j = nlohmann::json::parse(out);
  ASSERT_TRUE(j.is_array());
  ASSERT_EQ(j.size(), 2u) << out;
  const int pl[] = {1, 4};
  for (size_t i = 0; i < j.size(); ++i) {
    const auto& r = j[i];
    SCOPED_TRACE(r.dump());
    EXPECT_EQ(r["pp"], 8);
    EXPECT_EQ(r["tg"], 3);
    EXPECT_EQ(r["pl"], pl[i]);
    EXPECT_EQ(r["n_kv"], pl[i] * 11);
    EXPECT_EQ(r["n_threads"], 2);
    for (const char* k : {"t_pp", "t_tg", "t", "speed_pp", "speed_tg", "speed"}) EXPECT_GT(r[k].get<double>(), 0) << k;
    EXPECT_NEAR(r["speed_tg"].get<double>(), pl[i] * 3 / r["t_tg"].get<double>(), 1e-6 * r["speed_tg"].get<double>());
    EXPECT_NEAR(r["t"].get<double>(), r["t_pp"].get<double>() + r["t_tg"].get<double>(), 1e-9);
  }
  ASSERT_EQ(RunTrine("bench -m " + TinyModel() + " -t 1 -npp 8 -ntg 2 -npl 3 -pps", &out, &err), 0) << err;
  EXPECT_NE(out.find("|    PP |     TG |    B |   N_KV |   T_PP s | S_PP t/s |   T_TG s | S_TG t/s |"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("|     8 |      2 |    3 |     14 |"), std::string::npos) << "shared prompt: 8 + 3 * 2\n" << out;
  EXPECT_NE(out.find("is_pp_shared = 1"), std::string::npos) << out;
  EXPECT_NE(RunTrine("bench -m " + TinyModel() + " -npp 8 -ntg 2 -npl 0", &out, &err), 0);
  EXPECT_NE(err.find("-npl"), std::string::npos) << err;
}

TEST(Bench, BadArgumentsGiveCleanErrors) {
  struct Case {
    std::string args;
    int code;
    const char* message;
  };
  const std::string m = " -m " + TinyModel();
  const Case cases[] = {
      {"bench -o csv" + m, 1, "-o"},
      {"bench --bogus" + m, 2, "bogus"},
      {"bench -t 0" + m, 1, "-t"},
      {"bench -t 2-1" + m, 1, "-t"},
      {"bench -p abc" + m, 1, "-p"},
      {"bench -n -1" + m, 1, "-n"},
      {"bench -r 0" + m, 1, "-r"},
      {"bench -d -4" + m, 1, "-d"},
      {"bench -d x" + m, 1, "-d"},
      {"bench -b 0" + m, 1, "-b"},
      {"bench -m /nonexistent/model.gguf", 1, "/nonexistent/model.gguf"},
      {"bench -m models/vocab/ggml-vocab-llama-spm.gguf", 1, "missing tensor"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.args);
    std::string out, err;
    EXPECT_EQ(RunTrine(c.args, &out, &err), c.code);
    EXPECT_EQ(err.rfind("error: ", 0), 0u) << err;
    EXPECT_NE(err.find(c.message), std::string::npos) << err;
  }
}

}  // namespace
}  // namespace trine
