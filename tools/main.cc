// `trine`: one binary, one subcommand per job (llama.cpp's tools, under one roof).
#include <cstdio>
#include <exception>
#include <new>
#include <string>

#include "cli_common.h"
#include "commands.h"

namespace {

struct Command {
  const char* name;
  int (*run)(int, char**);
  const char* help;
};

const Command kCommands[] = {
    {"inspect", trine::cli::RunInspect, "show a GGUF file's architecture, metadata and tensors"},
    {"quantize", trine::cli::RunQuantize, "convert a GGUF model's weights to another type"},
    {"tokenize", trine::cli::RunTokenize, "print the token ids of a text"},
    {"generate", trine::cli::RunGenerate, "generate text from a prompt"},
    {"chat", trine::cli::RunChat, "interactive chat with the model's template"},
    {"perplexity", trine::cli::RunPerplexity, "measure perplexity on a text file"},
    {"bench", trine::cli::RunBench, "prompt and generation speed, llama-bench style (tok/s, GB/s)"},
    {"profile", trine::cli::RunProfile, "profile layers, plan activation precision and placement (cached)"},
    {"report", trine::cli::RunReport, "render a profile report (report.html) and table"},
    {"serve", trine::cli::RunServe, "OpenAI-compatible HTTP server with continuous batching"},
    {"mkmodel", trine::cli::RunMkmodel, "write a random-weight GGUF with a real model's shapes"},
};

void PrintUsage(std::FILE* f) {
  std::fprintf(f, "usage: trine <command> [options]\n\ncommands:\n");
  for (const auto& c : kCommands) std::fprintf(f, "  %-12s %s\n", c.name, c.help);
  std::fprintf(f, "\nRun 'trine <command> --help' for a command's options.\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    PrintUsage(stderr);
    return trine::cli::kExitUsage;
  }
  const std::string cmd = argv[1];
  if (cmd == "-h" || cmd == "--help" || cmd == "help") {
    PrintUsage(stdout);
    return 0;
  }
  for (const auto& c : kCommands) {
    if (cmd == c.name) {
      try {
        return c.run(argc - 1, argv + 1);
      } catch (const std::bad_alloc&) {
        return trine::cli::Fail("out of memory");
      } catch (const std::exception& e) {
        return trine::cli::Fail(std::string("internal error: ") + e.what());
      }
    }
  }
  std::fprintf(stderr, "error: unknown command '%s'\n", cmd.c_str());
  PrintUsage(stderr);
  return trine::cli::kExitUsage;
}
