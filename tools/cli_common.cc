// Shared subcommand helpers.
#include "cli_common.h"

#include <cstdio>

namespace trine::cli {

int Fail(const Status& status) { return Fail(status.message()); }

int Fail(const std::string& message) {
  std::fprintf(stderr, "error: %s\n", message.c_str());
  return kExitError;
}

int UsageError(const std::string& command, const std::string& message) {
  std::fprintf(stderr, "error: %s\nusage: see 'trine %s --help'\n", message.c_str(), command.c_str());
  return kExitUsage;
}

}  // namespace trine::cli
