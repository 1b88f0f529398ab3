// One command-line parser for every subcommand: llama.cpp's spellings, --help, and usage errors.
//
// llama.cpp users bring their flags. Its multi-letter single-dash flags (-ctk, -sys, -np, -ngl,
// ...), which cxxopts would read as bundled short options, are mapped to their long forms. Flags
// that ask trine for nothing it does differently (-ngl 0, -fa, -ub, -tb, --color) are accepted with
// a one-line note; flags that ask for what trine cannot do (-ngl 99, -hf) are errors that say so;
// a command's own flags (serve's -np, chat's -sys, generate's -e/-r) go to the command.
#pragma once

#include <cxxopts.hpp>

#include <functional>
#include <string>

namespace trine::cli {

// Parses argv (argv[0] = the subcommand name) with `opts`. Returns -1 when the command should go
// on with *out; otherwise the exit code to return: 0 after printing --help, kExitUsage for bad
// usage (an unknown option, a missing value, a stray argument: named in the message),
// kExitError for a llama.cpp flag asking for what trine cannot do. `positional` names the
// option that takes positional arguments ("" for none); `print_help` replaces opts.help() for
// commands with their own help text.
int ParseCommand(const std::string& command, cxxopts::Options& opts, int argc, char** argv, cxxopts::ParseResult* out,
                 const std::string& positional = "", const std::function<void()>& print_help = {});

// Backslash escapes as llama.cpp's -e does (on by default there): \n \r \t \' \" \\ and \xHH;
// others are kept as typed.
std::string ProcessEscapes(const std::string& s);

}  // namespace trine::cli
