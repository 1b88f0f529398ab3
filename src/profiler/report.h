// Profiling report: report.json (the plan with its profile) and a self-contained report.html
// (inline SVG charts, no scripts or network), plus a compact terminal table.
#pragma once

#include <string>

#include "core/status.h"
#include "profiler/plan.h"

namespace trine::profiler {

// Writes <dir>/report.json and <dir>/report.html (creating dir).
Status WriteReport(const Plan& plan, const std::string& dir);
// The HTML document for a plan.
std::string ReportHtml(const Plan& plan);
// Per-unit rows: KL, activation norm, ms fp32/int8, precision, placement; then totals.
std::string TerminalTable(const Plan& plan);

}  // namespace trine::profiler
