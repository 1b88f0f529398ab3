// report.html rendered by headless Chromium (Debian package `chromium`, installed by
// scripts/install-deps.sh): the screenshot is not blank and shows the charts' bar colours, and the
// numbers in the rendered DOM (--dump-dom) equal report.json's. Without Chromium the test FAILS
// (CI installs it); TRINE_CHROMIUM names another binary.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <zlib.h>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "profiler/plan.h"
#include "profiler/profiler.h"
#include "profiler/report.h"

namespace trine::profiler {
namespace {

std::string FindChromium() {
  if (const char* env = std::getenv("TRINE_CHROMIUM")) {
    if (env[0] != '\0' && access(env, X_OK) == 0) return env;
  }
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path != nullptr ? path : "/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    for (const char* name : {"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"}) {
      const std::string p = dir + "/" + name;
      if (access(p.c_str(), X_OK) == 0) return p;
    }
  }
  return "";
}

// Runs a shell command; returns its exit status and stdout.
int RunShell(const std::string& cmd, std::string* out) {
  FILE* f = ::popen(cmd.c_str(), "r");
  if (f == nullptr) return -1;
  char buf[4096];
  size_t n;
  out->clear();
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out->append(buf, n);
  const int st = ::pclose(f);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

struct Image {
  uint32_t width = 0, height = 0;
  std::vector<uint8_t> rgb;  // width * height * 3
};

uint32_t Be32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

// A minimal PNG reader: 8-bit RGB or RGBA, not interlaced (what Chromium writes).
bool DecodePng(const std::vector<uint8_t>& png, Image* img, std::string* err) {
  static const uint8_t kSig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (png.size() < 8 || !std::equal(kSig, kSig + 8, png.begin())) return *err = "not a PNG", false;
  std::vector<uint8_t> idat;
  int bpp = 0;
  for (size_t i = 8; i + 12 <= png.size();) {
    const uint32_t len = Be32(&png[i]);
    if (i + 12 + len > png.size()) return *err = "truncated chunk", false;
    const std::string type(reinterpret_cast<const char*>(&png[i + 4]), 4);
    const uint8_t* d = &png[i + 8];
    if (type == "IHDR") {
      img->width = Be32(d);
      img->height = Be32(d + 4);
      const int depth = d[8], color = d[9], interlace = d[12];
      if (depth != 8 || (color != 2 && color != 6) || interlace != 0) {
        return *err = "unsupported PNG format (depth " + std::to_string(depth) + ", color type " +
                      std::to_string(color) + ")",
               false;
      }
      bpp = color == 6 ? 4 : 3;
    } else if (type == "IDAT") {
      idat.insert(idat.end(), d, d + len);
    }
    i += 12 + len;
  }
  if (bpp == 0 || img->width == 0 || img->height == 0) return *err = "no IHDR", false;
  const size_t stride = static_cast<size_t>(img->width) * static_cast<size_t>(bpp);
  std::vector<uint8_t> raw((stride + 1) * img->height);
  uLongf raw_len = static_cast<uLongf>(raw.size());
  if (uncompress(raw.data(), &raw_len, idat.data(), static_cast<uLong>(idat.size())) != Z_OK || raw_len != raw.size()) {
    return *err = "bad zlib data", false;
  }
  std::vector<uint8_t> prev(stride, 0), cur(stride);
  img->rgb.resize(static_cast<size_t>(img->width) * img->height * 3);
  for (uint32_t y = 0; y < img->height; ++y) {
    const uint8_t filter = raw[y * (stride + 1)];
    const uint8_t* src = &raw[y * (stride + 1) + 1];
    for (size_t x = 0; x < stride; ++x) {
      const int a = x >= static_cast<size_t>(bpp) ? cur[x - static_cast<size_t>(bpp)] : 0, b = prev[x],
                c = x >= static_cast<size_t>(bpp) ? prev[x - static_cast<size_t>(bpp)] : 0;
      int pred = 0;
      switch (filter) {
        case 0: pred = 0; break;
        case 1: pred = a; break;
        case 2: pred = b; break;
        case 3: pred = (a + b) / 2; break;
        case 4: {
          const int p = a + b - c, pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
          pred = (pa <= pb && pa <= pc) ? a : (pb <= pc ? b : c);
          break;
        }
        default: return *err = "bad filter " + std::to_string(filter), false;
      }
      cur[x] = static_cast<uint8_t>(src[x] + pred);
    }
    for (uint32_t x = 0; x < img->width; ++x) {
      for (int k = 0; k < 3; ++k) {
        img->rgb[(static_cast<size_t>(y) * img->width + x) * 3 + static_cast<size_t>(k)] =
            cur[static_cast<size_t>(x) * static_cast<size_t>(bpp) + static_cast<size_t>(k)];
      }
    }
    std::swap(prev, cur);
  }
  return true;
}

// A plan with every section filled: layers, KV and head candidates, measured speed and quality.
Plan ReportPlan() {
  Plan p;
  const double kl[] = {0.004, 0.001, 0.02, 0.002, 0.0005};
  for (int i = 0; i < 5; ++i) {
    PlanUnit u;
    u.layer = i < 4 ? i : -1;
    u.unit = u.layer >= 0 ? "blk." + std::to_string(i) : "output";
    u.tensors = {u.unit + ".weight"};
    u.kl_int8 = kl[i];
    u.kl_half[0] = kl[i] * 0.9;
    u.kl_half[1] = kl[i] * 1.1;
    u.act_norm = 0.11 * (i + 1);
    u.ms_fp32 = 2.0 + 0.1 * i;
    u.ms_int8 = 1.0 + 0.05 * i;
    u.weight_bytes = (1u << 20) + 4096u * static_cast<unsigned>(i);
    p.units.push_back(u);
  }
  p.model_path = "models/example.gguf";
  p.model_hash = "0123456789abcdef";
  p.hash_method = kHashMethod;
  p.isa = "avx512";
  p.n_threads = 2;
  p.samples = 8;
  p.tokens_per_sample = 36;
  p.profile_seconds = 1.25;
  p.key.max_kl = 0.004;
  p.key.mem_budget = 9u << 20;
  p.key.n_ctx = 256;
  p.key.kv_type = "auto";
  p.pred_tok_s_fp32 = 100;
  p.output_file_type = "f16";
  p.kv_candidates = {{"f16", 1u << 20, 0, 0}, {"q8_0", 557056, 0.00003, 0}, {"q4_0", 294912, 0.005, 0}};
  p.output_candidates = {{"f16", 1u << 20, 0, 1.0}, {"q8_0", 557056, 0.00004, 0.6},
                         {"q6_K", 430080, 0.0002, 0.7}, {"q4_0", 294912, 0.006, 0.5}};
  ModelConfig c;
  c.n_layer = 4;
  c.n_embd = 256;
  c.n_head = 4;
  c.n_head_kv = 4;
  c.n_ff = 768;
  c.head_dim = 64;
  c.n_ctx_train = 256;
  c.n_vocab = 2048;
  PlanFromProfile(c, 1u << 20, &p);
  p.kl_plan = 0.0031;
  p.kl_all_int8 = 0.0276;
  p.kl_all_fp32 = 0;
  p.spearman = 0.9;
  p.topk_overlap = 1;
  p.measured_tok_s = 321.5;
  p.measured_tok_s_fp32 = 98.25;
  p.measured_tok_s_int8 = 240.75;
  p.ppl_plan = 14.79;
  p.ppl_fp32 = 14.78;
  return p;
}

// The data-value attributes of the rects inside <svg id="id"> of a DOM dump.
std::vector<double> SvgValues(const std::string& dom, const std::string& id) {
  std::vector<double> v;
  const size_t a = dom.find("<svg id=\"" + id + "\"");
  if (a == std::string::npos) return v;
  const size_t b = dom.find("</svg>", a);
  for (size_t i = dom.find("data-value=\"", a); i < b; i = dom.find("data-value=\"", i + 1)) {
    v.push_back(std::strtod(dom.c_str() + i + 12, nullptr));
  }
  return v;
}

// The drawn widths of the bars (rects with a data-value) inside <svg id="id"> of a DOM dump.
std::vector<double> SvgWidths(const std::string& dom, const std::string& id) {
  std::vector<double> w;
  const size_t a = dom.find("<svg id=\"" + id + "\"");
  if (a == std::string::npos) return w;
  const std::string svg = dom.substr(a, dom.find("</svg>", a) - a);
  static const std::regex kBar(R"re(<rect[^>]*width="([0-9.]+)"[^>]*data-value=)re");
  for (std::sregex_iterator r(svg.begin(), svg.end(), kBar), e; r != e; ++r) w.push_back(std::stod((*r)[1].str()));
  return w;
}

// Every pair of bars of a chart is drawn in the order of its numbers: one scale for the chart.
void ExpectWidthsFollowValues(const std::vector<double>& widths, const std::vector<double>& values, const char* chart) {
  ASSERT_EQ(widths.size(), values.size()) << chart;
  for (size_t i = 0; i < values.size(); ++i) {
    for (size_t k = 0; k < values.size(); ++k) {
      if (values[i] > values[k] * 1.01) {
        EXPECT_GT(widths[i], widths[k]) << chart << " bars " << i << ", " << k;
      }
    }
  }
}

// The cell texts of each row of <table id="id"> of a DOM dump (header row included).
std::vector<std::vector<std::string>> TableCells(const std::string& dom, const std::string& id) {
  std::vector<std::vector<std::string>> rows;
  const size_t a = dom.find("<table id=\"" + id + "\"");
  if (a == std::string::npos) return rows;
  const size_t b = dom.find("</table>", a);
  const std::string t = dom.substr(a, b - a);
  static const std::regex kRow(R"(<tr[^>]*>([\s\S]*?)</tr>)"), kCell(R"(<t[dh][^>]*>([\s\S]*?)</t[dh]>)");
  for (std::sregex_iterator r(t.begin(), t.end(), kRow), e; r != e; ++r) {
    const std::string row = (*r)[1].str();
    std::vector<std::string> cells;
    for (std::sregex_iterator c(row.begin(), row.end(), kCell); c != e; ++c) cells.push_back((*c)[1].str());
    rows.push_back(cells);
  }
  return rows;
}

TEST(ReportRender, HeadlessChromiumDrawsItAndShowsTheJsonNumbers) {
  const std::string chromium = FindChromium();
  ASSERT_FALSE(chromium.empty())
      << "Chromium is required for the report rendering test and was not found on PATH (chromium, "
         "chromium-browser, google-chrome) or in TRINE_CHROMIUM: install the Debian package with "
         "scripts/install-deps.sh (apt-get install chromium).";
  const std::string dir = testing::TempPath("render");
  const Plan plan = ReportPlan();
  ASSERT_TRUE(WriteReport(plan, dir).ok());
  std::ifstream jf(dir + "/report.json");
  const nlohmann::json j = nlohmann::json::parse(jf);

  const std::string flags = " --headless --no-sandbox --disable-gpu --hide-scrollbars --user-data-dir=" + dir +
                            "/profile --window-size=1100,3000 ";
  const std::string url = "file://" + dir + "/report.html";
  std::string out;
  const std::string shot = dir + "/shot.png";
  ASSERT_EQ(RunShell("timeout 120 '" + chromium + "'" + flags + "--screenshot='" + shot + "' '" + url + "' 2>&1", &out), 0)
      << out;
  const std::vector<uint8_t> png = testing::ReadFileBytes(shot);
  ASSERT_GT(png.size(), 1000u) << out;
  Image img;
  std::string err;
  ASSERT_TRUE(DecodePng(png, &img, &err)) << err;
  EXPECT_EQ(img.width, 1100u);
  EXPECT_EQ(img.height, 3000u);
  // Not blank: many non-white pixels, many colours, and the chart colours drawn in quantity.
  size_t non_white = 0, blue = 0, orange = 0, red = 0;
  std::set<uint32_t> colours;
  auto near = [](const uint8_t* p, int r, int g, int b) {
    return std::abs(p[0] - r) <= 6 && std::abs(p[1] - g) <= 6 && std::abs(p[2] - b) <= 6;
  };
  for (size_t i = 0; i < img.rgb.size(); i += 3) {
    const uint8_t* p = &img.rgb[i];
    non_white += !(p[0] > 245 && p[1] > 245 && p[2] > 245);
    blue += near(p, 0x3b, 0x6f, 0xb6);
    orange += near(p, 0xe0, 0x8a, 0x2c);
    red += near(p, 0xcc, 0x00, 0x00);
    colours.insert((uint32_t{p[0]} << 16) | (uint32_t{p[1]} << 8) | p[2]);
  }
  const size_t pixels = static_cast<size_t>(img.width) * img.height;
  EXPECT_GT(non_white, pixels / 50) << "the screenshot is (nearly) blank";
  EXPECT_GT(colours.size(), 32u);
  EXPECT_GT(blue, 5000u) << "blue bars (KL, fp32 time, weights, predicted speed) not drawn";
  EXPECT_GT(orange, 5000u) << "orange bars (norms, int8 time, KV cache, measured speed) not drawn";
  EXPECT_GT(red, 20u) << "the budget line of the memory chart is not drawn";

  // The DOM Chromium built from the file carries the JSON's numbers.
  ASSERT_EQ(RunShell("timeout 120 '" + chromium + "'" + flags + "--dump-dom '" + url + "' 2>/dev/null", &out), 0);
  const std::string& dom = out;
  ASSERT_NE(dom.find("<svg id=\"importance-chart\""), std::string::npos) << dom.substr(0, 2000);
  const nlohmann::json& layers = j["layers"];
  const size_t U = layers.size();
  ASSERT_EQ(U, 5u);
  auto rel_eq = [](double a, double b) { return std::fabs(a - b) <= 1e-8 * std::max(1.0, std::fabs(b)); };
  const std::vector<double> imp = SvgValues(dom, "importance-chart");
  ASSERT_EQ(imp.size(), U);
  const std::vector<double> norm = SvgValues(dom, "norm-chart");
  ASSERT_EQ(norm.size(), U);
  const std::vector<double> tim = SvgValues(dom, "time-chart");
  ASSERT_EQ(tim.size(), 2 * U);
  for (size_t u = 0; u < U; ++u) {
    EXPECT_TRUE(rel_eq(imp[u], layers[u]["kl_int8"].get<double>())) << u;
    EXPECT_TRUE(rel_eq(norm[u], layers[u]["act_norm"].get<double>())) << u;
    EXPECT_TRUE(rel_eq(tim[u], layers[u]["ms_fp32"].get<double>())) << u;
    EXPECT_TRUE(rel_eq(tim[U + u], layers[u]["ms_int8"].get<double>())) << u;
  }
  const std::vector<double> mem = SvgValues(dom, "memory-chart");
  ASSERT_EQ(mem.size(), 4u);
  EXPECT_EQ(mem[0], j["memory"]["weights"].get<double>());
  EXPECT_EQ(mem[1], j["memory"]["kv"].get<double>());
  EXPECT_EQ(mem[2], j["memory"]["activations"].get<double>());
  EXPECT_EQ(mem[3], j["memory"]["buffers"].get<double>());
  const std::vector<double> speed = SvgValues(dom, "speed-chart");
  ASSERT_EQ(speed.size(), 6u);
  EXPECT_TRUE(rel_eq(speed[0], j["prediction"]["tok_s_all_fp32"].get<double>()));
  EXPECT_TRUE(rel_eq(speed[1], j["prediction"]["tok_s_all_int8"].get<double>()));
  EXPECT_TRUE(rel_eq(speed[2], j["prediction"]["tok_s"].get<double>()));
  EXPECT_TRUE(rel_eq(speed[3], j["measured"]["tok_s_all_fp32"].get<double>()));
  EXPECT_TRUE(rel_eq(speed[4], j["measured"]["tok_s_all_int8"].get<double>()));
  EXPECT_TRUE(rel_eq(speed[5], j["measured"]["tok_s"].get<double>()));
  // Bars are drawn to one scale per chart: fp32 and int8 times, predicted and measured speeds.
  ExpectWidthsFollowValues(SvgWidths(dom, "time-chart"), tim, "time-chart");
  ExpectWidthsFollowValues(SvgWidths(dom, "speed-chart"), speed, "speed-chart");
  ExpectWidthsFollowValues(SvgWidths(dom, "importance-chart"), imp, "importance-chart");
  // The memory parts fill the bar when the budget is far larger, instead of a sliver.
  const std::vector<double> mem_w = SvgWidths(dom, "memory-chart");
  ASSERT_EQ(mem_w.size(), 4u);
  ExpectWidthsFollowValues(mem_w, mem, "memory-chart");
  if (j["memory"]["budget"].get<double>() > 2 * (mem[0] + mem[1] + mem[2] + mem[3])) {
    EXPECT_GT(mem_w[0] + mem_w[1] + mem_w[2] + mem_w[3], 470.0);
  }
  // Nothing unmeasured shows as a raw sentinel.
  EXPECT_EQ(dom.find("-1.000"), std::string::npos);

  // The plan table: unit, KL, norm, times as printed (rounded) and precision/placement exactly.
  const auto rows = TableCells(dom, "plan-table");
  ASSERT_EQ(rows.size(), U + 1);
  for (size_t u = 0; u < U; ++u) {
    const auto& r = rows[u + 1];
    ASSERT_EQ(r.size(), 8u);
    EXPECT_EQ(r[0], layers[u]["unit"].get<std::string>());
    EXPECT_NEAR(std::stod(r[1]), layers[u]["kl_int8"].get<double>(), 5e-7);
    EXPECT_NEAR(std::stod(r[2]), layers[u]["act_norm"].get<double>(), 5e-5);
    EXPECT_NEAR(std::stod(r[3]), layers[u]["ms_fp32"].get<double>(), 5e-5);
    EXPECT_NEAR(std::stod(r[4]), layers[u]["ms_int8"].get<double>(), 5e-5);
    EXPECT_EQ(r[6], layers[u]["precision"].get<std::string>());
    EXPECT_EQ(r[7], layers[u]["placement"].get<std::string>());
  }
  // KV cache and head candidates, and the choices.
  for (const char* section : {"kv", "output"}) {
    const auto t = TableCells(dom, std::string(section) == "kv" ? "kv-table" : "head-table");
    const nlohmann::json& cands = j[section]["candidates"];
    ASSERT_EQ(t.size(), cands.size() + 1) << section;
    for (size_t i = 0; i < cands.size(); ++i) {
      const auto& r = t[i + 1];
      EXPECT_EQ(r[0], cands[i]["type"].get<std::string>());
      EXPECT_NEAR(std::stod(r[1]), cands[i]["bytes"].get<double>() / 1048576.0, 5e-4);
      EXPECT_NEAR(std::stod(r[2]), cands[i]["kl"].get<double>(), 5e-7);
      EXPECT_EQ(r.back() == "yes", cands[i]["type"] == j[section]["type"]) << section << " " << i;
    }
  }
  EXPECT_NE(dom.find("<b id=\"kv-type\">" + j["kv"]["type"].get<std::string>() + "</b>"), std::string::npos);
  EXPECT_NE(dom.find("<b id=\"head-type\">" + j["output"]["type"].get<std::string>() + "</b>"), std::string::npos);
  const auto q = TableCells(dom, "quality-table");
  ASSERT_GE(q.size(), 3u);
  EXPECT_NEAR(std::stod(q[1][1]), j["prediction"]["kl"].get<double>(), 5e-7);
  EXPECT_NEAR(std::stod(q[2][1]), j["profile"]["kl_plan"].get<double>(), 5e-7);
}

}  // namespace
}  // namespace trine::profiler
