// `trine report DIR [--from FILE]`: re-renders DIR/report.html and prints the terminal table from
// DIR/report.json (or from a plan file; plans carry their profile).
#include <cxxopts.hpp>

#include <cstdio>

#include "cli_common.h"
#include "commands.h"
#include "profiler/plan.h"
#include "profiler/report.h"

namespace trine::cli {

using profiler::Plan;

int RunReport(int argc, char** argv) {
  cxxopts::Options opts("trine report",
                        "trine report DIR [--from FILE]: render DIR/report.html and the terminal table from a profile "
                        "report (DIR/report.json) or a plan file.");
  opts.add_options()("from", "plan or report JSON to render (default: DIR/report.json)", cxxopts::value<std::string>())(
      "h,help", "show this help");
  opts.positional_help("DIR");
  cxxopts::ParseResult a;
  try {
    a = opts.parse(argc, argv);
  } catch (const cxxopts::exceptions::exception& e) {
    return UsageError("report", e.what());
  }
  if (a.count("help")) {
    std::printf("%s\n", opts.help().c_str());
    return kExitOk;
  }
  if (a.unmatched().size() != 1) return UsageError("report", "expected one DIR");
  const std::string dir = a.unmatched()[0];
  const std::string from = a.count("from") ? a["from"].as<std::string>() : dir + "/report.json";
  Plan plan;
  Status st = profiler::ReadPlanFile(from, &plan);
  if (!st.ok()) return Fail(st);
  st = profiler::WriteReport(plan, dir);
  if (!st.ok()) return Fail(st);
  std::printf("%s", profiler::TerminalTable(plan).c_str());
  std::printf("report: %s/report.html\n", dir.c_str());
  return kExitOk;
}

}  // namespace trine::cli
