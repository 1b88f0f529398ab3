// report.json / report.html / terminal table for a plan.
#include "profiler/report.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace trine::profiler {
namespace {

std::string Fmt(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

std::string Esc(const std::string& s) {
  std::string o;
  for (char ch : s) {
    switch (ch) {
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '&': o += "&amp;"; break;
      case '"': o += "&quot;"; break;
      default: o += ch;
    }
  }
  return o;
}

std::string Mib(uint64_t b) { return Fmt("%.2f MiB", static_cast<double>(b) / (1024.0 * 1024.0)); }

// "n/a" where nothing was measured (the plan's -1), else the value.
std::string OrNa(double v, const char* fmt) { return v < 0 ? "n/a" : Fmt(fmt, v); }

// Horizontal grouped bar chart: one row per label, one bar per series, every bar on the chart's
// one scale (its largest value), so bars compare across series. Values not measured (< 0) get
// no bar and "n/a".
std::string BarChart(const std::string& id, const std::string& title, const std::vector<std::string>& labels,
                     const std::vector<std::pair<std::string, std::vector<double>>>& series, const char* fmt) {
  const char* colors[] = {"#3b6fb6", "#e08a2c", "#4a9b5a", "#b64a4a"};
  const int row_h = 14 * static_cast<int>(series.size()) + 8, left = 90, width = 520, bar_w = 330;
  const int height = 30 + row_h * static_cast<int>(labels.size()) + 20;
  std::ostringstream o;
  o << "<svg id=\"" << id << "\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height
    << "\" role=\"img\"><title>" << Esc(title) << "</title>";
  o << "<text x=\"4\" y=\"16\" font-size=\"13\" font-weight=\"bold\">" << Esc(title) << "</text>";
  double mx = 0;
  for (const auto& s : series) {
    for (double v : s.second) mx = std::max(mx, v);
  }
  if (mx <= 0) mx = 1;
  for (size_t s = 0; s < series.size(); ++s) {
    for (size_t i = 0; i < labels.size(); ++i) {
      const double v = i < series[s].second.size() ? series[s].second[i] : -1;
      const int y = 26 + row_h * static_cast<int>(i) + 14 * static_cast<int>(s);
      const double w = v < 0 ? 0.0 : bar_w * v / mx;
      o << "<rect x=\"" << left << "\" y=\"" << y << "\" width=\"" << Fmt("%.3f", w) << "\" height=\"12\" fill=\""
        << colors[s % 4] << "\" data-value=\"" << (v < 0 ? std::string("n/a") : Fmt("%.9g", v)) << "\"/>";
      o << "<text x=\"" << left + static_cast<int>(w) + 4 << "\" y=\"" << y + 10 << "\" font-size=\"10\">" << OrNa(v, fmt)
        << "</text>";
      if (s == 0) o << "<text x=\"4\" y=\"" << y + 10 << "\" font-size=\"11\">" << Esc(labels[i]) << "</text>";
    }
  }
  int lx = left;
  const int ly = height - 8;
  for (size_t s = 0; s < series.size(); ++s) {
    o << "<rect x=\"" << lx << "\" y=\"" << ly - 9 << "\" width=\"10\" height=\"10\" fill=\"" << colors[s % 4] << "\"/>";
    o << "<text x=\"" << lx + 14 << "\" y=\"" << ly << "\" font-size=\"10\">" << Esc(series[s].first) << "</text>";
    lx += 24 + 7 * static_cast<int>(series[s].first.size());
  }
  o << "</svg>\n";
  return o.str();
}

// One stacked bar of the memory parts against the budget.
std::string MemoryChart(const PlanMemory& m) {
  const std::vector<std::pair<std::string, uint64_t>> parts = {
      {"weights", m.weights}, {"KV cache", m.kv}, {"activations", m.activations}, {"buffers", m.buffers}};
  const char* colors[] = {"#3b6fb6", "#e08a2c", "#4a9b5a", "#8a5ab6"};
  uint64_t total = 0;
  for (const auto& p : parts) total += p.second;
  // Scaled to the parts when the budget is far larger (else they would be a sliver): the budget
  // line is then off the bar, and its label says so.
  const bool budget_on_scale = m.budget > 0 && m.budget <= 2 * std::max<uint64_t>(total, 1);
  const double scale_max =
      static_cast<double>(std::max<uint64_t>(budget_on_scale ? std::max(total, m.budget) : total, 1));
  const int width = 520, bar = 480;
  std::ostringstream o;
  o << "<svg id=\"memory-chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width
    << "\" height=\"120\" role=\"img\"><title>Memory vs budget</title>";
  o << "<text x=\"4\" y=\"16\" font-size=\"13\" font-weight=\"bold\">Memory vs budget</text>";
  double x = 10;
  for (size_t i = 0; i < parts.size(); ++i) {
    const double w = bar * static_cast<double>(parts[i].second) / scale_max;
    o << "<rect x=\"" << Fmt("%.2f", x) << "\" y=\"30\" width=\"" << Fmt("%.2f", std::max(w, 0.5))
      << "\" height=\"30\" fill=\"" << colors[i] << "\" data-value=\"" << parts[i].second << "\"/>";
    o << "<rect x=\"" << 10 + 120 * static_cast<int>(i) << "\" y=\"90\" width=\"10\" height=\"10\" fill=\"" << colors[i]
      << "\"/><text x=\"" << 24 + 120 * static_cast<int>(i) << "\" y=\"99\" font-size=\"10\">" << parts[i].first << " "
      << Mib(parts[i].second) << "</text>";
    x += w;
  }
  if (budget_on_scale) {
    const double bx = 10 + bar * static_cast<double>(m.budget) / scale_max;
    o << "<line id=\"budget-line\" x1=\"" << Fmt("%.2f", bx) << "\" y1=\"24\" x2=\"" << Fmt("%.2f", bx)
      << "\" y2=\"66\" stroke=\"#c00\" stroke-width=\"2\"/><text x=\"" << Fmt("%.2f", std::max(10.0, bx - 120))
      << "\" y=\"80\" font-size=\"10\" fill=\"#c00\">budget " << Mib(m.budget) << "</text>";
  } else {
    o << "<text x=\"10\" y=\"80\" font-size=\"10\" fill=\"#c00\">"
      << (m.budget == 0 ? std::string("no budget given")
                        : "budget " + Mib(m.budget) + ": " + Fmt("%.1f", static_cast<double>(m.budget) / std::max<double>(1, static_cast<double>(total))) +
                              "x the total, off this scale")
      << "</text>";
  }
  o << "</svg>\n";
  return o.str();
}

}  // namespace

std::string ReportHtml(const Plan& p) {
  std::vector<std::string> labels;
  std::vector<double> kl, norm, ms32, ms8;
  for (const PlanUnit& u : p.units) {
    labels.push_back(u.unit);
    kl.push_back(u.kl_int8);
    norm.push_back(u.act_norm);
    ms32.push_back(u.ms_fp32);
    ms8.push_back(u.ms_int8);
  }
  std::ostringstream o;
  o << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>trine profile: "
    << Esc(p.model_path) << "</title>\n<style>body{font-family:sans-serif;margin:20px;max-width:1100px}"
    << "table{border-collapse:collapse;font-size:12px}td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}"
    << "th{background:#eee}.l{text-align:left}.int8{color:#3b6fb6}.fp32{color:#b64a4a}svg{display:block;margin:8px 0}"
    << "</style>\n</head>\n<body>\n";
  o << "<h1>trine profile</h1>\n<p>model <code>" << Esc(p.model_path) << "</code> (hash " << Esc(p.model_hash) << ", "
    << Esc(p.hash_method) << "), isa " << Esc(p.isa) << ", " << p.n_threads << " threads, trine " << Esc(p.trine_version)
    << ". " << p.samples << " samples of ~" << p.tokens_per_sample << " tokens, profiled in "
    << Fmt("%.2f", p.profile_seconds) << " s.</p>\n";
  o << "<h2>Per-layer importance</h2>\n<p>Measured sensitivity (KL of the next-token distribution when only this unit "
       "uses int8 activations, vs all fp32) beside MCAP's activation-norm proxy (mean |x| of the unit input). "
       "Split-half ranking agreement: Spearman "
    << Fmt("%.3f", p.spearman) << ", top-k overlap " << Fmt("%.2f", p.topk_overlap) << ".</p>\n";
  // KL and mean |x| have different units: a chart each, each on its own scale.
  o << BarChart("importance-chart", "Measured sensitivity: KL with int8 activations only in this unit", labels,
                {{"KL (int8 only here)", kl}}, "%.3g");
  o << BarChart("norm-chart", "MCAP's proxy: mean |x| of the unit's input", labels, {{"mean |x| (MCAP)", norm}}, "%.3g");
  o << BarChart("time-chart", "Time per decoded token (ms)", labels, {{"fp32 activations", ms32}, {"int8 activations", ms8}},
                "%.3f");
  o << "<h2>Plan</h2>\n<table id=\"plan-table\">\n<tr><th class=\"l\">unit</th><th>KL int8</th><th>mean |x|</th><th>ms "
       "fp32</th><th>ms int8</th><th>weights</th><th>precision</th><th class=\"l\">placement</th></tr>\n";
  for (const PlanUnit& u : p.units) {
    o << "<tr><td class=\"l\">" << Esc(u.unit) << "</td><td>" << Fmt("%.6f", u.kl_int8) << "</td><td>"
      << Fmt("%.4f", u.act_norm) << "</td><td>" << Fmt("%.4f", u.ms_fp32) << "</td><td>" << Fmt("%.4f", u.ms_int8)
      << "</td><td>" << Mib(u.weight_bytes) << "</td><td class=\"" << Esc(u.precision) << "\">" << Esc(u.precision)
      << "</td><td class=\"l\">" << Esc(u.placement) << "</td></tr>\n";
  }
  o << "</table>\n<h3>Precision per tensor</h3>\n<table id=\"tensor-table\">\n<tr><th class=\"l\">tensor</th><th "
       "class=\"l\">activations</th></tr>\n";
  for (const auto& [name, prec] : p.tensors) {
    o << "<tr><td class=\"l\">" << Esc(name) << "</td><td class=\"l " << Esc(prec) << "\">" << Esc(prec) << "</td></tr>\n";
  }
  o << "</table>\n<h2>KV cache and output head</h2>\n<p>Candidates measured like the layers (KL against the "
       "same all-fp32 baseline with only this choice changed); the planner takes the combination that exceeds the "
       "memory budget least, then the fastest, within --max-kl.</p>\n";
  auto cand_table = [&](const char* id, const char* what, const std::vector<PlanCandidate>& cands,
                        const std::string& chosen, bool with_ms) {
    o << "<table id=\"" << id << "\">\n<tr><th class=\"l\">" << what << "</th><th>MiB</th><th>KL</th>"
      << (with_ms ? "<th>ms / token</th><th>requantize s</th>" : "") << "<th class=\"l\">chosen</th></tr>\n";
    for (const PlanCandidate& c : cands) {
      o << "<tr data-type=\"" << Esc(c.type) << "\" data-kl=\"" << Fmt("%.9g", c.kl) << "\" data-bytes=\"" << c.bytes
        << "\"><td class=\"l\">" << Esc(c.type) << "</td><td>" << Fmt("%.3f", static_cast<double>(c.bytes) / 1048576.0)
        << "</td><td>" << Fmt("%.6f", c.kl) << "</td>";
      if (with_ms) o << "<td>" << Fmt("%.4f", c.ms) << "</td><td>" << Fmt("%.4f", c.load_s) << "</td>";
      o << "<td class=\"l\">" << (c.type == chosen ? "yes" : "") << "</td></tr>\n";
    }
    o << "</table>\n";
  };
  o << "<p>KV cache: <b id=\"kv-type\">" << Esc(p.kv_type) << "</b> (" << Mib(p.memory.kv) << ").</p>\n";
  cand_table("kv-table", "KV cache type", p.kv_candidates, p.kv_type, false);
  o << "<p>Output head: <b id=\"head-type\">" << Esc(p.output_type.empty() ? p.output_file_type : p.output_type)
    << "</b> (file: " << Esc(p.output_file_type) << ").</p>\n";
  cand_table("head-table", "head weights", p.output_candidates, p.output_type, true);
  o << "<h2>Memory</h2>\n";
  o << MemoryChart(p.memory);
  o << "<p>resident " << Mib(p.memory.resident) << ", page cache " << Mib(p.memory.page_cache) << ", streamed "
    << Mib(p.memory.streamed) << " (read with pread through a ring of " << Mib(p.memory.stream_ring)
    << "), runtime " << Mib(p.memory.runtime)
    << ". Streamed layers are never mapped: each context reads them into its ring, the next one while the current "
       "one computes.</p>\n";
  o << "<h2>Speed and quality</h2>\n";
  std::vector<std::string> sl = {"all fp32", "all int8", "plan"};
  std::vector<double> pred = {p.pred_tok_s_fp32, p.pred_tok_s_int8, p.pred_tok_s};
  std::vector<double> meas = {p.measured_tok_s_fp32, p.measured_tok_s_int8, p.measured_tok_s};
  o << BarChart("speed-chart", "Decode tok/s: predicted vs measured", sl, {{"predicted", pred}, {"measured", meas}},
                "%.1f");
  o << "<table id=\"quality-table\"><tr><th class=\"l\">quality</th><th>KL</th></tr>\n"
    << "<tr><td class=\"l\">plan (predicted, sum of units)</td><td>" << Fmt("%.6f", p.pred_kl) << "</td></tr>\n"
    << "<tr><td class=\"l\">plan (measured)</td><td>" << OrNa(p.kl_plan, "%.6f") << "</td></tr>\n"
    << "<tr><td class=\"l\">all int8 (measured)</td><td>" << OrNa(p.kl_all_int8, "%.6f") << "</td></tr>\n"
    << "<tr><td class=\"l\">all fp32 re-run (measured)</td><td>" << OrNa(p.kl_all_fp32, "%.6f") << "</td></tr>\n"
    << "<tr><td class=\"l\">perplexity plan / all fp32 (first windows of --ppl-text)</td><td>"
    << OrNa(p.ppl_plan, "%.4f") << " / " << OrNa(p.ppl_fp32, "%.4f") << "</td></tr>\n"
    << "<tr><td class=\"l\">budget --max-kl</td><td>" << Fmt("%.6f", p.key.max_kl) << "</td></tr>\n</table>\n";
  o << "</body>\n</html>\n";
  return o.str();
}

std::string TerminalTable(const Plan& p) {
  std::ostringstream o;
  char line[256];
  std::snprintf(line, sizeof line, "%-8s %12s %9s %9s %9s %10s %-6s %-10s\n", "unit", "KL int8", "mean|x|", "ms fp32",
                "ms int8", "MiB", "prec", "placement");
  o << line;
  for (const PlanUnit& u : p.units) {
    std::snprintf(line, sizeof line, "%-8s %12.6f %9.4f %9.4f %9.4f %10.3f %-6s %-10s\n", u.unit.c_str(), u.kl_int8,
                  u.act_norm, u.ms_fp32, u.ms_int8, static_cast<double>(u.weight_bytes) / 1048576.0,
                  u.precision.c_str(), u.placement.c_str());
    o << line;
  }
  std::snprintf(line, sizeof line, "predicted: %.1f tok/s (all fp32 %.1f, all int8 %.1f), KL %.6f (max %.6f)",
                p.pred_tok_s, p.pred_tok_s_fp32, p.pred_tok_s_int8, p.pred_kl, p.key.max_kl);
  o << line;
  if (p.kl_plan >= 0) o << Fmt(", measured KL %.6f", p.kl_plan);
  if (p.measured_tok_s > 0) o << Fmt(", measured %.1f tok/s", p.measured_tok_s);
  o << "\n";
  std::snprintf(line, sizeof line, "split-half ranking agreement: Spearman %.3f, top-k overlap %.2f\n", p.spearman,
                p.topk_overlap);
  o << line;
  o << "KV cache " << p.kv_type;
  if (!p.kv_candidates.empty()) {
    o << " (candidates";
    for (const PlanCandidate& c : p.kv_candidates) o << " " << c.type << Fmt(" KL %.6f", c.kl) << " " << Mib(c.bytes) << ";";
    o << ")";
  }
  o << "; head " << (p.output_type.empty() ? p.output_file_type : p.output_type);
  if (!p.output_candidates.empty()) {
    o << " (candidates";
    for (const PlanCandidate& c : p.output_candidates) {
      o << " " << c.type << Fmt(" KL %.6f", c.kl) << Fmt(" %.4f ms", c.ms) << ";";
    }
    o << ")";
  }
  o << "\n";
  o << "memory: weights " << Mib(p.memory.weights) << ", KV " << Mib(p.memory.kv) << ", activations "
    << Mib(p.memory.activations) << ", buffers " << Mib(p.memory.buffers) << ", stream ring "
    << Mib(p.memory.stream_ring) << ", runtime " << Mib(p.memory.runtime) << " / budget " << Mib(p.memory.budget)
    << "\n";
  return o.str();
}

Status WriteReport(const Plan& plan, const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return IoError("cannot create report directory " + dir + ": " + ec.message());
  TRINE_RETURN_IF_ERROR(WritePlanFile(plan, dir + "/report.json"));
  std::ofstream f(dir + "/report.html", std::ios::binary | std::ios::trunc);
  if (!f) return IoError("cannot write " + dir + "/report.html: " + std::strerror(errno));
  f << ReportHtml(plan);
  if (!f) return IoError("cannot write " + dir + "/report.html");
  return Status::Ok();
}

}  // namespace trine::profiler
