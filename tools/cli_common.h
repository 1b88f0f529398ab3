// Shared helpers of the trine subcommands: exit codes and error printing (the command-line parser
// is cli_args.h).
#pragma once

#include <string>

#include "core/status.h"

namespace trine::cli {

constexpr int kExitOk = 0;
constexpr int kExitError = 1;  // bad input: file, prompt, value
// A bad command line (an unknown option, a missing value, a stray argument): exit 2 with the
// option named and a usage hint, as getopt-style tools do.
constexpr int kExitUsage = 2;

// Prints "error: <message>" to stderr and returns kExitError.
int Fail(const Status& status);
int Fail(const std::string& message);
// Prints "error: <message>" and a usage hint, returns kExitUsage.
int UsageError(const std::string& command, const std::string& message);

}  // namespace trine::cli
