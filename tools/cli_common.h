// Shared helpers of the trine subcommands: exit codes, error printing, llama.cpp-style flag
// spelling (multi-letter single-dash flags such as -sys mapped to long ones before cxxopts).
#pragma once

#include <string>
#include <vector>

#include "core/status.h"

namespace trine::cli {

constexpr int kExitOk = 0;
constexpr int kExitError = 1;  // bad input: file, prompt, value
// A bad command line is an error like any other (exit 1, as llama.cpp and issue #7 ask); it
// also prints a usage hint.
constexpr int kExitUsage = 1;

// Prints "error: <message>" to stderr and returns kExitError.
int Fail(const Status& status);
int Fail(const std::string& message);
// Prints "error: <message>" and a usage hint, returns kExitUsage.
int UsageError(const std::string& command, const std::string& message);

// Rewrites llama.cpp's multi-letter single-dash flags (e.g. "-sys", "-ngl") to "--long" forms,
// using `aliases` pairs {"-sys", "--system-prompt"}. Other arguments are left as they are.
std::vector<std::string> MapShortFlags(int argc, char** argv,
                                       const std::vector<std::pair<std::string, std::string>>& aliases);

}  // namespace trine::cli
