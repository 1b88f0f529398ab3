// Entry points of the trine subcommands; each takes argv with argv[0] = the subcommand name and
// returns the process exit code (0 ok, 1 any error: bad input or bad usage).
#pragma once

namespace trine::cli {

int RunInspect(int argc, char** argv);
int RunQuantize(int argc, char** argv);
int RunTokenize(int argc, char** argv);
int RunGenerate(int argc, char** argv);
int RunPerplexity(int argc, char** argv);
int RunChat(int argc, char** argv);
int RunMkmodel(int argc, char** argv);
int RunBench(int argc, char** argv);
int RunProfile(int argc, char** argv);
int RunReport(int argc, char** argv);
int RunServe(int argc, char** argv);

}  // namespace trine::cli
