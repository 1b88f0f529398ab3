// `trine report DIR [--from FILE]`: re-renders DIR/report.html and prints the terminal table from
// DIR/report.json (or from a plan file; plans carry their profile).
#include <cxxopts.hpp>

#include <cstdio>

#include "cli_args.h"
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
      "h,help", "show this help")("dir", "", cxxopts::value<std::string>());
  opts.positional_help("DIR");
  cxxopts::ParseResult a;
  if (const int rc = ParseCommand("report", opts, argc, argv, &a, "dir"); rc >= 0) return rc;
  if (!a.count("dir")) return UsageError("report", "expected one DIR");
  const std::string dir = a["dir"].as<std::string>();
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
