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

std::vector<std::string> MapShortFlags(int argc, char** argv,
                                       const std::vector<std::pair<std::string, std::string>>& aliases) {
  std::vector<std::string> out;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    for (const auto& [from, to] : aliases) {
      if (a == from) {
        a = to;
        break;
      }
      if (a.rfind(from + "=", 0) == 0) {
        a = to + a.substr(from.size());
        break;
      }
    }
    out.push_back(a);
  }
  return out;
}

}  // namespace trine::cli
