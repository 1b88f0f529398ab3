// Helpers shared by the test suites: paths to shipped models and temporary files.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace trine::testing {

// Path of a file under models/ (e.g. "stories260K.gguf", "ref/stories260K.json").
std::string ModelPath(const std::string& name);
// A fresh path under the test temp directory; the file is removed when the process exits.
std::string TempPath(const std::string& name);
std::vector<uint8_t> ReadFileBytes(const std::string& path);
void WriteFileBytes(const std::string& path, const std::vector<uint8_t>& bytes);
// Runs the trine binary with `args` (shell-quoted by the caller); returns the exit code and
// captures stdout and stderr.
int RunTrine(const std::string& args, std::string* out, std::string* err);
// As RunTrine, with `input` fed to the program's standard input.
int RunTrineWithInput(const std::string& args, const std::string& input, std::string* out, std::string* err);
// n token ids drawn uniformly from [3, n_vocab) (past the usual special tokens) by a seeded RNG.
std::vector<int32_t> RandomTokenIds(int n_vocab, int n, uint32_t seed);

}  // namespace trine::testing
