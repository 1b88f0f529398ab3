// Reading the user's turns in `trine chat`. On a terminal: libedit (Debian's libedit-dev) gives
// line editing, the arrow keys and a history kept in ~/.trine_history. From a pipe or a file:
// plain lines. Either way a turn may span lines: a line ending in '\' continues on the next
// (llama-cli's convention), and a line of just """ opens a block that the next """ line closes.
#pragma once

#include <string>

namespace trine::cli {

class LineReader {
 public:
  LineReader();
  ~LineReader();
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;

  // Reads one turn after showing `prompt`; false at end of input (Ctrl-D, or Ctrl-C at the prompt).
  bool ReadTurn(const char* prompt, std::string* turn);
  bool interactive() const { return interactive_; }

 private:
  // One physical line; false at end of input.
  bool ReadLine(const char* prompt, std::string* line);

  bool interactive_ = false;
  std::string history_path_;
};

}  // namespace trine::cli
