// Turn input for `trine chat`: see line_reader.h.
#include "line_reader.h"

#include <editline/readline.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>

namespace trine::cli {

LineReader::LineReader() : interactive_(isatty(STDIN_FILENO) != 0 && isatty(STDOUT_FILENO) != 0) {
  if (!interactive_) return;
  using_history();
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    history_path_ = std::string(home) + "/.trine_history";
    read_history(history_path_.c_str());  // absent on the first run: nothing to read
  }
}

LineReader::~LineReader() {
  if (interactive_ && !history_path_.empty()) {
    write_history(history_path_.c_str());
    history_truncate_file(history_path_.c_str(), 1000);
  }
}

bool LineReader::ReadLine(const char* prompt, std::string* line) {
  if (interactive_) {
    char* got = readline(prompt);
    if (got == nullptr) return false;
    line->assign(got);
    std::free(got);
    return true;
  }
  std::fputs(prompt, stdout);
  std::fflush(stdout);
  return static_cast<bool>(std::getline(std::cin, *line));
}

bool LineReader::ReadTurn(const char* prompt, std::string* turn) {
  turn->clear();
  std::string line;
  if (!ReadLine(prompt, &line)) return false;
  if (line == "\"\"\"") {  // a block: everything up to the closing """ line
    bool first = true;
    while (ReadLine("", &line) && line != "\"\"\"") {
      if (!first) *turn += '\n';
      *turn += line;
      first = false;
    }
  } else {
    while (!line.empty() && line.back() == '\\') {  // continued on the next line
      line.pop_back();
      *turn += line + '\n';
      if (!ReadLine("", &line)) {
        line.clear();
        break;
      }
    }
    *turn += line;
  }
  if (interactive_ && !turn->empty()) add_history(turn->c_str());
  return true;
}

}  // namespace trine::cli
